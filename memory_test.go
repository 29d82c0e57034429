package main

import (
	"context"
	"os"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestWatchBursts: memory is released once per burst, only after the burst
// went quiet, and never for a trickle of changes.
func TestWatchBursts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var count atomic.Uint64
	released := make(chan uint64, 10)
	none := func() uint64 { return 0 }
	go watchBursts(ctx, count.Load, none, 5*time.Millisecond, 60*time.Millisecond, time.Hour, func(n uint64) { released <- n })

	// A trickle: below the burst size, nothing.
	count.Add(releaseBurst - 1)
	select {
	case n := <-released:
		t.Fatalf("released after %d changes, fewer than a burst", n)
	case <-time.After(200 * time.Millisecond):
	}
	// A burst that keeps going: nothing until it stops.
	stop := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(stop) {
		count.Add(releaseBurst / 10)
		select {
		case n := <-released:
			t.Fatalf("released (%d) while changes were still coming", n)
		case <-time.After(10 * time.Millisecond):
		}
	}
	select {
	case n := <-released:
		if n < releaseBurst {
			t.Fatalf("released after %d changes", n)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("not released after the burst went quiet")
	}
	// Once per burst.
	select {
	case n := <-released:
		t.Fatalf("released twice (%d)", n)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestWatchBurstsFreeHeap: free pages of work that changed no path (status
// writes, full reads) are returned once they reach releaseIdle and the
// changes are quiet, at most once per period, and not while changes come.
func TestWatchBurstsFreeHeap(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var count, free atomic.Uint64
	var kept atomic.Bool // the free pages stay after a release
	released := make(chan uint64, 10)
	go watchBursts(ctx, count.Load, free.Load, 5*time.Millisecond, 60*time.Millisecond, 300*time.Millisecond, func(n uint64) {
		if !kept.Load() {
			free.Store(0) // what a release does
		}
		released <- n
	})
	// Below the threshold: nothing.
	free.Store(releaseIdle - 1)
	select {
	case <-released:
		t.Fatal("released with less free than releaseIdle")
	case <-time.After(200 * time.Millisecond):
	}
	// While changes (fewer than a burst) keep coming: nothing.
	free.Store(releaseIdle)
	stop := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(stop) {
		count.Add(1)
		select {
		case <-released:
			t.Fatal("released while changes were still coming")
		case <-time.After(10 * time.Millisecond):
		}
	}
	// Quiet: released.
	select {
	case <-released:
	case <-time.After(30 * time.Second):
		t.Fatal("free pages not returned once the changes were quiet")
	}
	// Free pages that stay: released again, but at most once per period
	// (every tick otherwise: about 200 a second here).
	kept.Store(true)
	free.Store(releaseIdle)
	start := time.Now()
	n := 0
	for n < 3 {
		select {
		case <-released:
			n++
		case <-time.After(30 * time.Second):
			t.Fatal("not released again after the period")
		}
	}
	kept.Store(false)
	if most := int(time.Since(start)/(300*time.Millisecond)) + 1; n > most {
		t.Fatalf("%d releases in %v: more than one per period", n, time.Since(start))
	}
}

// TestLightGCUntilLoaded: the collector runs at firstLoadGCPercent within
// the budget until the load is done, and as before afterwards; and the
// default returns as soon as the live heap passes half the budget.
func TestLightGCUntilLoaded(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT set: lightGCUntilLoaded leaves them alone")
	}
	before, beforeLimit := gcPercent(), memoryLimit()
	log := hclog.NewNullLogger()

	loaded := make(chan struct{})
	done := lightGCUntilLoaded(context.Background(), log, loaded, 1<<40, time.Millisecond, time.Hour)
	if got := gcPercent(); got != firstLoadGCPercent {
		t.Errorf("GC percent during the load %d, want %d", got, firstLoadGCPercent)
	}
	if got := memoryLimit(); got != 1<<40 {
		t.Errorf("memory limit during the load %d, want the budget %d", got, int64(1<<40))
	}
	close(loaded)
	<-done
	if got := gcPercent(); got != before {
		t.Errorf("GC percent after the load %d, want %d as before", got, before)
	}
	if got := memoryLimit(); got != beforeLimit {
		t.Errorf("memory limit after the load %d, want %d as before", got, beforeLimit)
	}

	// A budget the live heap already passes: back to the default without
	// the load being done (the live heap is known after a first cycle).
	runtime.GC()
	done = lightGCUntilLoaded(context.Background(), log, make(chan struct{}), 2, time.Millisecond, time.Hour)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("light GC still on 30 s after the live heap passed half its budget")
	}
	if got := gcPercent(); got != before {
		t.Errorf("GC percent after the budget was passed %d, want %d as before", got, before)
	}
}

// TestLightGCNoCycleBelowBudget: a first load whose heap stays within the
// budget runs no collection cycle: the collector's work would compete with
// the load and the new sessions for the CPU.
func TestLightGCNoCycleBelowBudget(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT set: lightGCUntilLoaded leaves them alone")
	}
	runtime.GC()
	loaded := make(chan struct{})
	done := lightGCUntilLoaded(context.Background(), hclog.NewNullLogger(), loaded, 1<<30, time.Millisecond, time.Hour)
	cycles := readMetric("/gc/cycles/total:gc-cycles")
	// A table of 64 MiB built in small pieces, as a load builds it: many
	// times the heap the last cycle left.
	table := make([][]byte, 0, 1<<14)
	for range 1 << 14 {
		table = append(table, make([]byte, 4<<10))
	}
	ran := readMetric("/gc/cycles/total:gc-cycles") - cycles
	close(loaded)
	<-done
	runtime.KeepAlive(table)
	if ran != 0 {
		t.Errorf("%d collection cycles during a load of 64 MiB within a budget of 1 GiB, want none", ran)
	}
}

// A first load that never finishes (a store that cannot be read at
// start) does not keep the collector light: after the longest it is
// given, the settings found before apply again.
func TestLightGCEndsAfterLongest(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT set: lightGCUntilLoaded leaves them alone")
	}
	before, beforeLimit := gcPercent(), memoryLimit()
	done := lightGCUntilLoaded(context.Background(), hclog.NewNullLogger(), make(chan struct{}), 1<<40, time.Hour, 10*time.Millisecond)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("light GC still on 30 s after the longest a first load is given (10 ms)")
	}
	if got, gotLimit := gcPercent(), memoryLimit(); got != before || gotLimit != beforeLimit {
		t.Errorf("GC percent %d, memory limit %d after the first load's time ran out; want %d, %d as before", got, gotLimit, before, beforeLimit)
	}
}

