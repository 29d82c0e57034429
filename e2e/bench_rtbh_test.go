package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"github.com/ribkeeper/ribkeeper/flowspec"
)

// rtbhBatch is the routes per POST /v1/rules/batch of BenchmarkRTBH.
const rtbhBatch = 5000

// rtbhNextHop is the site next hop of the RTBH benchmarks (startSetDaemon's
// [rtbh] next_hop_ipv4), which the raw baseline sets on its paths too.
var rtbhNextHop = netip.MustParseAddr("192.0.2.99")

// BenchmarkRTBH: RIBKEEPER_BENCH_RTBH (default 1,000,000) distinct /32
// blackhole routes (setRoute: under 10.0.0.0/8) until one BIRD peer holds
// them all. ours: the built binary (SQLite), the routes written through
// POST /v1/rules/batch, 5,000 a request, one client; gobgp: a raw GoBGP
// v4.8.0 process given the same paths (ORIGIN IGP, NEXT_HOP, COMMUNITIES
// BLACKHOLE and NO_EXPORT: what bgp/ builds for "then blackhole") with
// AddPath, 2,000 a call. Each has its own BIRD, behind a wireCounter.
// rate is routes/s from the first call until BIRD held all of them,
// write-s the time to hand them over, status-s (ours) until every route's
// status read as announced (GET /v1/status), MB-peak the process's VmHWM,
// MB-rss its settled RSS (settledRSS, from then on) and B-rss/path that
// over the same process's settled RSS with the session up and no routes,
// per route.
//
// gc-cycles (ours) counts the daemon's collection cycles from the first
// call until BIRD held every route.
// cpu-s and bird-cpu-s are the CPU time the speaker process and BIRD used
// from the first call until BIRD held every route, cpu-status-s (ours)
// the daemon's until every status read as announced: on a shared machine
// they say what the load cost where the wall times cannot.
//
// RIBKEEPER_BENCH_PROFILE=DIR saves a CPU profile and trace of the daemon
// over RIBKEEPER_BENCH_PROF_S seconds (default 20) from the first call
// (rtbh-start.cpu.pb.gz, rtbh-start.trace: profileWhile), or from where
// RIBKEEPER_BENCH_PROF_AT says: "api" the end of the API writes (the
// speaker catching up alone), "bird" once BIRD held every route (the
// statuses trailing); and its heap profile at the end
// of the API writes (heap-api.pb.gz), once BIRD holds every route
// (heap-bird.pb.gz) and once settled (heap-settled.pb.gz), from its
// control socket: where the memory of the peak and of the steady state
// goes (go tool pprof -sample_index=inuse_space -top FILE), and the
// runtime's memory statistics beside each (NAME.memstats).
func BenchmarkRTBH(b *testing.B) {
	n := benchEnv(b, "RIBKEEPER_BENCH_RTBH", 1_000_000)
	if n > 1<<24 {
		b.Fatalf("RIBKEEPER_BENCH_RTBH=%d: at most %d /32 routes fit under 10.0.0.0/8", n, 1<<24)
	}
	var wc *wireCounter
	report := func(b *testing.B, el, write, cpu, birdCPU time.Duration, rss0, cur, early, peak int64) {
		b.ReportMetric(float64(n), "routes")
		b.ReportMetric(cpu.Seconds(), "cpu-s")
		b.ReportMetric(birdCPU.Seconds(), "bird-cpu-s")
		b.ReportMetric(float64(n)/el.Seconds(), "routes/s")
		b.ReportMetric(el.Seconds(), "bird-s")
		b.ReportMetric(write.Seconds(), "write-s")
		b.ReportMetric(float64(wc.Updates()), "updates")
		b.ReportMetric(mb(peak), "MB-peak")
		b.ReportMetric(mb(early), "MB-rss-3s")
		b.ReportMetric(mb(cur), "MB-rss")
		b.ReportMetric(float64(cur-rss0)/float64(n), "B-rss/path")
	}
	b.Run("ours", func(b *testing.B) {
		// gc-cycles: read from the daemon's gctrace (gcCyclesBetween).
		b.Setenv("GODEBUG", "gctrace=1")
		for range b.N {
			b.StopTimer()
			birdtest.Binary(b)
			rkPort := birdtest.FreePort(b, benchSpeakerAddr)
			bird := startBird(b, benchBirdAddr, rkPort)
			wc = startWireCounter(b, benchRelayAddr, benchSpeakerAddr, net.JoinHostPort(benchBirdAddr, strconv.Itoa(bird.Port)))
			d := startSetDaemon(b, rkPort, wc.Addr, wc.Port)
			waitFor(b, 60*time.Second, "BGP session with BIRD established", func() bool { return bird.Established(0) })
			rss0, _, _ := settledRSS(b, d.pid(), nil)
			ctl := dialBird(b, bird)
			r0 := wc.Reach()
			b.StartTimer()
			cpu0, bird0 := cpuTime(b, d.pid()), cpuTime(b, bird.Pid())
			t0 := time.Now()
			// The profile starts at the phase RIBKEEPER_BENCH_PROF_AT names.
			profAt := os.Getenv("RIBKEEPER_BENCH_PROF_AT")
			prof := func() {}
			profile := func(at string) {
				if at == profAt || (at == "start" && profAt == "") {
					prof = d.profileWhile(b, "rtbh-"+at, benchEnv(b, "RIBKEEPER_BENCH_PROF_S", 20))
				}
			}
			profile("start")
			retries := 0
			for i := 0; i < n; i += rtbhBatch {
				reqs := rtbhRequests(i, min(i+rtbhBatch, n))
				for {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
					_, err := d.client.StoreRules(ctx, reqs)
					cancel()
					// A 503 says the write may or may not be stored and
					// to retry, as a feed does: storing the same routes
					// again changes nothing. Counted, and bounded.
					var ae *api.Error
					if errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable && retries < 20 {
						retries++
						b.Logf("add routes %d..%d: %v; retrying", i, i+len(reqs), err)
						continue
					}
					if err != nil {
						b.Fatalf("add routes %d..%d: %v", i, i+len(reqs), err)
					}
					break
				}
			}
			b.ReportMetric(float64(retries), "retries-503")
			write := time.Since(t0)
			profile("api")
			d.heapProfile("heap-api", false)
			wc.waitReach(b, r0+int64(n), 30*time.Minute)
			el := waitTable(b, ctl, "up4", n, 30*time.Minute).Sub(t0)
			cpu, birdCPU := cpuTime(b, d.pid())-cpu0, cpuTime(b, bird.Pid())-bird0
			b.StopTimer()
			b.ReportMetric(float64(d.gcCyclesBetween(b, t0, t0.Add(el))), "gc-cycles")
			profile("bird")
			d.heapProfile("heap-bird", false)
			// The reconciler records each route's status after BIRD
			// may have it; the daemon is done (and its memory
			// settles) once every route reads as announced.
			waitEvery(b, time.Second, 30*time.Minute, "every route's status announced", func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				st, err := d.client.Status(ctx)
				return err == nil && st.Rules != nil && st.Rules.Announced >= n
			})
			status := time.Since(t0)
			statusCPU := cpuTime(b, d.pid()) - cpu0
			prof()
			cur, early, peak := settledRSS(b, d.pid(), nil)
			d.heapProfile("heap-settled", true)
			b.Logf("ours: API done after %v, BIRD full after %v, every status announced after %v",
				write.Round(time.Millisecond), el.Round(time.Millisecond), status.Round(time.Millisecond))
			report(b, el, write, cpu, birdCPU, rss0, cur, early, peak)
			b.ReportMetric(status.Seconds(), "status-s")
			b.ReportMetric(statusCPU.Seconds(), "cpu-status-s")
		}
	})
	b.Run("gobgp", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			raw := startRaw(b)
			bird := startBird(b, benchBirdAddr, raw.port)
			wc = startWireCounter(b, benchRelayAddr, benchSpeakerAddr, net.JoinHostPort(benchBirdAddr, strconv.Itoa(bird.Port)))
			raw.do(fmt.Sprintf("peer %s %d ipv4-unicast", wc.Addr, wc.Port))
			waitFor(b, 60*time.Second, "raw GoBGP session with BIRD", func() bool { return bird.Established(0) })
			rss0, _, _ := settledRSS(b, raw.pid(), func() { raw.do("release") })
			ctl := dialBird(b, bird)
			r0 := wc.Reach()
			b.StartTimer()
			cpu0, bird0 := cpuTime(b, raw.pid()), cpuTime(b, bird.Pid())
			t0 := time.Now()
			secs, _ := strconv.ParseFloat(raw.do(fmt.Sprintf("rtbh 0 %d", n))[0], 64)
			wc.waitReach(b, r0+int64(n), 30*time.Minute)
			el := waitTable(b, ctl, "up4", n, 30*time.Minute).Sub(t0)
			cpu, birdCPU := cpuTime(b, raw.pid())-cpu0, cpuTime(b, bird.Pid())-bird0
			b.StopTimer()
			cur, early, peak := settledRSS(b, raw.pid(), func() { raw.do("release") })
			write := time.Duration(secs * float64(time.Second))
			b.Logf("gobgp: AddPath done after %v, BIRD full after %v", write.Round(time.Millisecond), el.Round(time.Millisecond))
			report(b, el, write, cpu, birdCPU, rss0, cur, early, peak)
		}
	})
}

