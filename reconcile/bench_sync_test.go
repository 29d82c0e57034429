package reconcile

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// fillStore writes n bench rules into a fresh SQLite store.
func fillStore(b *testing.B, n int) *store.Store {
	b.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(b.TempDir(), "ribkeeper.db")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	rules := benchRules(b, n)
	exp := time.Now().Add(time.Hour)
	for i := 0; i < n; i += 5000 {
		ins := make([]store.Input, 0, 5000)
		for _, r := range rules[i:min(i+5000, n)] {
			ins = append(ins, store.Input{Rule: r, ExpiresAt: exp, Actor: "bench", Reason: "bench"})
		}
		if _, err := st.UpsertMany(ctx, ins); err != nil {
			b.Fatal(err)
		}
	}
	return st
}

// BenchmarkInitialSync100k is restart recovery in-process: 100,000 rules
// in the store, an empty speaker (no listener), the loop started; timed
// until the mirror holds them all. rate is Config.AnnounceRate (0:
// unpaced; 20000: the config default). No session is established, so the
// default must not pace either (storm.go): the two should take the same.
func BenchmarkInitialSync100k(b *testing.B) {
	const n = 100_000
	for _, rate := range []int{0, 20000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			st := fillStore(b, n)
			for b.Loop() {
				b.StopTimer()
				ctx, cancel := context.WithCancel(context.Background())
				sp := bgp.New(hclog.NewNullLogger(), bgp.Config{ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: -1})
				if err := sp.Start(ctx); err != nil {
					b.Fatal(err)
				}
				r := New(hclog.NewNullLogger(), st, sp, Config{AnnounceRate: rate})
				done := make(chan error, 1)
				b.StartTimer()
				start := time.Now()
				go func() { done <- r.Run(ctx) }()
				for sp.Len() < n {
					if time.Since(start) > 5*time.Minute {
						b.Fatalf("mirror has %d of %d", sp.Len(), n)
					}
					time.Sleep(5 * time.Millisecond)
				}
				b.StopTimer()
				b.ReportMetric(time.Since(start).Seconds(), "s")
				cancel()
				<-done
				sp.Stop()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkHeapPerPath100k reports the live heap of the whole process
// state (store, speaker with its mirror, reconciler) per path after
// syncing 100,000 rules, against the same process before any rule: the
// figure to compare with GoBGP's own per-path cost (bgp's
// BenchmarkMirrorMemory speaker-B/path, ~1.1 KB).
func BenchmarkHeapPerPath100k(b *testing.B) {
	benchHeapPerPath(b, benchRules(b, 100_000), bgp.Config{})
}

// BenchmarkHeapPerRoute100k is BenchmarkHeapPerPath100k for 100,000 RTBH
// routes ("route 10.x.y.z/32 then blackhole", the site next hop filled
// in by the speaker): the shape of the million-route RTBH benchmark
// (e2e BenchmarkRTBH).
func BenchmarkHeapPerRoute100k(b *testing.B) {
	const n = 100_000
	rules := make([]flowspec.Rule, n)
	for i := range rules {
		r, err := flowspec.Parse(fmt.Sprintf("route 10.%d.%d.%d/32 then blackhole", i>>16&255, i>>8&255, i&255))
		if err != nil {
			b.Fatal(err)
		}
		rules[i] = r
	}
	benchHeapPerPath(b, rules, bgp.Config{RouteNextHop4: netip.MustParseAddr("192.0.2.99")})
}

// benchHeapPerPath stores rules, lets the reconciler announce them into a
// speaker (cfg, without a listener) and reports the live heap grown per
// rule, 3 s after the sync as the e2e memory figures.
func benchHeapPerPath(b *testing.B, rules []flowspec.Rule, cfg bgp.Config) {
	n := len(rules)
	heap := func() uint64 {
		var ms runtime.MemStats
		for range 3 {
			runtime.GC()
		}
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	for b.Loop() {
		b.StopTimer()
		l := startRealLoop(b, cfg, Config{})
		ctx, st, sp, r := l.ctx, l.st, l.sp, l.r
		time.Sleep(100 * time.Millisecond)
		base := heap()
		b.StartTimer()
		exp := time.Now().Add(time.Hour)
		for i := 0; i < n; i += 5000 {
			ins := make([]store.Input, 0, 5000)
			for _, rule := range rules[i:min(i+5000, n)] {
				ins = append(ins, store.Input{Rule: rule, ExpiresAt: exp, Actor: "bench", Reason: "bench"})
			}
			if _, err := st.UpsertMany(ctx, ins); err != nil {
				b.Fatal(err)
			}
		}
		for sp.Len() < n || r.LastPass().Adopted < n || r.LastPass().Changed() {
			time.Sleep(10 * time.Millisecond)
		}
		b.StopTimer()
		time.Sleep(3 * time.Second) // as the e2e memory figure: 3 s after sync
		r.Trigger()
		time.Sleep(200 * time.Millisecond)
		after := heap()
		runtime.KeepAlive(rules)
		b.ReportMetric(float64(int64(after)-int64(base))/float64(n), "B-heap/path")
		l.stop()
		b.StartTimer()
	}
}

// BenchmarkStatusReport100k is the status report of a pass after a bulk
// load: 100,000 rules in a real SQLite store turning announced at once.
// MB-heap-peak is the highest live heap seen (read every millisecond)
// above the heap before the report: what the report itself holds at
// once, the store's history rows included.
func BenchmarkStatusReport100k(b *testing.B) {
	const n = 100_000
	st := fillStore(b, n)
	rows, err := st.ActiveRules(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	var peak float64
	want := false
	for b.Loop() {
		b.StopTimer()
		// Every rule changes: the store holds the last op's status.
		want = !want
		for i := range rows {
			rows[i].Announced = !want
		}
		var src source
		src.load(rows)
		var sb statusBatch
		for i := range rows {
			sb.set(rows[i].ID, want, "")
		}
		base, stop := watchHeapPeak()
		b.StartTimer()
		if _, err := sb.flush(context.Background(), st, &src, time.Now); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		peak = max(peak, float64(stop()-base)/(1<<20))
		b.StartTimer()
	}
	b.ReportMetric(peak, "MB-heap-peak")
}

// BenchmarkFullRead100k is one complete read of 100,000 rules from a real
// SQLite store as the background resync makes it (readSnapshot: read,
// compacted, indexed). MB-heap-peak is the highest live heap seen (read
// every millisecond) above the heap before the read, MB-heap-kept the
// live heap it leaves (the snapshot, still referenced): the difference is
// what the read held only while it ran.
func BenchmarkFullRead100k(b *testing.B) {
	const n = 100_000
	st := fillStore(b, n)
	ctx := context.Background()
	var peak, kept float64
	var read time.Duration
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		base, stop := watchHeapPeak()
		b.StartTimer()
		snap := readSnapshot(ctx, st, time.Now, 0)
		b.StopTimer()
		most := stop()
		if snap.err != nil || snap.byID.len() != n {
			b.Fatalf("read %d rules: %v", snap.byID.len(), snap.err)
		}
		read += snap.took
		peak = max(peak, float64(most-base)/(1<<20))
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		kept = float64(ms.HeapAlloc-base) / (1 << 20)
		runtime.KeepAlive(snap)
		b.StartTimer()
	}
	b.ReportMetric(peak, "MB-heap-peak")
	b.ReportMetric(kept, "MB-heap-kept")
	b.ReportMetric(float64(read.Milliseconds())/float64(b.N), "read-ms")
}

// BenchmarkStartLoad100k is the daemon's start in-process: 100,000 rules
// in a real SQLite store, an empty speaker (no session), one walk of the
// store seeding the first pass, timed until the first pass loaded the
// table (Loaded). seed: the walk reads, then the first pass announces
// (how the start worked before Preload); preload: the walk hands the
// rules to the speaker as it reads (Preload), the first pass adopts them.
func BenchmarkStartLoad100k(b *testing.B) {
	const n = 100_000
	st := fillStore(b, n)
	for _, preload := range []bool{false, true} {
		name := "seed"
		if preload {
			name = "preload"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				ctx, cancel := context.WithCancel(context.Background())
				sp := bgp.New(hclog.NewNullLogger(), bgp.Config{ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: -1})
				if err := sp.Start(ctx); err != nil {
					b.Fatal(err)
				}
				r := New(hclog.NewNullLogger(), st, sp, Config{})
				done := make(chan error, 1)
				b.StartTimer()
				start := time.Now()
				rev, err := st.Revision(ctx)
				if err != nil {
					b.Fatal(err)
				}
				var rows *Rows
				if preload {
					p := r.Preload(ctx)
					err = st.EachActive(ctx, func(x *store.Rule) error { p.Add(x, true); return nil })
					rows, _ = p.Finish()
				} else {
					rows = &Rows{}
					err = st.EachActive(ctx, func(x *store.Rule) error { rows.Add(x); return nil })
				}
				if err != nil {
					b.Fatal(err)
				}
				read := time.Since(start)
				r.Seed(rev, rows, start)
				go func() { done <- r.Run(ctx) }()
				<-r.Loaded()
				b.StopTimer()
				if sp.Len() != n {
					b.Fatalf("loaded with %d paths, want %d", sp.Len(), n)
				}
				b.ReportMetric(time.Since(start).Seconds(), "s")
				b.ReportMetric(read.Seconds(), "read-s")
				cancel()
				<-done
				sp.Stop()
				b.StartTimer()
			}
		})
	}
}

// watchHeapPeak collects garbage, then reads the live heap every
// millisecond until stop is called: base is the heap before, stop returns
// the highest seen.
func watchHeapPeak() (base uint64, stop func() uint64) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	done, most := make(chan struct{}), make(chan uint64)
	go func() {
		var m uint64
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			m = max(m, ms.HeapAlloc)
			select {
			case <-done:
				most <- m
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return ms.HeapAlloc, func() uint64 { close(done); return <-most }
}