// gcPercent reads the GC percent in effect.
func gcPercent() int64 { return int64(readMetric("/gc/gogc:percent")) }

// memoryLimit reads the memory limit in effect.
func memoryLimit() int64 { return int64(readMetric("/gc/gomemlimit:bytes")) }

func readMetric(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestFloorPercent: below the floor the goal is the floor; at or past it
// the default.
func TestFloorPercent(t *testing.T) {
	for _, c := range []struct {
		live, floor uint64
		def, want   int
	}{
		{12 << 20, 64 << 20, 100, 433}, // 12 MB live: a goal of 64 MB, not 24
		{16 << 20, 64 << 20, 100, 300},
		{32 << 20, 64 << 20, 100, 100}, // the default reaches the floor
		{500 << 20, 64 << 20, 100, 100},
		{12 << 20, 64 << 20, 400, 433}, // a higher default: the floor still
		{20 << 20, 64 << 20, 400, 400},
		{0, 64 << 20, 100, 100}, // live not known
	} {
		if got := floorPercent(c.live, c.floor, c.def); got != c.want {
			t.Errorf("floorPercent(%d MiB, %d MiB, %d) = %d, want %d", c.live>>20, c.floor>>20, c.def, got, c.want)
		}
	}
}

// TestCeilPercent: past the ceiling of live heap the goal is the live
// heap plus the ceiling, and GOGC never below minPercent; below it, and
// with the collector off (-1), the percent given.
func TestCeilPercent(t *testing.T) {
	for _, c := range []struct {
		live, ceiling uint64
		pct, want     int
	}{
		{100 << 20, 512 << 20, 100, 100}, // a goal 100 MB above: under the ceiling
		{512 << 20, 512 << 20, 100, 100}, // exactly at it
		{1024 << 20, 512 << 20, 100, 50}, // 1 GiB live: 512 MiB above, not 1 GiB
		{1024 << 20, 512 << 20, 40, 40},  // already under it
		{2048 << 20, 512 << 20, 100, 25}, // 2 GiB live: a quarter
		{8192 << 20, 512 << 20, 100, 25}, // never below minPercent
		{1024 << 20, 512 << 20, 433, 50}, // a floor's percent is capped too
		{1024 << 20, 512 << 20, -1, -1},  // the collector off: left alone
		{0, 512 << 20, 100, 100},         // live not known
	} {
		if got := ceilPercent(c.live, c.ceiling, c.pct); got != c.want {
			t.Errorf("ceilPercent(%d MiB, %d MiB, %d) = %d, want %d", c.live>>20, c.ceiling>>20, c.pct, got, c.want)
		}
	}
}

// TestKeepHeapFloor: once started, a cycle with a small live heap raises
// GOGC so that the goal is the floor; a later cycle with a live heap past
// half the floor brings the default back; when it ends, the setting found
// is back.
func TestKeepHeapFloor(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT set: keepHeapFloor leaves them alone")
	}
	const floor = 64 << 20
	before := gcPercent()
	ctx, cancel := context.WithCancel(context.Background())
	after := make(chan struct{})
	done := make(chan struct{})
	ticks := make(chan time.Time) // unbuffered: a send returns once the last tick's look is done
	go func() { keepHeapFloor(ctx, after, floor, ticks, nil); close(done) }()
	runtime.GC()
	if got := gcPercent(); got != before {
		t.Errorf("GC percent %d before the light collector was done, want %d", got, before)
	}
	close(after)
	// cycle runs a collection and lets the floor look at it: the second
	// tick is taken only once the first one's look (and setting) is done.
	cycle := func() {
		runtime.GC()
		ticks <- time.Time{}
		ticks <- time.Time{}
	}
	cycle()
	if gcPercent() <= before {
		t.Fatalf("GC percent still %d after a cycle with %d B live, far below the %d B floor", gcPercent(), readMetric("/gc/heap/live:bytes"), floor)
	}
	// A live heap of three quarters of the floor: the default reaches it.
	table := make([][]byte, 0, 3*floor/4/(64<<10))
	for range cap(table) {
		table = append(table, make([]byte, 64<<10))
	}
	cycle()
	if gcPercent() != before {
		t.Errorf("GC percent %d with %d B live, want the default %d past half the floor", gcPercent(), readMetric("/gc/heap/live:bytes"), before)
	}
	runtime.KeepAlive(table)
	cancel()
	<-done
	if got := gcPercent(); got != before {
		t.Errorf("GC percent %d after the floor ended, want %d as before", got, before)
	}
}

