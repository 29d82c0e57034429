package reconcile

import (
	"context"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// realBench loads n rules into a real SQLite store, converges a real
// in-process GoBGP speaker (no listener) on them, and returns the parts.
func realBench(b *testing.B, n int, cfg Config) (*Reconciler, *store.Store, *bgp.Speaker) {
	b.Helper()
	ctx := context.Background()
	st := fillStore(b, n)
	sp := bgp.New(hclog.NewNullLogger(), bgp.Config{ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: -1})
	if err := sp.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sp.Stop)
	r := New(hclog.NewNullLogger(), st, sp, cfg)
	r.runPass(ctx, true, nil)
	deadline := time.Now().Add(2 * time.Minute)
	for sp.Len() < n {
		if time.Now().After(deadline) {
			b.Fatalf("mirror has %d of %d paths", sp.Len(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Settle: passes until one finds nothing to do (statuses written).
	for i := 0; ; i++ {
		r.runPass(ctx, false, nil)
		if res := r.LastPass(); !res.Changed() && res.Pending == 0 && res.Errors == 0 && res.Adopted == n {
			break
		}
		if i > 100 {
			b.Fatalf("not converged: %+v", r.LastPass())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return r, st, sp
}

// BenchmarkConvergedPass100k is a pass woken with nothing to change at
// 100,000 desired rules and 100,000 paths, with real parts: SQLite and an
// in-process GoBGP. It never calls ListPath (the mirror is read instead)
// and, with nothing changed, reads only the store's revision.
func BenchmarkConvergedPass100k(b *testing.B) {
	r, _, _ := realBench(b, 100_000, Config{})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r.runPass(ctx, false, nil)
	}
	if res := r.LastPass(); !res.Skipped || res.Changed() || res.Adopted != 100_000 {
		b.Fatalf("converged pass = %+v", res)
	}
}

// BenchmarkFullPass100k is the periodic safety-net pass at 100,000 as the
// loop runs it: every desired row re-read off the loop (readSnapshot, not
// timed; reported as read-ms), then swapped in and compared with the whole
// mirror on the loop (timed), nothing to change.
func BenchmarkFullPass100k(b *testing.B) {
	r, st, _ := realBench(b, 100_000, Config{})
	ctx := context.Background()
	var read time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		snap := readSnapshot(ctx, st, time.Now, 0)
		if snap.err != nil {
			b.Fatal(snap.err)
		}
		read += snap.took
		b.StartTimer()
		r.runPass(ctx, false, snap)
	}
	b.ReportMetric(float64(read.Milliseconds())/float64(b.N), "read-ms")
	if res := r.LastPass(); !res.Full || res.Incremental {
		b.Fatalf("full pass = %+v", res)
	}
	if res := r.LastPass(); res.Skipped || res.Changed() || res.Adopted != 100_000 {
		b.Fatalf("full pass = %+v", res)
	}
}

// BenchmarkOneChangePass100k is a pass after one rule changed in the store
// at 100,000: the changed row is read, both sides diffed, one path replaced.
func BenchmarkOneChangePass100k(b *testing.B) {
	r, st, sp := realBench(b, 100_000, Config{})
	ctx := context.Background()
	rule := benchRules(b, 1)[0]
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		rule.Action = flowspec.RateLimit(float32(1000 + i))
		b.StopTimer()
		if _, _, err := st.Upsert(ctx, store.Input{Rule: rule, ExpiresAt: time.Now().Add(time.Hour), Actor: "bench"}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		r.runPass(ctx, false, nil)
		b.StopTimer()
		for a, _ := sp.Lookup(rule.Match); a != rule.Action; a, _ = sp.Lookup(rule.Match) {
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
	}
	if res := r.LastPass(); res.Updated != 1 {
		b.Fatalf("pass = %+v", res)
	}
}

// BenchmarkDriftRepair100k deletes one path behind the reconciler's back
// (Speaker.Withdraw, as an operator with the gobgp CLI would) while the
// loop runs at 100,000 rules, and measures until the path is back in the
// mirror. Run with -benchtime 1000x for the 1,000 repairs.
func BenchmarkDriftRepair100k(b *testing.B) {
	const n = 100_000
	r, _, sp := realBench(b, n, Config{})
	rules := benchRules(b, n)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	time.Sleep(100 * time.Millisecond) // the loop's first (full) pass
	var lat []time.Duration
	i := 0
	b.ResetTimer()
	for b.Loop() {
		rule := rules[(i*7919)%n]
		i++
		before := r.Drift().Readded
		start := time.Now()
		if err := sp.Withdraw(ctx, []flowspec.Match{rule.Match})[0]; err != nil {
			b.Fatal(err)
		}
		for {
			if a, ok := sp.Lookup(rule.Match); ok && a == rule.Action && r.Drift().Readded > before {
				break
			}
			if time.Since(start) > 10*time.Second {
				b.Fatalf("path %d not repaired in 10s", i)
			}
			time.Sleep(50 * time.Microsecond)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(q float64) float64 {
		return float64(lat[min(int(q*float64(len(lat))), len(lat)-1)]) / float64(time.Millisecond)
	}
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
}

// latencies is a Recorder that keeps expiry lateness.
type latencies struct {
	nopRecorder
	mu     sync.Mutex
	lat    []time.Duration
	passes []PassResult
	passed chan struct{} // a pass ended since the last wait looked (waitPass)
}

func (l *latencies) PassDone(p PassResult) {
	l.mu.Lock()
	l.passes = append(l.passes, p)
	ch := l.passedLocked()
	l.mu.Unlock()
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (l *latencies) passedLocked() chan struct{} {
	if l.passed == nil {
		l.passed = make(chan struct{}, 1)
	}
	return l.passed
}

// waitPass returns once cond holds, checking it after each pass (what
// it waits for is a pass's doing), or fails b after timeout.
func (l *latencies) waitPass(b *testing.B, timeout time.Duration, what string, cond func() bool) {
	l.mu.Lock()
	ch := l.passedLocked()
	l.mu.Unlock()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-ch:
		case <-deadline.C:
			b.Fatalf("after %v: %s", timeout, what)
		}
	}
}

func (l *latencies) ExpiryLateness(d time.Duration) {
	l.mu.Lock()
	l.lat = append(l.lat, d)
	l.mu.Unlock()
}

func (l *latencies) passCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.passes)
}

func (l *latencies) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lat)
}

// BenchmarkExpiry10k writes 10,000 rules whose expires_at are spread over
// 10 seconds into a running loop (real SQLite, in-process GoBGP) and
// reports how late each was finished after its path left the RIB: p50 and
// p99 in ms. One iteration is the whole run.
func BenchmarkExpiry10k(b *testing.B) {
	const n = 10_000
	rules := benchRules(b, n)
	for b.Loop() {
		b.StopTimer()
		rec := &latencies{}
		l := startRealLoop(b, bgp.Config{}, Config{Recorder: rec})
		ctx, st := l.ctx, l.st
		b.StartTimer()
		start := time.Now().Add(3 * time.Second)
		ins := make([]store.Input, n)
		for i, rule := range rules {
			ins[i] = store.Input{Rule: rule, ExpiresAt: start.Add(time.Duration(i) * 10 * time.Second / n), Actor: "bench"}
		}
		if _, err := st.UpsertMany(ctx, ins); err != nil {
			b.Fatal(err)
		}
		rec.waitPass(b, time.Minute+10*time.Second, "not every rule expired", func() bool { return rec.count() >= n })
		b.StopTimer()
		l.stop()
		slices.Sort(rec.lat)
		ms := func(q float64) float64 {
			return float64(rec.lat[min(int(q*float64(n)), n-1)]) / float64(time.Millisecond)
		}
		b.ReportMetric(ms(0.50), "p50-ms")
		b.ReportMetric(ms(0.99), "p99-ms")
		var slowest time.Duration // among the passes that expired rules
		for _, p := range rec.passes {
			if p.Finished > 0 || (p.Withdrawn > 0 && p.Added == 0) {
				slowest = max(slowest, p.Duration)
			}
		}
		b.ReportMetric(float64(slowest)/float64(time.Millisecond), "max-expiry-pass-ms")
		b.StartTimer()
	}
}

// BenchmarkBulkLoad100k is the reconciler's part of a bulk load through
// the API: 100,000 rules written to a real SQLite store in batches of
// 1,000, one after the other (as the API's batch endpoint commits them),
// while the loop runs against an in-process GoBGP (no peer); timed until
// the mirror holds every path. write-s is when the last batch committed,
// cpu-s the process's CPU meanwhile, passes the reconcile passes. What
// it shows is how much the loop keeps GoBGP waiting: its reads, its
// comparisons and its status writes between two passes' announcements.
func BenchmarkBulkLoad100k(b *testing.B) {
	const n, batch = 100_000, 1000
	rules := benchRules(b, n)
	for b.Loop() {
		b.StopTimer()
		rec := &latencies{}
		l := startRealLoop(b, bgp.Config{}, Config{Recorder: rec})
		ctx, st, sp, r := l.ctx, l.st, l.sp, l.r
		<-r.Loaded()
		passes0 := rec.passCount()
		stopTrace := benchTrace(b)
		b.StartTimer()
		t0, cpu0 := time.Now(), processCPU(b)
		for lo := 0; lo < n; lo += batch {
			ins := make([]store.Input, 0, batch)
			for _, rule := range rules[lo:min(lo+batch, n)] {
				ins = append(ins, store.Input{Rule: rule, Actor: "bench"})
			}
			if _, err := st.UpsertMany(ctx, ins); err != nil {
				b.Fatal(err)
			}
		}
		write := time.Since(t0)
		trace.Log(ctx, "bench", "written")
		rec.waitPass(b, 5*time.Minute, "the mirror lacks paths", func() bool { return sp.Len() >= n })
		b.StopTimer()
		total, cpu := time.Since(t0), processCPU(b)-cpu0
		stopTrace()
		l.stop()
		b.ReportMetric(write.Seconds(), "write-s")
		b.ReportMetric(total.Seconds(), "total-s")
		b.ReportMetric(cpu.Seconds(), "cpu-s")
		b.ReportMetric(float64(rec.passCount()-passes0), "passes")
		b.StartTimer()
	}
}

// realLoop is a reconciler running against a real SQLite store (in the
// benchmark's temporary directory) and an in-process GoBGP without a
// listener.
type realLoop struct {
	ctx    context.Context
	cancel context.CancelFunc
	st     *store.Store
	sp     *bgp.Speaker
	r      *Reconciler
	done   chan error
}

// startRealLoop opens the store, starts the speaker (cfg, with the
// benchmarks' ASN and router ID and no listener) and runs a reconciler
// with rc on them.
func startRealLoop(b *testing.B, cfg bgp.Config, rc Config) *realLoop {
	b.Helper()
	l := &realLoop{done: make(chan error, 1)}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	st, err := store.Open(l.ctx, store.Config{Path: filepath.Join(b.TempDir(), "ribkeeper.db")})
	if err != nil {
		b.Fatal(err)
	}
	cfg.ASN, cfg.RouterID, cfg.ListenPort = 65000, netip.MustParseAddr("192.0.2.1"), -1
	sp := bgp.New(hclog.NewNullLogger(), cfg)
	if err := sp.Start(l.ctx); err != nil {
		b.Fatal(err)
	}
	l.st, l.sp, l.r = st, sp, New(hclog.NewNullLogger(), st, sp, rc)
	go func() { l.done <- l.r.Run(l.ctx) }()
	return l
}

// stop ends the loop, then the speaker and the store.
func (l *realLoop) stop() {
	l.cancel()
	<-l.done
	l.sp.Stop()
	l.st.Close()
}

// benchTrace writes a runtime trace to RIBKEEPER_BENCH_TRACE, if set,
// until the returned function is called: how long GoBGP's server loop
// waited for work, and on what, is in it.
func benchTrace(b *testing.B) (stop func()) {
	path := os.Getenv("RIBKEEPER_BENCH_TRACE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	// A CPU profile meanwhile puts CPU samples in the trace.
	if err := pprof.StartCPUProfile(io.Discard); err != nil {
		b.Fatal(err)
	}
	if err := trace.Start(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		trace.Stop()
		pprof.StopCPUProfile()
		f.Close()
	}
}

// processCPU is the CPU time (user and system) this process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
