package main

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/store"
)

// purgeInterval is how often the daemon deletes history older than
// [store] history_retention; the first purge runs a minute after start,
// out of the way of the first passes.
const (
	purgeInterval = time.Hour
	purgeFirst    = time.Minute
)

// purger deletes expired history on a timer until ctx ends.
type purger interface {
	PurgeHistory(ctx context.Context, before time.Time, batch int) (store.Purged, error)
}

// purgeHistory runs st.PurgeHistory every purgeInterval with the cut
// now - retention, in small batches, off the reconciler's path, until ctx
// ends. A failed purge is logged and retried at the next tick.
func purgeHistory(ctx context.Context, log hclog.Logger, st purger, retention time.Duration, now func() time.Time) {
	runPurges(ctx, log, st, retention, now, purgeFirst, purgeInterval)
}

// runPurges is purgeHistory with its delays: the first purge after first,
// then one every interval.
func runPurges(ctx context.Context, log hclog.Logger, st purger, retention time.Duration, now func() time.Time, first, interval time.Duration) {
	if retention <= 0 {
		<-ctx.Done() // keep forever; returning early would stop the daemon
		return
	}
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p, err := st.PurgeHistory(ctx, now().Add(-retention), 0)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("purging old history failed; retrying in an hour", "error", err)
		case p.Events > 0 || p.Rules > 0:
			log.Info("purged history older than the retention", "retention", retention, "events", p.Events, "rules", p.Rules)
		}
		t.Reset(interval)
	}
}
