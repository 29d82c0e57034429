package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
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
	released := make(chan uint64, 10)
	go watchBursts(ctx, count.Load, free.Load, 5*time.Millisecond, 60*time.Millisecond, 300*time.Millisecond, func(n uint64) {
		free.Store(0) // what a release does
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
	case <-time.After(2 * time.Second):
		t.Fatal("free pages not returned once the changes were quiet")
	}
	// Free pages that stay: released again, but at most once per period
	// (every tick otherwise: about 200 a second here).
	var kept atomic.Bool
	kept.Store(true)
	free.Store(releaseIdle)
	go func() {
		for kept.Load() {
			free.Store(releaseIdle)
			time.Sleep(time.Millisecond)
		}
	}()
	start := time.Now()
	n := 0
	for n < 3 {
		select {
		case <-released:
			n++
		case <-time.After(5 * time.Second):
			t.Fatal("not released again after the period")
		}
	}
	kept.Store(false)
	if most := int(time.Since(start)/(300*time.Millisecond)) + 1; n > most {
		t.Fatalf("%d releases in %v: more than one per period", n, time.Since(start))
	}
}
