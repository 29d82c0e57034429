package main

import (
	"context"
	"runtime/debug"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Memory after bursts. A burst of changes (a bulk load, a restart's
// re-announcement, an expiry wave) leaves the Go heap at its high-water
// mark: decoded requests, store reads and GoBGP's per-path garbage are
// freed, but the runtime gives the pages back to the OS only slowly, and
// the process keeps RSS for a table it no longer holds (measured: 468–489
// MB of RSS right after 100,000 rules, against 145 MB HeapAlloc). After a burst of at
// least releaseBurst changes followed by releaseQuiet without any, the
// free pages are handed back at once. One forced GC per burst, never in
// the middle of one.
const (
	releaseBurst = 10_000
	releaseQuiet = 3 * time.Second
)

// releaseAfterBursts watches count (the reconciler's ChangeCount) until ctx
// ends and returns freed memory to the OS after each burst.
func releaseAfterBursts(ctx context.Context, log hclog.Logger, count func() uint64) {
	watchBursts(ctx, count, time.Second, releaseQuiet, func(changes uint64) {
		start := time.Now()
		debug.FreeOSMemory()
		log.Debug("returned free memory to the OS after a burst", "changes", changes, "took", time.Since(start))
	})
}

// watchBursts samples count every tick and calls release(changes) once
// count grew by releaseBurst or more since the last call and then stayed
// the same for quiet.
func watchBursts(ctx context.Context, count func() uint64, tick, quiet time.Duration, release func(changes uint64)) {
	t := time.NewTicker(tick)
	defer t.Stop()
	released, last := count(), count()
	lastMove := time.Now()
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
			if c-released >= releaseBurst && now.Sub(lastMove) >= quiet {
				release(c - released)
				released = c
			}
		}
	}
}
