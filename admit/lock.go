package admit

import (
	"context"
	"errors"
	"time"
)

// Bounded writes at the gate.
//
// The gate serializes check-and-store (writeLock): the quotas, the rate
// of new rules and the checks of an update against the stored rule are
// decided on a store that no other write of this process changes
// between the check and the commit. A write holds the lock through its
// store call, and the store answers every write by its deadline ([store]
// write_timeout, see store's deadline.go) however long its disk hangs.
// A write waiting for the lock waits at most until its own deadline,
// counted from its arrival at the gate: behind a hung commit each write
// is answered 503 in time instead of queueing without end, and reads,
// which never take the lock, are not held up at all.
//
// A write made ahead of its commit (early announcement or withdrawal)
// keeps its deadline when it stops following its client's context
// (keepDeadline): it is then answered, and settled, by that deadline,
// so that a path announced for a write that timed out leaves the
// routers again at the next pass.

// writeLock is a mutex whose Lock can give up at a deadline.
type writeLock struct{ ch chan struct{} }

func newWriteLock() writeLock { return writeLock{ch: make(chan struct{}, 1)} }

// Lock waits for the lock without bound (start, reload).
func (l writeLock) Lock() { l.ch <- struct{}{} }

// Unlock releases it.
func (l writeLock) Unlock() { <-l.ch }

// lockBy waits for the lock until ctx ends: a Refusal of kind
// KindUnavailable if its deadline passed (bound is the write timeout, for
// the message), ctx's error if the caller went away.
func (l writeLock) lockBy(ctx context.Context, bound time.Duration) error {
	select {
	case l.ch <- struct{}{}:
		return nil
	default:
	}
	select {
	case l.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return ctx.Err()
		}
		return refuse(KindUnavailable, -1, "",
			"nothing was stored: an earlier write has held the store for longer than this write's %v ([store] write_timeout); the database's disk may be hung or overloaded: check it, then retry", bound)
	}
}

// deadline bounds a write of n rules from its arrival at the gate, as the
// store bounds it from its arrival there (a quarter more per 1,000 rules).
func (g *Gate) deadline(ctx context.Context, n int) (context.Context, context.CancelFunc) {
	d := g.cfg.WriteTimeout
	if n > 1000 {
		d += time.Duration(n/1000) * d / 4
	}
	return context.WithTimeout(ctx, d)
}

// keepDeadline returns a context that no longer ends with ctx's
// cancellation (the client going away) but still ends at its deadline.
func keepDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	kept := context.WithoutCancel(ctx)
	if d, ok := ctx.Deadline(); ok {
		return context.WithDeadline(kept, d)
	}
	return kept, func() {}
}
