package main

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
)

// startReader is what the start-up scan reads (implemented by
// *store.Store).
type startReader interface {
	Revision(ctx context.Context) (int64, error)
	EachActive(ctx context.Context, fn func(*store.Rule) error) error
}

// enforceAtStart is the start's guardrail check (guardrails changed while
// the daemon was down apply before anything is announced), sharing its
// one walk of the active rules with the reconciler's first pass
// (reconcile.Reconciler.Seed): each rule is checked against the
// guardrails as it streams from the store, compacted for the reconciler
// and, unless it breaks one, handed to the speaker at once
// (reconcile.Preload: reading the table and loading the RIB overlap).
// Only the rules that break a guardrail are kept as they were read (at a
// million rules the whole reading as store.Rules was over a gigabyte,
// and a full reading costs about a sixth of the initial sync to a
// router, which the start made twice). The revision is read first, so
// the reconciler, catching up from it, sees the withdrawals made here and
// every write since. When the walk fails, nothing is withdrawn, what went
// to the speaker stays (stored, active rules) and the reconciler reads on
// its own.
func enforceAtStart(ctx context.Context, log hclog.Logger, st startReader, gate *admit.Gate, rec *reconcile.Reconciler) (int, error) {
	at := time.Now()
	rev, err := st.Revision(ctx)
	if err != nil {
		return 0, err
	}
	var (
		pre      = rec.Preload(ctx)
		breaking []store.Rule
		breaks   = gate.BreakCheck()
	)
	err = st.EachActive(ctx, func(r *store.Rule) error {
		b := breaks(r)
		if b {
			breaking = append(breaking, *r)
		}
		pre.Add(r, !b) // not announced before the gate acted on it
		return nil
	})
	rows, sent := pre.Finish()
	if err != nil {
		return 0, err
	}
	log.Info("active rules read and handed to the speaker", "rules", rows.Len(), "announced", sent, "took", time.Since(at).Round(time.Millisecond))
	ws, err := gate.EnforceAmong(ctx, breaking)
	rec.Seed(rev, rows, at)
	if err != nil {
		return 0, err
	}
	for _, w := range ws {
		log.Warn("rule withdrawn by guardrail", "rule", w.Rule.ID, "text", w.Rule.Text, "guardrail", w.Violation.Guardrail, "why", w.Violation.Msg)
	}
	return len(ws), nil
}
