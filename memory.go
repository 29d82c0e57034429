package main

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Memory after bursts. A burst of changes (a bulk load, a restart's
// re-announcement, an expiry wave) leaves the Go heap at its high-water
// mark: decoded requests, store reads and GoBGP's per-path garbage are
// freed, but the runtime gives the pages back to the OS only slowly, and
// the process keeps RSS for a table it no longer holds (measured: 468–489
// MB of RSS right after 100,000 rules, against 145 MB HeapAlloc). After a
// burst of at least releaseBurst changes followed by releaseQuiet without
// any, the free pages are handed back at once. One forced GC per burst,
// never in the middle of one.
//
// A change here is a path changed or a rule status written (the
// reconciler's WorkCount): a load's statuses are written after its last
// path changed, for seconds at a million rules, and their garbage is not
// collected until a cycle runs. Counting path changes alone, the release
// came between the last path change and the end of the status writes, and
// what they left stayed in RSS (1.23 GB of free pages 16 s after the last
// status at a million RTBH routes).
//
// Work that changes nothing also grows the heap: full reads of the table
// (a million rows read at a resync or after a store error). Once the
// heap's free pages not yet returned reach releaseIdle and the work is
// quiet, they are handed back too, at most once per releaseEvery (each
// release is a forced GC).
const (
	releaseBurst = 10_000
	releaseQuiet = 3 * time.Second
	releaseIdle  = 256 << 20
	releaseEvery = 10 * time.Second
)

// releaseAfterBursts watches count (the reconciler's WorkCount) and the
// heap's free pages until ctx ends and returns freed memory to the OS
// after each burst, or when much of it is free.
func releaseAfterBursts(ctx context.Context, log hclog.Logger, count func() uint64) {
	watchBursts(ctx, count, heapFree, time.Second, releaseQuiet, releaseEvery, func(changes uint64) {
		start := time.Now()
		debug.FreeOSMemory()
		log.Debug("returned free memory to the OS", "changes", changes, "took", time.Since(start))
	})
}

// heapFree is the heap's free memory not yet returned to the OS.
func heapFree() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// watchBursts samples count every tick and calls release(changes) once
// count grew by releaseBurst or more since the last call and then stayed
// the same for quiet; and, while count stays the same for quiet, when
// free reports releaseIdle or more, at most once per every.
func watchBursts(ctx context.Context, count, free func() uint64, tick, quiet, every time.Duration, release func(changes uint64)) {
	t := time.NewTicker(tick)
	defer t.Stop()
	released, last := count(), count()
	lastMove, lastRelease := time.Now(), time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			c := count()
			if c != last {
				last, lastMove = c, now
				continue
			}
			if now.Sub(lastMove) < quiet {
				continue
			}
			if c-released >= releaseBurst || (now.Sub(lastRelease) >= every && free() >= releaseIdle) {
				release(c - released)
				released, lastRelease = c, now
			}
		}
	}
}

// The first load. A restart hands the whole table to the speaker at once
// and the heap grows from nothing to the table's size; with the default
// GOGC the collector runs a cycle at every doubling on the way, and on two
// cores its mark workers take the CPU from GoBGP's server loop, which is
// what paces the load (measured at 100,000 rules on a shared 2-core box:
// about a fifth of the process's CPU, ~2 s less with GOGC=400). Until the
// first load is done the collector waits for the heap to reach
// firstLoadHeap (GOGC off, that memory limit): a table whose load
// allocates less is loaded without a single cycle. The start-up walk of
// 100,000 FlowSpec rules allocates about 535 MiB (BenchmarkStartup100k;
// GoBGP's per-path garbage mostly), and a session to a router adds its
// own: with 512 MiB the collector still took about a fifth of the walk's
// CPU (1.0 of 5.3 s), with 1 GiB none. The default applies again once the
// table is loaded, or as soon as a cycle finds the live heap past half
// that budget, so a large table costs no more memory than it did; a
// smaller one holds up to firstLoadHeap for the seconds of its load, given
// back after it (releaseAfterBursts). An operator's own GOGC or GOMEMLIMIT
// is left alone.
//
// The light collector ends after firstLoadLongest whatever happens: a
// start whose first load never completes (a store that cannot be read)
// does not keep the process at the budget.
const (
	firstLoadGCPercent = -1 // off: the memory limit alone starts a cycle
	firstLoadHeap      = 1 << 30
	firstLoadLongest   = 2 * time.Minute
)

