package e2e

// In-process benchmarks of the reconcile loop: the real store (SQLite), the
// real speaker (embedded GoBGP, no listener) and the real reconciler,
// wired as main.go wires them, with the test watching the speaker's mirror.
// Sizes: RIBKEEPER_BENCH_RULES (default 100,000), RIBKEEPER_BENCH_REPAIRS
// (default 1,000), RIBKEEPER_BENCH_EXPIRING (default 10,000).

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
)

// watchedSpeaker is the speaker as the reconciler sees it, with two
// additions for the benchmark: it counts the reconciler's RIB writes, and
// it fans the speaker's one-slot Changes channel out to the reconciler and
// to the test (a second reader of the same channel would steal the
// reconciler's wake-ups).
type watchedSpeaker struct {
	*bgp.Speaker
	announces, withdraws atomic.Int64
	toReconciler, toTest chan struct{}
}

func (w *watchedSpeaker) Announce(ctx context.Context, rules []flowspec.Rule) []error {
	w.announces.Add(int64(len(rules)))
	return w.Speaker.Announce(ctx, rules)
}

func (w *watchedSpeaker) Withdraw(ctx context.Context, ms []flowspec.Match) []error {
	w.withdraws.Add(int64(len(ms)))
	return w.Speaker.Withdraw(ctx, ms)
}

func (w *watchedSpeaker) Changes() <-chan struct{} { return w.toReconciler }

func (w *watchedSpeaker) fanOut(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.Speaker.Changes():
			for _, c := range []chan struct{}{w.toReconciler, w.toTest} {
				select {
				case c <- struct{}{}:
				default:
				}
			}
		}
	}
}

// wait returns after a mirror change or after at most d (a change that
// lands between two reads of the test would otherwise be missed).
func (w *watchedSpeaker) wait(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.toTest:
	case <-t.C:
	}
}

type inProcess struct {
	st *store.Store
	sp *watchedSpeaker
	rc *reconcile.Reconciler
}

// startInProcess wires store, speaker and reconciler and runs the loop
// until the benchmark ends.
func startInProcess(b *testing.B, cfg reconcile.Config) *inProcess {
	b.Helper()
	log := hclog.New(&hclog.LoggerOptions{Name: "bench", Level: hclog.Warn, Output: os.Stderr})
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, store.Config{Driver: "sqlite", Path: filepath.Join(b.TempDir(), "rk.db"), Site: "bench"})
	if err != nil {
		b.Fatalf("store: %v", err)
	}
	sp := bgp.New(log.Named("bgp"), bgp.Config{ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: -1})
	if err := sp.Start(ctx); err != nil {
		b.Fatalf("speaker: %v", err)
	}
	w := &watchedSpeaker{Speaker: sp, toReconciler: make(chan struct{}, 1), toTest: make(chan struct{}, 1)}
	rc := reconcile.New(log.Named("reconcile"), st, w, cfg)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); w.fanOut(ctx) }()
	go func() { defer wg.Done(); rc.Run(ctx) }()
	b.Cleanup(func() {
		log.SetLevel(hclog.Off) // the stop cancels in-flight store writes; that is not news
		cancel()
		wg.Wait()
		sp.Stop()
		st.Close()
	})
	return &inProcess{st: st, sp: w, rc: rc}
}

