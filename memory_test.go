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
	go watchBursts(ctx, count.Load, 5*time.Millisecond, 60*time.Millisecond, func(n uint64) { released <- n })

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
