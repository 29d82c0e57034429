package reconcile

import (
	"fmt"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// view is desired state as of one instant: the lifecycle and validate steps
// of a pass. It is computed from stored rows and a clock reading only, so
// the same rows give the same view.
type view struct {
	// want has one entry per Match: the rule that must be announced, or
	// else a retiring rule whose path must go.
	want map[flowspec.Match]Want
	// retiring holds every retiring row by Match: several rows can finish
	// when one path goes.
	retiring map[flowspec.Match][]Item
	// invalid lists desired rows that failed validation (terminal).
	invalid []invalidRow
	// hold holds the Matches of invalid desired rows: their paths are left
	// alone rather than treated as orphans, since what the operator wants
	// for them is not known.
	hold map[flowspec.Match]struct{}
	// shadowed lists desired rows whose Match another desired row owns.
	shadowed []shadowedRow
	// ids holds every row id in the view (to prune per-rule caches).
	ids map[int64]struct{}
	// nextExpiry is the nearest future ExpiresAt among rows that are not
	// yet retiring; zero if none.
	nextExpiry time.Time
}

type invalidRow struct {
	id  int64
	err error
}

type shadowedRow struct {
	id, by int64
}

// retiringState reports whether a row must be retired at now, and as what.
// Rules whose ExpiresAt has passed are retiring even if they were never
// announced (the process was down): they never enter the desired set.
func retiringState(r store.Rule, now time.Time) (store.State, bool) {
	switch {
	case r.WithdrawRequested:
		return store.Withdrawn, true
	case !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt):
		return store.Expired, true
	}
	return "", false
}

// validate is the reconciler's own check of a stored rule before it goes
// anywhere near the speaker.
func validate(r store.Rule) error {
	switch {
	case !r.Rule.Match.IsValid():
		return &InvalidRuleError{ID: r.ID, Reason: "match is not valid"}
	case !r.Rule.Action.IsValid():
		return &InvalidRuleError{ID: r.ID, Reason: "action is not valid"}
	}
	return nil
}

// newView applies the lifecycle and validate steps to rows at now.
func newView(rows []store.Rule, now time.Time) view {
	v := view{
		want:     make(map[flowspec.Match]Want, len(rows)),
		retiring: make(map[flowspec.Match][]Item),
		hold:     make(map[flowspec.Match]struct{}),
		ids:      make(map[int64]struct{}, len(rows)),
	}
	for _, r := range rows {
		if r.State != "" && r.State != store.Active {
			continue // final already; ActiveRules should not return it
		}
		v.ids[r.ID] = struct{}{}
		m := r.Rule.Match
		if st, ok := retiringState(r, now); ok {
			// An invalid Match cannot be in the RIB, so such a row
			// finishes at once (the zero Match is never in actual).
			v.retiring[m] = append(v.retiring[m], Item{ID: r.ID, Match: m, State: st})
			continue
		}
		if !r.ExpiresAt.IsZero() && (v.nextExpiry.IsZero() || r.ExpiresAt.Before(v.nextExpiry)) {
			v.nextExpiry = r.ExpiresAt
		}
		if err := validate(r); err != nil {
			v.invalid = append(v.invalid, invalidRow{id: r.ID, err: err})
			if m.IsValid() {
				v.hold[m] = struct{}{}
			}
			continue
		}
		if w, dup := v.want[m]; dup {
			// The store keys active rules by Match, so this should not
			// happen; if it does, the newest row owns the path.
			if w.ID > r.ID {
				v.shadowed = append(v.shadowed, shadowedRow{id: r.ID, by: w.ID})
				continue
			}
			v.shadowed = append(v.shadowed, shadowedRow{id: w.ID, by: r.ID})
		}
		v.want[m] = Want{ID: r.ID, Action: r.Rule.Action}
	}
	// A retiring row whose Match a desired row owns waits: the path stays
	// (it is desired), and the row finishes only when the path is gone.
	for m, rs := range v.retiring {
		if _, desired := v.want[m]; !desired {
			v.want[m] = Want{ID: rs[0].ID, Retire: rs[0].State}
		}
	}
	return v
}

func (s shadowedRow) err() string {
	return fmt.Sprintf("shadowed by rule %d with the same match", s.by)
}
