package reconcile

import (
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// BenchmarkRTBHHeap is the live heap a million RTBH routes leave behind
// in process, settled: RIBKEEPER_BENCH_RTBH_HEAP (default 100,000)
// distinct /32 "then blackhole" routes with a TTL (as the daemon's
// default_ttl gives them) written to a real SQLite store in batches of
// 5,000 while the loop runs against an in-process GoBGP (no peer), until
// every status reads announced and the rows read during the load are
// compacted; then a collection. B-heap/route is the growth of the live
// heap per route, B-inuse/route of the heap's pages in use (the holes
// among live objects too) and B-rss/route of the process's RSS once the
// free pages went back to the OS; B-ours/route and B-gobgp/route split it by who
// allocated what is still live (the innermost ribkeeper or GoBGP frame of
// each sampled allocation's stack), and the log lists the largest of
// ours by function. It is the quick loop for ribkeeper's own memory at a
// million routes: e2e's BenchmarkRTBH measures the process's RSS with a
// BIRD peer, and takes minutes. RIBKEEPER_BENCH_PROFILE=DIR also saves
// the heap profile (heap-rtbh.pb.gz).
func BenchmarkRTBHHeap(b *testing.B) {
	n := 100_000
	if v := os.Getenv("RIBKEEPER_BENCH_RTBH_HEAP"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 || n > 1<<24 {
			b.Fatalf("RIBKEEPER_BENCH_RTBH_HEAP=%q: want a count of routes from 1 to %d", v, 1<<24)
		}
	}
	const batch = 5000
	// Finer sampling than the default 512 KB: the split by owner is an
	// estimate from the samples.
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 64 << 10
	defer func() { runtime.MemProfileRate = old }()
	for b.Loop() {
		b.StopTimer()
		rec := &latencies{}
		l := startRealLoop(b, bgp.Config{RouteNextHop4: netip.MustParseAddr("192.0.2.99")}, Config{Recorder: rec})
		ctx, st, sp, r := l.ctx, l.st, l.sp, l.r
		<-r.Loaded()
		base, baseInuse, baseRSS := liveHeap()
		baseOwn := heapByOwner()
		b.StartTimer()
		exp := time.Now().Add(time.Hour)
		ins := make([]store.Input, 0, batch)
		for lo := 0; lo < n; lo += batch {
			ins = ins[:0]
			for i := lo; i < min(lo+batch, n); i++ {
				m, err := flowspec.RouteMatch(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32))
				if err != nil {
					b.Fatal(err)
				}
				ins = append(ins, store.Input{Rule: flowspec.Rule{Match: m, Action: flowspec.Blackhole()}, ExpiresAt: exp, Actor: "bench", Reason: "bench"})
			}
			if _, err := st.UpsertMany(ctx, ins); err != nil {
				b.Fatal(err)
			}
		}
		ins = nil
		rec.waitPass(b, 10*time.Minute, "not every route announced and adopted", func() bool {
			res := r.LastPass()
			return sp.Len() >= n && res.Adopted == n && !res.Changed() && res.Pending == 0 && res.Errors == 0
		})
		// The settle timer compacts the rows read during the load a
		// second after the last pass, unless a pass's own compaction
		// (trim) already took them all: measured before, the figure
		// would be the load's scattered rows.
		eventually(b, time.Minute, "the rows compacted after the load", func() bool { return r.rowsCompact.Load() })
		b.StopTimer()
		heap, inuse, rss := liveHeap()
		own := heapByOwner()
		b.ReportMetric(float64(heap-base)/float64(n), "B-heap/route")
		b.ReportMetric(float64(inuse-baseInuse)/float64(n), "B-inuse/route")
		b.ReportMetric(float64(rss-baseRSS)/float64(n), "B-rss/route")
		b.ReportMetric(float64(own.total("ours")-baseOwn.total("ours"))/float64(n), "B-ours/route")
		b.ReportMetric(float64(own.total("gobgp")-baseOwn.total("gobgp"))/float64(n), "B-gobgp/route")
		b.ReportMetric(float64(own.total("other")-baseOwn.total("other"))/float64(n), "B-other/route")
		b.Logf("%d routes: live heap %d MB (base %d MB), in use %d MB, RSS %d MB; ours by function:\n%s", n, heap>>20, base>>20, inuse>>20, rss>>20, own.top("ours", 12, n))
		if dir := os.Getenv("RIBKEEPER_BENCH_PROFILE"); dir != "" {
			f, err := os.Create(filepath.Join(dir, "heap-rtbh.pb.gz"))
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
		runtime.KeepAlive(st)
		l.stop()
		b.StartTimer()
	}
}

// liveHeap collects twice (the second frees what finalizers of the
// first let go) and returns the bytes of live heap objects, of the heap's
// pages in use (live objects and the holes among them: what stays
// resident), and the process's RSS once free pages went back to the OS
// (as the daemon's release after a burst does).
func liveHeap() (live, inuse, rss uint64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.HeapInuse, vmRSS()
}

// vmRSS is the process's resident set in bytes (Linux), 0 if unknown.
func vmRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// heapOwners is the in-use heap of the last collection's profile by
// owner ("ours", "gobgp", "other") and by the owner's innermost function.
type heapOwners map[string]map[string]int64

func (h heapOwners) total(owner string) (t int64) {
	for _, v := range h[owner] {
		t += v
	}
	return t
}

// top lists owner's n largest functions, with bytes per route of routes.
func (h heapOwners) top(owner string, n, routes int) string {
	fns := make([]string, 0, len(h[owner]))
	for fn := range h[owner] {
		fns = append(fns, fn)
	}
	slices.SortFunc(fns, func(a, b string) int { return int(h[owner][b] - h[owner][a]) })
	var sb strings.Builder
	for _, fn := range fns[:min(n, len(fns))] {
		fmt.Fprintf(&sb, "  %8.1f MB %6.1f B/route  %s\n", float64(h[owner][fn])/(1<<20), float64(h[owner][fn])/float64(routes), fn)
	}
	return sb.String()
}

// heapByOwner reads the runtime's heap profile (as of the last
// collection), scales each record's samples to the bytes they stand for
// (as pprof does) and adds them up by owner: the innermost frame in
// ribkeeper's or GoBGP's packages.
func heapByOwner() heapOwners {
	var recs []runtime.MemProfileRecord
	for {
		k, ok := runtime.MemProfile(recs, false)
		if ok {
			recs = recs[:k]
			break
		}
		recs = make([]runtime.MemProfileRecord, k+k/4+16)
	}
	rate := float64(runtime.MemProfileRate)
	out := heapOwners{"ours": {}, "gobgp": {}, "other": {}}
	for _, rc := range recs {
		objs, bytes := rc.InUseObjects(), rc.InUseBytes()
		if objs == 0 {
			continue
		}
		// Sampled at one allocation per rate bytes on average: a
		// record of size s stands for 1/(1-exp(-s/rate)) of them.
		avg := float64(rc.AllocBytes) / float64(rc.AllocObjects)
		scale := 1 / (1 - math.Exp(-avg/rate))
		owner, fn := "other", ""
		frames := runtime.CallersFrames(rc.Stack())
		for {
			f, more := frames.Next()
			switch {
			case strings.HasPrefix(f.Function, "github.com/ribkeeper/ribkeeper/"):
				owner, fn = "ours", strings.TrimPrefix(f.Function, "github.com/ribkeeper/ribkeeper/")
			case strings.HasPrefix(f.Function, "github.com/osrg/gobgp/"):
				owner, fn = "gobgp", f.Function
			}
			if fn != "" || !more {
				break
			}
		}
		out[owner][fn] += int64(float64(bytes) * scale)
	}
	return out
}