// TestBurstWatch: a burst is burstChanges or more path changes within the
// last burstTicks ticks; it ends once fewer came within them.
func TestBurstWatch(t *testing.T) {
	var b burstWatch
	count := uint64(0)
	step := func(d uint64) bool { count += d; return b.see(count) }
	for i := range burstTicks {
		if step(burstChanges/burstTicks - 1) {
			t.Fatalf("tick %d: a burst at %d changes a tick, fewer than %d a window", i, burstChanges/burstTicks-1, burstChanges)
		}
	}
	if !step(burstChanges) {
		t.Fatalf("no burst after %d changes in one tick", burstChanges)
	}
	for i := range burstTicks - 1 {
		if !step(0) {
			t.Fatalf("burst over %d quiet ticks after it, want it on for the window of %d", i+1, burstTicks)
		}
	}
	if step(0) {
		t.Fatalf("still a burst after %d quiet ticks", burstTicks)
	}
}

// TestKeepHeapFloorBurst: a burst of path changes raises the goal to
// burstHeadroom above the live heap at once (no cycle needed), and its
// end brings the floor's setting back.
func TestKeepHeapFloorBurst(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT set: keepHeapFloor leaves them alone")
	}
	const floor = 64 << 20
	before := gcPercent()
	ctx, cancel := context.WithCancel(context.Background())
	after := make(chan struct{})
	close(after)
	done := make(chan struct{})
	ticks := make(chan time.Time) // unbuffered: a send returns once the last tick's look is done
	var changes atomic.Uint64
	go func() { keepHeapFloor(ctx, after, floor, ticks, changes.Load); close(done) }()
	tick := func() { ticks <- time.Time{} }
	runtime.GC()
	for range burstTicks + 1 {
		tick()
	}
	tick() // the last tick's look is done
	floorPct := gcPercent()
	live := readMetric("/gc/heap/live:bytes")
	changes.Add(burstChanges)
	tick()
	tick()
	burstPct := gcPercent()
	if want := int64(floorPercent(live, live+burstHeadroom, int(before))); burstPct <= floorPct || burstPct < want*9/10 {
		t.Errorf("GC percent %d in a burst with %d B live, want about %d (the floor's %d)", burstPct, live, want, floorPct)
	}
	for range burstTicks + 1 {
		tick()
	}
	if got := gcPercent(); got != floorPct {
		t.Errorf("GC percent %d after the burst, want the floor's %d back", got, floorPct)
	}
	cancel()
	<-done
	if got := gcPercent(); got != before {
		t.Errorf("GC percent %d after the floor ended, want %d as before", got, before)
	}
}

// TestKeepHeapFloorLeftAloneRunsUntilCancelled: with an operator's GOGC
// or GOMEMLIMIT, keepHeapFloor does nothing, and still returns only when
// its context ends; the daemon runs it as a part, and a part that returns
// stops the daemon (TestServesWithOperatorGCSettings in e2e/).
func TestKeepHeapFloorLeftAloneRunsUntilCancelled(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			val := "150"
			if env == "GOMEMLIMIT" {
				val = "1GiB"
			}
			t.Setenv(env, val)
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				returned := make(chan struct{})
				go func() { keepHeapFloor(ctx, nil, heapFloor, nil, nil); close(returned) }()
				synctest.Wait() // keepHeapFloor has returned or is blocked for good
				select {
				case <-returned:
					t.Fatalf("keepHeapFloor returned before its context ended, with %s set", env)
				default:
				}
				cancel()
				<-returned
			})
		})
	}
}
