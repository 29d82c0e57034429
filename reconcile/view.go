package reconcile

import (
	"cmp"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// view is desired state as of one instant: the lifecycle and validate steps
// of a pass. It is computed from stored rows and a clock reading only, so
// the same rows give the same view, and everything in it is per Match: the
// view of one Match depends on the rows of that Match only, so it can be
// refreshed for the Matches whose rows changed (see refresh).
type view struct {
	// want has one entry per Match: the rule that must be announced, or
	// else a retiring rule whose path must go.
	want map[flowspec.Match]Want
	// retiring holds every retiring row by Match: several rows can finish
	// when one path goes.
	retiring map[flowspec.Match][]Item
	// invalid lists, by Match, desired rows that failed validation
	// (terminal).
	invalid map[flowspec.Match][]invalidRow
	// hold holds the Matches of invalid desired rows: their paths are left
	// alone rather than treated as orphans, since what the operator wants
	// for them is not known.
	hold map[flowspec.Match]struct{}
	// shadowed lists, by Match, desired rows whose Match another desired
	// row owns.
	shadowed map[flowspec.Match][]shadowedRow
	// nextExpiry is the nearest future ExpiresAt among rows that are not
	// yet retiring; zero if none (newView only).
	nextExpiry time.Time
	// now is the instant of the view.
	now time.Time
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
	c := rowOf(&r)
	return c.retiring(now)
}

func (r *row) retiring(now time.Time) (store.State, bool) {
	switch {
	case r.withdrawRequested():
		return store.Withdrawn, true
	case r.expires != 0 && now.UnixNano() >= r.expires:
		return store.Expired, true
	}
	return "", false
}

// validate is the reconciler's own check of a stored rule before it goes
// anywhere near the speaker.
func validate(r store.Rule) error {
	c := rowOf(&r)
	return c.validate()
}

func (r *row) validate() error {
	switch {
	case !r.Match.IsValid():
		return &InvalidRuleError{ID: r.ID, Reason: "match is not valid"}
	case !r.Action.IsValid():
		return &InvalidRuleError{ID: r.ID, Reason: "action is not valid"}
	}
	return nil
}

// newViewRows applies the lifecycle and validate steps to rows at now.
func newViewRows(rows []row, now time.Time) view {
	return newViewOf(func(yield func(*row) bool) {
		for i := range rows {
			if !yield(&rows[i]) {
				return
			}
		}
	}, len(rows), now)
}

// newViewOf is newView of n rows in any order.
func newViewOf(rows iter.Seq[*row], n int, now time.Time) view {
	v := view{
		now:      now,
		want:     make(map[flowspec.Match]Want, n),
		retiring: make(map[flowspec.Match][]Item),
		invalid:  make(map[flowspec.Match][]invalidRow),
		hold:     make(map[flowspec.Match]struct{}),
		shadowed: make(map[flowspec.Match][]shadowedRow),
	}
	for r := range rows {
		if exp, ok := v.add(r, now); ok && (v.nextExpiry.IsZero() || exp.Before(v.nextExpiry)) {
			v.nextExpiry = exp
		}
	}
	for m := range v.retiring {
		v.settle(m)
	}
	for m := range v.shadowed {
		v.settle(m)
	}
	return v
}

// refresh recomputes the view of Match m from rows, all the rows of m. It
// is for the live view (Reconciler.v), whose want keeps only the Matches
// with several rows (see wantOf).
func (v *view) refresh(m flowspec.Match, rows []*row, now time.Time) {
	v.now = now
	delete(v.want, m)
	delete(v.retiring, m)
	delete(v.invalid, m)
	delete(v.hold, m)
	delete(v.shadowed, m)
	for _, r := range rows {
		v.add(r, now)
	}
	v.settle(m)
	if len(rows) <= 1 {
		delete(v.want, m)
	}
}

// add applies the lifecycle and validate steps to one row. It returns the
// row's ExpiresAt when the row is not retiring and expires.
func (v *view) add(r *row, now time.Time) (expires time.Time, ok bool) {
	if r.final() {
		return time.Time{}, false // final already; EachActive should not give it
	}
	m := r.Match
	if st, ok := r.retiring(now); ok {
		// An invalid Match cannot be in the RIB, so such a row
		// finishes at once (the zero Match is never in actual).
		v.retiring[m] = append(v.retiring[m], Item{ID: r.ID, Match: m, State: st})
		return time.Time{}, false
	}
	expires, ok = r.expiresAt(), r.expires != 0
	if err := r.validate(); err != nil {
		v.invalid[m] = append(v.invalid[m], invalidRow{id: r.ID, err: err})
		if m.IsValid() {
			v.hold[m] = struct{}{}
		}
		return expires, ok
	}
	if w, dup := v.want[m]; dup {
		// The store keys active rules by Match, so this should not
		// happen; if it does, the newest row owns the path, whatever
		// the order the rows come in (settle names the owner).
		if w.ID > r.ID {
			v.shadowed[m] = append(v.shadowed[m], shadowedRow{id: r.ID})
			return expires, ok
		}
		v.shadowed[m] = append(v.shadowed[m], shadowedRow{id: w.ID})
	}
	v.want[m] = Want{ID: r.ID, Action: r.Action}
	return expires, ok
}

// settle finishes the view of m once all its rows are added.
func (v *view) settle(m flowspec.Match) {
	w, desired := v.want[m]
	if sh := v.shadowed[m]; desired && len(sh) > 0 {
		for i := range sh {
			sh[i].by = w.ID
		}
		slices.SortFunc(sh, func(a, b shadowedRow) int { return cmp.Compare(a.id, b.id) })
	}
	// A retiring row whose Match a desired row owns waits: the path stays
	// (it is desired), and the row finishes only when the path is gone.
	if rs := v.retiring[m]; len(rs) > 0 {
		slices.SortFunc(rs, func(a, b Item) int { return cmp.Compare(a.ID, b.ID) })
		if !desired {
			v.want[m] = Want{ID: rs[0].ID, Retire: rs[0].State}
		}
	}
}

func (s shadowedRow) err() string {
	return fmt.Sprintf("shadowed by rule %d with the same match", s.by)
}
