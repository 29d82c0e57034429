package reconcile

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Preview reads desired and actual state and returns the plan the next pass
// would apply (before backoff and pending changes are taken into account),
// without changing anything. It is safe to call while Run is running.
// Unknown is not empty: it fails when either side cannot be read.
func (r *Reconciler) Preview(ctx context.Context) (Plan, error) {
	rows, err := readAll(ctx, r.d, 0)
	if err != nil {
		return Plan{}, fmt.Errorf("reconcile: read desired state: %w", err)
	}
	actual := make(map[flowspec.Match]flowspec.Action)
	if !r.s.Paths(func(m flowspec.Match, a flowspec.Action) { actual[m] = a }) {
		return Plan{}, ErrMirrorNotReady
	}
	p := planView(newViewRows(rows, r.now()), actual, &r.early, &r.leaving, r.cfg.MaxWithdrawPerPass)
	for _, items := range [][]Item{p.Add, p.Update, p.Adopt, p.Withdraw, p.Retire, p.Finish} {
		sortItems(items)
	}
	return p, nil
}

// sortItems orders items by rule id, then by family and NLRI bytes, so that
// previews are stable.
func sortItems(items []Item) {
	slices.SortFunc(items, func(a, b Item) int {
		if c := cmp.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Match.Family(), b.Match.Family()); c != 0 {
			return c
		}
		return bytes.Compare(a.Match.AppendTo(nil), b.Match.AppendTo(nil))
	})
}