// rtbhRequests are routes [from, to) of BenchmarkRTBH as API requests.
func rtbhRequests(from, to int) []api.AddRuleRequest {
	reqs := make([]api.AddRuleRequest, 0, to-from)
	for i := from; i < to; i++ {
		reqs = append(reqs, api.AddRuleRequest{Text: setRoute(i), Reason: "bench"})
	}
	return reqs
}

// rtbhPaths are routes [from, to) as GoBGP's native paths, as bgp/ builds
// a blackhole route (routePath): ORIGIN IGP, NEXT_HOP the site next hop,
// COMMUNITIES BLACKHOLE and NO_EXPORT.
func rtbhPaths(from, to int) []*apiutil.Path {
	comms := flowspec.Blackhole().AppendCommunities(nil)
	vals := make([]uint32, 0, len(comms)/4)
	for i := 0; i+4 <= len(comms); i += 4 {
		vals = append(vals, uint32(comms[i])<<24|uint32(comms[i+1])<<16|uint32(comms[i+2])<<8|uint32(comms[i+3]))
	}
	out := make([]*apiutil.Path, 0, max(to-from, 0))
	for i := from; i < to; i++ {
		addr := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		nlri, err := gobgp.NewIPAddrPrefix(netip.PrefixFrom(addr, 32))
		if err != nil {
			panic(err)
		}
		nh, err := gobgp.NewPathAttributeNextHop(rtbhNextHop)
		if err != nil {
			panic(err)
		}
		out = append(out, &apiutil.Path{Family: gobgp.RF_IPv4_UC, Nlri: nlri, Attrs: []gobgp.PathAttributeInterface{
			gobgp.NewPathAttributeOrigin(0), nh, gobgp.NewPathAttributeCommunities(vals),
		}})
	}
	return out
}