// lightGCUntilLoaded runs the collector lightly (see above) from now until
// loaded is closed, ctx ends, longest has passed or the live heap passes
// budget/2, then restores the settings it found and closes the channel it
// returns.
func lightGCUntilLoaded(ctx context.Context, log hclog.Logger, loaded <-chan struct{}, budget int64, tick, longest time.Duration) <-chan struct{} {
	done := make(chan struct{})
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		close(done)
		return done
	}
	pct := debug.SetGCPercent(firstLoadGCPercent)
	limit := debug.SetMemoryLimit(budget)
	go func() {
		defer close(done)
		defer func() {
			debug.SetGCPercent(pct)
			debug.SetMemoryLimit(limit)
		}()
		live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		t := time.NewTicker(tick)
		defer t.Stop()
		end := time.NewTimer(longest)
		defer end.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-loaded:
				return
			case <-end.C:
				log.Warn("the first load did not finish in time; default GC again", "after", longest)
				return
			case <-t.C:
				metrics.Read(live)
				if live[0].Value.Kind() == metrics.KindUint64 && int64(live[0].Value.Uint64()) > budget/2 {
					log.Debug("first load: live heap past half the light-GC budget; default GC again", "budget", budget)
					return
				}
			}
		}
	}()
	return done
}

// A floor under the heap goal. With the default GOGC the collector runs a
// cycle each time the heap doubles its live size, and a daemon between
// loads holds little: measured with BenchmarkTimeToWithdraw and
// BenchmarkTimeToMitigate (a few hundred rules, a live heap of ~12 MB), a
// cycle every ~0.8 s, one per ~200 single writes, its mark phase 9–16 ms
// on two shared cores; every write whose way to the peer overlapped a
// mark phase was among the five slowest of its 200 (and with 200 the p99
// is the second slowest). Below heapFloor/2 of live heap the goal is
// heapFloor instead: GOGC is set after each cycle (looked at every tick)
// so that the heap may grow to heapFloor before the next one; those
// benchmarks then run without a cycle. That costs at most heapFloor of heap that a cycle would
// have freed sooner; past heapFloor/2 of live heap the default applies
// (a table of 100,000 rules lives in a few hundred MB). An operator's own
// GOGC or GOMEMLIMIT is left alone, and so is the first load's light
// collector (it runs first).
const heapFloor = 64 << 20

// Headroom during a burst. A bulk load through the API grows the table
// from nothing to a few hundred MB, and with the default GOGC the
// collector marks the whole live heap at every doubling on the way: a
// runtime trace of 100,000 FlowSpec rules written through the API showed
// its mark workers running 3.5 s of the load's 13.5 CPU-s, on the two
// cores GoBGP and the store need (the same reason as the first load's
// light collector). While the reconciler changed burstChanges paths or
// more within the last burstTicks ticks (two seconds: its passes of a
// load come a second or more apart, and a burst that ended between two of
// them dropped the goal below the heap, a cycle for nothing; and less than
// releaseQuiet, so that the goal is down again before releaseAfterBursts
// hands the burst's free pages back, and none are taken again after), the goal is at least
// burstHeadroom above the live heap: a load of that size is made with a
// cycle or two instead of one per doubling. It costs at most
// burstHeadroom of heap above the default during the burst (nothing once
// the default goal is larger, past burstHeadroom of live heap), given
// back when the burst ends: the goal drops at once, the next cycle comes,
// and releaseAfterBursts returns the freed pages.
const (
	burstHeadroom = 512 << 20
	burstChanges  = 1000
	burstTicks    = 20
)

