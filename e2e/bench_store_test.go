package e2e

// Store benchmarks, in-process: propagation of a rule from one instance to
// another's RIB over PostgreSQL LISTEN/NOTIFY, and the sustained API write
// rate into each engine. Run them with
//
//	go test ./e2e -run '^$' -bench 'Propagation|APIWrite' -benchtime 1x   # propagation: one op is 1,000 rules
//	go test ./e2e -run '^$' -bench 'APIWrite'
//
// PostgreSQL runs from pgtest (fsync off), so its write figures are an
// upper bound; SQLite runs with synchronous=FULL as in production.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
	"github.com/ribkeeper/ribkeeper/store/pgtest"
)

// storeBenchText is a distinct rule for each i.
func storeBenchText(i int) string {
	return fmt.Sprintf("match destination 10.%d.%d.%d/32 protocol ==6 then discard", i>>16&255, i>>8&255, i&255)
}

func storeBenchOpen(b *testing.B, cfg store.Config) *store.Store {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := store.Open(ctx, cfg)
	if err != nil {
		b.Fatalf("store.Open(%s): %v", cfg.Driver, err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// storeBenchSite is one appliance in-process: store, speaker, reconciler.
type storeBenchSite struct {
	st *store.Store
	sp *bgp.Speaker
}

func startStoreBenchSite(b *testing.B, ctx context.Context, dsn, site string, id byte) storeBenchSite {
	b.Helper()
	log := hclog.NewNullLogger()
	st := storeBenchOpen(b, store.Config{Driver: "postgres", DSN: dsn, Site: site})
	sp := bgp.New(log, bgp.Config{ASN: 65000, RouterID: netip.AddrFrom4([4]byte{10, 255, 0, id}), ListenPort: -1})
	if err := sp.Start(ctx); err != nil {
		b.Fatalf("start speaker %s: %v", site, err)
	}
	b.Cleanup(sp.Stop)
	rc := reconcile.New(log, st, sp, reconcile.Config{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		rc.Run(ctx)
	}()
	b.Cleanup(func() { <-done }) // the caller cancels ctx in a cleanup registered later, so run first
	return storeBenchSite{st: st, sp: sp}
}

// BenchmarkPropagation measures the time from an Upsert on instance A
// returning to the rule being in instance B's RIB mirror, both instances
// sharing one PostgreSQL (LISTEN/NOTIFY, then B's reconcile pass and
// announce). One op is 1,000 rules written one at a time; p50-ms and
// p99-ms are over every rule of the run. Target: p99 < 100 ms.
func BenchmarkPropagation(b *testing.B) {
	const perOp = 1000
	dsn := pgtest.Start(b)
	ctx, cancel := context.WithCancel(context.Background())
	a := startStoreBenchSite(b, ctx, dsn, "a", 1)
	bb := startStoreBenchSite(b, ctx, dsn, "b", 2)
	b.Cleanup(cancel)

	rules := make([]flowspec.Rule, perOp*b.N)
	for i := range rules {
		r, err := flowspec.Parse(storeBenchText(i))
		if err != nil {
			b.Fatal(err)
		}
		rules[i] = r
	}
	lat := make([]time.Duration, 0, len(rules))
	b.ResetTimer()
	for i, r := range rules {
		if _, _, err := a.st.Upsert(ctx, store.Input{Rule: r, Actor: "bench"}); err != nil {
			b.Fatalf("rule %d: %v", i, err)
		}
		start := time.Now()
		// Poll B's mirror: a map lookup, cheap at this rate. The speaker's
		// Changes channel belongs to B's reconciler.
		for {
			if _, ok := bb.sp.Lookup(r.Match); ok {
				break
			}
			if time.Since(start) > 10*time.Second {
				b.Fatalf("rule %d (%s) not in B's RIB after 10s", i, r)
			}
			time.Sleep(100 * time.Microsecond)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
	b.ReportMetric(ms(1), "max-ms")
}

// storeBenchRIB is an empty, initialised RIB: the write benchmarks measure
// the API and the store, not BGP.
type storeBenchRIB struct{}

func (storeBenchRIB) Paths(func(flowspec.Match, flowspec.Action)) bool { return true }
func (storeBenchRIB) Peers(context.Context) ([]bgp.PeerStatus, error)  { return nil, nil }
func (storeBenchRIB) Delivery(flowspec.Match) ([]string, int)          { return nil, 0 }
func (storeBenchRIB) NotSent(flowspec.Match) []string                  { return nil }
func (storeBenchRIB) PathAges(context.Context) (map[flowspec.Match]time.Time, error) {
	return nil, nil
}

// storeBenchAPI serves an api.Server over st on a unix socket and returns
// an HTTP client for it that keeps enough connections open for parallel
// callers.
func storeBenchAPI(b *testing.B, st *store.Store) *http.Client {
	b.Helper()
	sock := filepath.Join(b.TempDir(), "api.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- api.New(nil, st, admit.New(admit.Config{Store: st}), storeBenchRIB{}).Serve(ctx, sock) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("api serve: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("api socket %s did not appear", sock)
		}
		time.Sleep(10 * time.Millisecond)
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
	}
	b.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

// storeBenchPost sends body to path and wants 201 Created or 200 OK;
// header holds extra request headers, as name, value pairs.
func storeBenchPost(c *http.Client, path string, body []byte, header ...string) error {
	req, err := http.NewRequest(http.MethodPost, "http://ribkeeper"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, msg)
	}
	return nil
}

// storeBenchEngines opens a fresh store of each engine; PostgreSQL shares
// one server across the runs of a benchmark.
func storeBenchEngines(b *testing.B, run func(b *testing.B, open func(b *testing.B) *store.Store)) {
	b.Run("sqlite", func(b *testing.B) {
		run(b, func(b *testing.B) *store.Store {
			return storeBenchOpen(b, store.Config{Driver: "sqlite", Path: filepath.Join(b.TempDir(), "rk.db")})
		})
	})
	srv := pgtest.StartServer(b) // skips (after sqlite ran) when PostgreSQL is missing, unless CI is set
	b.Run("postgres", func(b *testing.B) {
		run(b, func(b *testing.B) *store.Store {
			return storeBenchOpen(b, store.Config{Driver: "postgres", DSN: srv.NewDatabase(b)})
		})
	})
}

// BenchmarkAPIWriteSingle measures POST /v1/rules, one new rule per
// request, from 64 parallel clients per CPU. Target on SQLite: ≥ 5,000
// rules/s.
func BenchmarkAPIWriteSingle(b *testing.B) {
	storeBenchEngines(b, func(b *testing.B, open func(b *testing.B) *store.Store) {
		c := storeBenchAPI(b, open(b))
		bodies := make([][]byte, b.N)
		for i := range bodies {
			bodies[i], _ = json.Marshal(api.AddRuleRequest{Text: storeBenchText(i), Reason: "bench"})
		}
		var next atomic.Int64
		b.SetParallelism(64)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := storeBenchPost(c, "/v1/rules", bodies[next.Add(1)-1]); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rules/s")
	})
}

// BenchmarkAPIWriteSequential is BenchmarkAPIWriteSingle with one client:
// every request waits for its own commit.
func BenchmarkAPIWriteSequential(b *testing.B) {
	storeBenchEngines(b, func(b *testing.B, open func(b *testing.B) *store.Store) {
		c := storeBenchAPI(b, open(b))
		bodies := make([][]byte, b.N)
		for i := range bodies {
			bodies[i], _ = json.Marshal(api.AddRuleRequest{Text: storeBenchText(i), Reason: "bench"})
		}
		b.ResetTimer()
		for i := range b.N {
			if err := storeBenchPost(c, "/v1/rules", bodies[i]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rules/s")
	})
}

// BenchmarkAPIWriteBatch: RIBKEEPER_BENCH_WRITES new rules (default
// 100,000) through POST /v1/rules/batch, 1,000 a request, one client,
// into a fresh store: each answer (the ids, Prefer: return=minimal, as a
// feed asks) comes after the durable commit. One op
// is the whole load (run with -benchtime 1x). Target on SQLite: ≥ 50,000
// rules/s.
func BenchmarkAPIWriteBatch(b *testing.B) { benchAPIWriteBatch(b, 1) }

// BenchmarkAPIWriteBatchLoaded is BenchmarkAPIWriteBatch under full load:
// four clients at once, each sending its next batch as soon as its last
// one is answered, so that one batch's commit overlaps the next one's
// decoding and checks. cpu-µs/rule is the CPU of this process (server,
// store and clients) per rule.
func BenchmarkAPIWriteBatchLoaded(b *testing.B) { benchAPIWriteBatch(b, 4) }

func benchAPIWriteBatch(b *testing.B, clients int) {
	const batch = 1000
	n := benchEnv(b, "RIBKEEPER_BENCH_WRITES", 100_000)
	batches := (n + batch - 1) / batch
	bodies := make([][]byte, batches)
	for i := range bodies {
		reqs := make([]api.AddRuleRequest, 0, batch)
		for j := i * batch; j < min((i+1)*batch, n); j++ {
			reqs = append(reqs, api.AddRuleRequest{Text: storeBenchText(j), Reason: "bench"})
		}
		bodies[i], _ = json.Marshal(api.AddRulesRequest{Rules: reqs})
	}
	storeBenchEngines(b, func(b *testing.B, open func(b *testing.B) *store.Store) {
		var el, cpu time.Duration
		for range b.N {
			b.StopTimer()
			c := storeBenchAPI(b, open(b))
			var next atomic.Int64
			var wg sync.WaitGroup
			b.StartTimer()
			t0, cpu0 := time.Now(), cpuTime(b, os.Getpid())
			for range clients {
				wg.Go(func() {
					for {
						i := int(next.Add(1) - 1)
						if i >= len(bodies) || b.Failed() {
							return
						}
						if err := storeBenchPost(c, "/v1/rules/batch", bodies[i], "Prefer", "return=minimal"); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			el, cpu = el+time.Since(t0), cpu+cpuTime(b, os.Getpid())-cpu0
		}
		b.ReportMetric(float64(n*b.N)/el.Seconds(), "rules/s")
		// The CPU this process (API, store and the clients) spent per
		// rule: on a shared machine, steadier than the rate.
		b.ReportMetric(float64(cpu.Microseconds())/float64(n*b.N), "cpu-µs/rule")
	})
}