// dialBird opens a control connection to bird, closed at cleanup.
func dialBird(b testing.TB, bird *birdtest.Router) *birdtest.Ctl {
	b.Helper()
	ctl, err := bird.Dial()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ctl.Close() })
	return ctl
}

// waitTable is waitCount over one control connection, every 100 ms: at a
// million routes each count walks the table, and a birdc process every
// 50 ms would take a core from the two being measured.
func waitTable(b testing.TB, ctl *birdtest.Ctl, table string, want int, timeout time.Duration) time.Time {
	b.Helper()
	var at time.Time
	waitEvery(b, 100*time.Millisecond, timeout, fmt.Sprintf("BIRD %s to hold %d routes", table, want), func() bool {
		c, err := ctl.Count(table)
		at = time.Now()
		return err == nil && c == want
	})
	return at
}

// heapProfile saves the daemon's heap profile as DIR/NAME.pb.gz when
// RIBKEEPER_BENCH_PROFILE=DIR is set; settled: the live heap only, after
// forced collections.
func (d *benchDaemon) heapProfile(name string, settled bool) {
	dir := os.Getenv("RIBKEEPER_BENCH_PROFILE")
	if dir == "" {
		return
	}
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", d.socket)
		},
	}}
	get := func(path string) []byte {
		resp, err := hc.Get("http://ribkeeper" + path)
		if err != nil {
			d.b.Logf("heap profile %s: %v", name, err)
			return nil
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			d.b.Logf("heap profile %s: %s %v", name, resp.Status, err)
			return nil
		}
		return data
	}
	path := "/debug/pprof/heap"
	if settled {
		// The profile shows the heap as of an earlier collection than
		// the last: two forced ones leave nothing of the load's
		// transients in it (the daemon is idle; RSS was measured).
		get(path + "?gc=1")
		path += "?gc=1"
	}
	if data := get(path); data != nil {
		if err := os.WriteFile(filepath.Join(dir, name+".pb.gz"), data, 0o644); err != nil {
			d.b.Logf("heap profile %s: %v", name, err)
		}
	}
	// The runtime's own figures (HeapInuse, HeapIdle, HeapReleased,
	// NextGC): how much of the RSS is live heap, how much free pages.
	if data := get("/debug/pprof/heap?debug=1"); data != nil {
		var stats []string
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(l, "# ") {
				stats = append(stats, l)
			}
		}
		os.WriteFile(filepath.Join(dir, name+".memstats"), []byte(strings.Join(stats, "\n")+"\n"), 0o644)
	}
}

// gcCyclesBetween counts the daemon's collection cycles that ended
// between from and to, read from its gctrace (gcCycles; the daemon runs
// with GODEBUG=gctrace=1). A scrape of /metrics would count every stored
// rule in SQLite at each call (seconds of the daemon's CPU at a million).
func (d *benchDaemon) gcCyclesBetween(b testing.TB, from, to time.Time) int {
	data, err := os.ReadFile(filepath.Join(d.dir, "ribkeeper.log"))
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, c := range gcCycles(data, d.started) {
		if !c.at.Before(from) && !c.at.After(to) {
			n++
		}
	}
	return n
}