// A ceiling over the heap goal. Past burstHeadroom of live heap, the
// default GOGC lets the heap grow to twice the live heap before a cycle:
// at a million RTBH routes (a live heap of ~1.05 GB at the end of the
// load) the goal was 2.1 GB, and the process's peak RSS with it (2.3–2.6
// GB, against raw GoBGP's 1.5–1.7 GB with the same routes, whose own
// live heap is smaller). The goal is kept at most goalCeiling above the
// live heap, and GOGC never below minPercent (a live heap of 2 GiB and
// more then grows by a quarter between cycles). It is a trade: each
// cycle past the ceiling marks the whole live heap, and the collector
// runs once per goalCeiling allocated instead of once per live heap.
// Measured at a million RTBH routes (BenchmarkRTBH/ours, medians of four
// runs each, in turn): peak RSS 2,634 → 1,940 MB, settled RSS 1,617 →
// 1,323 MB; 3–4 more cycles, the load's CPU 75 → 96 CPU-s and its rate
// 22,300 → 18,400 routes/s. An appliance's memory is a hard limit, and
// a load of a million routes is rare.
const (
	goalCeiling = burstHeadroom
	minPercent  = 25
)

// ceilPercent lowers pct so that the heap goal for a live heap of live
// bytes is at most ceiling above it, and to no less than minPercent.
func ceilPercent(live, ceiling uint64, pct int) int {
	if live == 0 || pct < 0 || live*uint64(pct)/100 <= ceiling {
		return pct
	}
	return max(minPercent, int(ceiling*100/live))
}

// floorPercent is the GOGC that puts the heap goal at floor for a live
// heap of live bytes, and def when def already reaches it (or live is
// not known yet).
func floorPercent(live, floor uint64, def int) int {
	if live == 0 || live+live*uint64(def)/100 >= floor {
		return def
	}
	return int((floor - live) * 100 / live)
}

// keepHeapFloor waits for after to be closed, then sets GOGC from the
// live heap (floorPercent) after every collection cycle, and whenever a
// burst of path changes (changes, the reconciler's ChangeCount; nil: none)
// starts or ends, looking at each tick, until ctx ends; then it restores
// the setting it found.
//
// It returns only when ctx ends, even when it has nothing to do (an
// operator's GOGC or GOMEMLIMIT, a runtime without those metrics): the
// daemon runs it as one of its parts, and a part that returns stops them
// all (measured: with GOMEMLIMIT set, ribkeeper serve stopped a
// millisecond after it started, with exit status 0).
func keepHeapFloor(ctx context.Context, after <-chan struct{}, floor uint64, ticks <-chan time.Time, changes func() uint64) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		<-ctx.Done()
		return
	}
	select {
	case <-after:
	case <-ctx.Done():
		return
	}
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/heap/live:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	for _, v := range s {
		if v.Value.Kind() != metrics.KindUint64 {
			<-ctx.Done()
			return
		}
	}
	def := int(s[0].Value.Uint64())
	defer debug.SetGCPercent(def)
	var b burstWatch
	cur, seen, wasBurst := def, ^uint64(0), false
	for {
		burst := changes != nil && b.see(changes())
		if cycles := s[2].Value.Uint64(); cycles != seen || burst != wasBurst {
			seen, wasBurst = cycles, burst
			live, goal := s[1].Value.Uint64(), floor
			if burst {
				goal = max(floor, live+burstHeadroom)
			}
			if pct := ceilPercent(live, goalCeiling, floorPercent(live, goal, def)); pct != cur {
				debug.SetGCPercent(pct)
				cur = pct
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticks:
			metrics.Read(s)
		}
	}
}

// burstWatch tells a burst of path changes from the change counts seen at
// the last burstTicks ticks.
type burstWatch struct {
	counts [burstTicks]uint64
	n      int // counts seen
}

// see records the count of this tick and reports whether it is
// burstChanges or more past the count burstTicks ticks before.
func (b *burstWatch) see(count uint64) bool {
	oldest := b.counts[b.n%burstTicks]
	full := b.n >= burstTicks
	b.counts[b.n%burstTicks] = count
	b.n++
	return full && count-oldest >= burstChanges
}