// load stores rules [0, n), expiring at expires(i) (zero: never), and
// waits until the mirror holds them all. It returns the stored rows.
func (p *inProcess) load(b *testing.B, n int, expires func(i int) time.Time) []store.Rule {
	b.Helper()
	rows := make([]store.Rule, 0, n)
	for i := 0; i < n; i += 1000 {
		ins := make([]store.Input, 0, 1000)
		for j := i; j < min(i+1000, n); j++ {
			in := store.Input{Rule: mustRule(b, j), Reason: "bench", Actor: "bench"}
			if expires != nil {
				in.ExpiresAt = expires(j)
			}
			ins = append(ins, in)
		}
		got, err := p.st.UpsertMany(context.Background(), ins)
		if err != nil {
			b.Fatalf("store rules: %v", err)
		}
		rows = append(rows, got...)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for p.sp.Len() < n {
		if time.Now().After(deadline) {
			b.Fatalf("mirror holds %d paths after 5 min, want %d", p.sp.Len(), n)
		}
		p.sp.wait(100 * time.Millisecond)
	}
	return rows
}

// percentiles reports p50, p99 and max of ds in milliseconds.
func percentiles(b *testing.B, ds []time.Duration, prefix string) {
	if len(ds) == 0 {
		b.Fatal("no samples")
	}
	slices.Sort(ds)
	q := func(p float64) float64 {
		return float64(ds[min(int(p*float64(len(ds))), len(ds)-1)]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.50), prefix+"p50-ms")
	b.ReportMetric(q(0.99), prefix+"p99-ms")
	b.ReportMetric(float64(ds[len(ds)-1])/float64(time.Millisecond), prefix+"max-ms")
}

// BenchmarkResyncPass: N rules desired and N paths in the RIB, nothing to
// change; the periodic full resync pass (interval set to 300 ms here) is
// timed by the reconciler itself (PassResult.Duration) over 20 full passes
// (PassResult.Full; other-passes counts the passes in between that were
// not full, e.g. skipped because nothing changed).
// RIB writes during those passes are counted (want 0). The reconciler
// reads the RIB only through the speaker's mirror (Speaker.Paths): no
// ListPath exists on that path. store-read-ms is one ActiveRules call of
// the same store, for scale.
func BenchmarkResyncPass(b *testing.B) {
	n := benchRules(b)
	for range b.N {
		b.StopTimer()
		p := startInProcess(b, reconcile.Config{ResyncInterval: 300 * time.Millisecond})
		p.load(b, n, nil)
		// Let the loop settle: status write-back and the first resyncs.
		time.Sleep(2 * time.Second)
		a0, w0 := p.sp.announces.Load(), p.sp.withdraws.Load()
		b.StartTimer()
		var ds []time.Duration
		other := 0
		last := p.rc.LastPass().Started
		deadline := time.Now().Add(5 * time.Minute)
		for len(ds) < 20 {
			if time.Now().After(deadline) {
				b.Fatalf("only %d passes in 5 min", len(ds))
			}
			time.Sleep(5 * time.Millisecond)
			lp := p.rc.LastPass()
			if lp.Started.Equal(last) {
				continue
			}
			last = lp.Started
			if !lp.Full {
				other++ // a pass woken by something else (skipped or incremental)
				continue
			}
			ds = append(ds, lp.Duration)
			if len(ds) == 1 {
				b.Logf("full pass at %d rules: %+v", n, lp)
			}
		}
		b.StopTimer()
		t0 := time.Now()
		rows, err := p.st.ActiveRules(context.Background())
		if err != nil || len(rows) != n {
			b.Fatalf("ActiveRules: %d rows, %v", len(rows), err)
		}
		b.ReportMetric(float64(time.Since(t0))/float64(time.Millisecond), "store-read-ms")
		b.ReportMetric(float64(n), "rules")
		percentiles(b, ds, "pass-")
		b.ReportMetric(float64(p.sp.announces.Load()-a0+p.sp.withdraws.Load()-w0), "rib-writes")
		b.ReportMetric(float64(other), "other-passes")
	}
}

// BenchmarkDriftRepair: with N rules converged, a path is withdrawn behind
// the reconciler's back (the test calls the speaker directly, the store
// still wants the path) and timed until the mirror shows it back, one
// repair after the other, RIBKEEPER_BENCH_REPAIRS times or for at most 3
// minutes (repairs reports how many were done). The default
// resync interval (5 min) is kept: only the mirror's wake-up can trigger
// the repair.
func BenchmarkDriftRepair(b *testing.B) {
	n := benchRules(b)
	repairs := benchEnv(b, "RIBKEEPER_BENCH_REPAIRS", 1000)
	for range b.N {
		b.StopTimer()
		p := startInProcess(b, reconcile.Config{})
		rows := p.load(b, n, nil)
		time.Sleep(2 * time.Second)
		readded0 := p.rc.Drift().Readded
		b.StartTimer()
		ds := make([]time.Duration, 0, repairs)
		stop := time.Now().Add(3 * time.Minute)
		for i := 0; i < repairs && time.Now().Before(stop); i++ {
			m := rows[(i*7919)%len(rows)].Rule.Match // spread over the table
			before := p.rc.Drift().Readded
			t0 := time.Now()
			if err := p.sp.Speaker.Withdraw(context.Background(), []flowspec.Match{m})[0]; err != nil {
				b.Fatalf("withdraw behind the reconciler's back: %v", err)
			}
			gone := false
			for {
				_, present := p.sp.Lookup(m)
				if !present {
					gone = true
				} else if gone || p.rc.Drift().Readded > before {
					break
				}
				if time.Since(t0) > time.Minute {
					b.Fatalf("repair %d: path not back after 1 min", i)
				}
				p.sp.wait(time.Millisecond)
			}
			ds = append(ds, time.Since(t0))
		}
		b.StopTimer()
		b.ReportMetric(float64(n), "rules")
		b.ReportMetric(float64(len(ds)), "repairs")
		b.ReportMetric(float64(p.rc.Drift().Readded-readded0), "readded")
		percentiles(b, ds, "")
	}
}

// BenchmarkExpiryLateness: RIBKEEPER_BENCH_EXPIRING rules with expires_at
// spread evenly over 10–20 s from now; for each, the time from its stored
// expires_at until the mirror no longer holds its path. The test wakes on
// every mirror change (and at least every millisecond).
func BenchmarkExpiryLateness(b *testing.B) {
	n := benchEnv(b, "RIBKEEPER_BENCH_EXPIRING", 10_000)
	for range b.N {
		b.StopTimer()
		p := startInProcess(b, reconcile.Config{})
		base := time.Now().Add(10 * time.Second)
		rows := p.load(b, n, func(i int) time.Time {
			return base.Add(time.Duration(i) * 10 * time.Second / time.Duration(n))
		})
		if time.Now().After(rows[0].ExpiresAt) {
			b.Fatalf("loading %d rules took past the first expiry", n)
		}
		slices.SortFunc(rows, func(x, y store.Rule) int { return x.ExpiresAt.Compare(y.ExpiresAt) })
		b.StartTimer()
		var (
			ds      = make([]time.Duration, 0, n)
			pending []store.Rule // expired, path still seen
			next    int
			early   int
		)
		deadline := rows[len(rows)-1].ExpiresAt.Add(time.Minute)
		for len(ds) < n {
			now := time.Now()
			if now.After(deadline) {
				b.Fatalf("%d of %d expired paths still in the RIB a minute after the last expiry", n-len(ds), n)
			}
			for next < len(rows) && !rows[next].ExpiresAt.After(now) {
				pending = append(pending, rows[next])
				next++
			}
			keep := pending[:0]
			for _, r := range pending {
				if _, present := p.sp.Lookup(r.Rule.Match); present {
					keep = append(keep, r)
				} else {
					ds = append(ds, now.Sub(r.ExpiresAt))
				}
			}
			pending = keep
			// A path gone before its expiry is an error of its own.
			if next < len(rows) {
				if _, present := p.sp.Lookup(rows[next].Rule.Match); !present && time.Now().Before(rows[next].ExpiresAt) {
					early++
					ds = append(ds, 0)
					next++
				}
			}
			p.sp.wait(time.Millisecond)
		}
		b.StopTimer()
		b.ReportMetric(float64(n), "rules")
		b.ReportMetric(float64(early), "early")
		percentiles(b, ds, "")
	}
}
