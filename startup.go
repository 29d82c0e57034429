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
	ActiveRules(ctx context.Context) ([]store.Rule, error)
}

// enforceAtStart is the start's guardrail check (guardrails changed while
// the daemon was down apply before anything is announced), sharing its one
// reading of the active rules with the reconciler's first pass
// (reconcile.Reconciler.Seed): at 100,000 rules a full reading costs about
// a sixth of the initial sync to a router, and the start made two. The
// revision is read first, so the reconciler, catching up from it, sees the
// withdrawals made here and every write since. When the reading fails,
// nothing is withdrawn and the reconciler reads on its own.
func enforceAtStart(ctx context.Context, log hclog.Logger, st startReader, gate *admit.Gate, rec *reconcile.Reconciler) (int, error) {
	at := time.Now()
	rev, err := st.Revision(ctx)
	if err != nil {
		return 0, err
	}
	rows, err := st.ActiveRules(ctx)
	if err != nil {
		return 0, err
	}
	ws, err := gate.EnforceAmong(ctx, rows)
	rec.Seed(rev, rows, at)
	if err != nil {
		return 0, err
	}
	for _, w := range ws {
		log.Warn("rule withdrawn by guardrail", "rule", w.Rule.ID, "text", w.Rule.Text, "guardrail", w.Violation.Guardrail, "why", w.Violation.Msg)
	}
	return len(ws), nil
}
