package reconcile

import (
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// The full comparison. Diff is its specification (TestFullWalkMatchesDiff):
// a full comparison gives the plan plan(view, view.want, mirror) gives, but
// in one walk over the cached rows, looking each desired Match
// up in the mirror, without copying either side into maps: at 100,000
// rules with nothing to change it builds no per-rule map and no list of
// adopted paths (they are counted and handed to adopt one by one).

// lookFunc looks one Match up in the mirror: ok is false while the mirror
// is not initialised.
type lookFunc func(m flowspec.Match) (a flowspec.Action, present, ok bool)

// wantOfRow is the view of a Match whose only row is rw (see view.add and
// view.settle).
func wantOfRow(rw *row, now time.Time) (Want, bool) {
	if rw.final() {
		return Want{}, false
	}
	if st, ok := rw.retiring(now); ok {
		return Want{ID: rw.ID, Retire: st}, true
	}
	if rw.validate() != nil {
		return Want{}, false
	}
	return Want{ID: rw.ID, Action: rw.Action}, true
}

// wantOf returns what the live view (r.v) asks for m. The live view keeps
// in want only the Matches with several rows: the view of a Match with one
// row is computed from the row.
func (r *Reconciler) wantOf(m flowspec.Match) (Want, bool) {
	s, ok := r.cache.byMatch[m]
	if !ok {
		return Want{}, false
	}
	if len(s.more) == 0 {
		return wantOfRow(r.cache.byID[s.one], r.v.now)
	}
	w, ok := r.v.want[m]
	return w, ok
}

// fullWalk rebuilds the live view r.v at now from the cached rows and
// compares every Match with the mirror: look for single lookups, paths to
// list the mirror for orphans, size its length and gen its generation (nil
// if unknown; then the mirror is always listed). Adopted Matches are passed
// to adopt; the plan's Adopt is nil. ok is false when the mirror is not
// initialised. The plan is what plan(r.v, wanted, mirror) returns, without
// Adopt.
//
// It walks the rows in memory order (desiredCache.each), not the index by
// Match: a Match with one row, nearly all of them, costs no lookup but the
// mirror's; the Matches with several rows (rowShared, usually none) are
// collected and compared after.
func (r *Reconciler) fullWalk(now time.Time, look lookFunc, paths func(fn func(flowspec.Match, flowspec.Action)) bool,
	size func() int, gen func() uint64, adopt func(Item, *row)) (p Plan, ok bool) {
	if _, _, ok := look(flowspec.Match{}); !ok {
		return Plan{}, false
	}
	v := view{
		now:      now,
		want:     make(map[flowspec.Match]Want),
		retiring: make(map[flowspec.Match][]Item),
		invalid:  make(map[flowspec.Match][]invalidRow),
		hold:     make(map[flowspec.Match]struct{}),
		shadowed: make(map[flowspec.Match][]shadowedRow),
	}
	var g0 uint64
	if gen != nil {
		g0 = gen()
	}
	matched := 0 // Matches desired or held that are in the mirror
	// compare compares Match m, whose view is w (desired) and whose only
	// row is rw (nil if several), with the mirror.
	compare := func(m flowspec.Match, w Want, desired, held bool, rw *row) bool {
		if !desired && !held {
			return true
		}
		a, present, ok := look(m)
		if !ok {
			return false
		}
		if present {
			matched++
		}
		if !desired {
			return true
		}
		switch {
		case w.Retire != "" && present:
			p.Retire = append(p.Retire, Item{ID: w.ID, Match: m, Action: a, State: w.Retire})
		case w.Retire != "":
			p.Finish = append(p.Finish, v.retiring[m]...)
		case !present:
			p.Add = append(p.Add, Item{ID: w.ID, Match: m, Action: w.Action})
		case a != w.Action:
			p.Update = append(p.Update, Item{ID: w.ID, Match: m, Action: w.Action, Old: a})
		default:
			adopt(Item{ID: w.ID, Match: m, Action: a}, rw)
		}
		return true
	}
	r.cache.adopted = 0
	var shared map[flowspec.Match]struct{}
	walked := r.cache.each(func(rw *row) bool {
		rw.flags &^= rowAdopted
		m := rw.Match
		if rw.flags&rowShared != 0 {
			if shared == nil {
				shared = make(map[flowspec.Match]struct{})
			}
			shared[m] = struct{}{}
			return true
		}
		w, desired := wantOfRow(rw, now)
		held := false
		switch {
		case rw.final():
		case desired && w.Retire != "":
			v.retiring[m] = []Item{{ID: rw.ID, Match: m, State: w.Retire}}
		case !desired:
			err := rw.validate()
			v.invalid[m] = append(v.invalid[m], invalidRow{id: rw.ID, err: err})
			if m.IsValid() {
				v.hold[m] = struct{}{}
				held = true
			}
		}
		return compare(m, w, desired, held, rw)
	})
	if !walked {
		return Plan{}, false
	}
	for m := range shared {
		r.cache.byMatch[m].each(func(id int64) { v.add(r.cache.byID[id], now) })
		v.settle(m)
		w, desired := v.want[m]
		_, held := v.hold[m]
		if !compare(m, w, desired, held, nil) {
			return Plan{}, false
		}
	}
	r.v = v
	// Orphans: the mirror holds more than the Matches found above. With
	// the generation unchanged over the walk, the mirror did not change
	// and the count says there are none; otherwise list it once.
	if gen == nil || gen() != g0 || size() != matched {
		listed := paths(func(m flowspec.Match, a flowspec.Action) {
			if _, in := r.cache.byMatch[m]; in {
				if _, ok := r.wantOf(m); ok {
					return
				}
				if _, held := v.hold[m]; held {
					return
				}
			}
			p.Withdraw = append(p.Withdraw, Item{Match: m, Action: a})
		})
		if !listed {
			return Plan{}, false
		}
		p.Withdraw = r.early.spare(p.Withdraw)
	}
	p.Capped = r.cfg.MaxWithdrawPerPass > 0 && len(p.Withdraw) > r.cfg.MaxWithdrawPerPass
	return p, true
}
