package reconcile

import (
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// The planner is the reconciler's one comparison of desired with actual
// state: Plan.put decides what one Match needs, and every comparison goes
// through it — Diff (the pure specification, used by previews), the full
// comparison of a pass (every Match) and the dirty-only comparison (the
// Matches that may have changed since the previous pass).
//
// Dirty-only passes. At 100,000 rules comparing everything costs hundreds
// of milliseconds, and after one change all but one Match compare equal
// again. So a pass compares only the Matches whose plan may differ from the
// previous pass's (the dirty set), and every other Match is known to be
// settled (adopted, or neither desired nor in the RIB):
//
//   - the mirror's dirty Matches (Speaker.DrainDirty): paths added,
//     replaced or removed, by us or behind our back;
//   - the Matches of the rows the source read (before and after the
//     change);
//   - the Matches of rules whose ExpiresAt has come (a heap, not a scan);
//   - every Match the previous pass planned to change, and every Match
//     with a change in flight (the work queue's expectations): whatever
//     settles them (a backoff expiring, the mirror catching up, the store
//     coming back) may not mark them dirty.
//
// Anything that cannot be listed makes the next pass compare everything:
// the first pass, the periodic resync, a complete re-read of the rows, a
// mirror that overflowed its dirty set or was rebuilt (speaker restart,
// compaction). TestIncrementalMatchesFull checks that both reach the same
// plans, and TestFullWalkMatchesDiff the full comparison against Diff.

// Want is what desired state asks for one Match.
type Want struct {
	// ID is the rule that owns the Match.
	ID int64
	// Action is what the path must carry. It is ignored when Retire is set.
	Action flowspec.Action
	// Retire is store.Withdrawn or store.Expired when the rule is being
	// retired: its path must go, and the rule becomes final only once the
	// RIB no longer has it. It is "" for a rule that must stay announced.
	Retire store.State
}

// Item is one entry of a Plan.
type Item struct {
	// ID is the rule concerned; 0 for an orphan, which no rule owns.
	ID    int64
	Match flowspec.Match
	// Action is the action to announce (Add, Update, Adopt) or the action
	// found in the RIB (Withdraw, Retire). It is zero for Finish.
	Action flowspec.Action
	// Old is the action found in the RIB for an Update.
	Old flowspec.Action
	// State is the final state of a retiring rule (Retire, Finish).
	State store.State
}

// Rule returns the rule the item is about: its Match and Action.
func (it Item) Rule() flowspec.Rule { return flowspec.Rule{Match: it.Match, Action: it.Action} }

// Plan is the difference between desired and actual state: what a pass does.
// Paths are compared by Match and then by Action.
type Plan struct {
	// Add lists desired rules whose Match is not in the RIB.
	Add []Item
	// Update lists desired rules whose Match is in the RIB with another
	// action. Announcing replaces the path, so updates are make-before-break.
	Update []Item
	// Adopt lists desired rules already in the RIB as wanted: nothing to do,
	// they are adopted rather than re-added.
	Adopt []Item
	// Withdraw lists orphans: locally originated paths that nothing desires,
	// including paths some other local writer put there.
	Withdraw []Item
	// Retire lists retiring rules whose path is still in the RIB. They are
	// withdrawn explicitly and are not subject to the orphan cap.
	Retire []Item
	// Finish lists retiring rules whose path is gone: they become final.
	Finish []Item
	// Capped is set when the orphans in Withdraw exceed
	// Config.MaxWithdrawPerPass: then none of them is withdrawn.
	Capped bool
}

// Empty reports whether applying the plan would change anything.
func (p Plan) Empty() bool {
	return len(p.Add) == 0 && len(p.Update) == 0 && len(p.Retire) == 0 &&
		len(p.Finish) == 0 && (len(p.Withdraw) == 0 || p.Capped)
}

// put adds Match m, desired as w and found in the RIB as (a, present), to
// the plan: the one place that decides what a desired Match needs.
// retiring lists the rows that finish once a retiring m is gone. An
// adoption (the RIB holds what w asks) is reported, not listed.
func (p *Plan) put(m flowspec.Match, w Want, a flowspec.Action, present bool, retiring []Item) (adopted bool) {
	switch {
	case w.Retire != "" && present:
		p.Retire = append(p.Retire, Item{ID: w.ID, Match: m, Action: a, State: w.Retire})
	case w.Retire != "":
		p.Finish = append(p.Finish, retiring...)
	case !present:
		p.Add = append(p.Add, Item{ID: w.ID, Match: m, Action: w.Action})
	case a != w.Action:
		p.Update = append(p.Update, Item{ID: w.ID, Match: m, Action: w.Action, Old: a})
	default:
		return true
	}
	return false
}

// orphan adds a path nothing desires to the plan.
func (p *Plan) orphan(m flowspec.Match, a flowspec.Action) {
	p.Withdraw = append(p.Withdraw, Item{Match: m, Action: a})
}

// limit applies what a plan cannot know from the two sides: the early
// announcements still within their grace are not orphans, the early
// withdrawals still within theirs are not announced again (the store may
// not show the withdrawal yet), and more orphans than max (> 0) cap the
// withdrawal (see Config.MaxWithdrawPerPass).
func (p *Plan) limit(early, leaving *earlySet, max int) {
	if early != nil {
		// An early path is the write on its way: not an orphan, and not
		// a path to put back to the action the store held before that
		// write (an operator's update would otherwise flap and count as
		// drift).
		p.Withdraw = early.spare(p.Withdraw)
		p.Update = early.spare(p.Update)
	}
	if leaving != nil {
		p.Add = leaving.spare(p.Add)
		p.Update = leaving.spare(p.Update)
	}
	p.Capped = max > 0 && len(p.Withdraw) > max
}

// Diff compares desired state (by Match) with the locally originated paths
// in the RIB (actual) and returns what must change. It is pure: it reads its
// arguments and does nothing else.
func Diff(desired map[flowspec.Match]Want, actual map[flowspec.Match]flowspec.Action) Plan {
	return diff(desired, actual, nil, nil)
}

// diff is Diff where retiring (nil: the Want's own rule) lists the rows
// that finish with a retiring Match, and the Matches in hold are left
// alone rather than orphans.
func diff(desired map[flowspec.Match]Want, actual map[flowspec.Match]flowspec.Action,
	retiring map[flowspec.Match][]Item, hold map[flowspec.Match]struct{}) Plan {
	// In the steady state nearly everything is adopted: size that list
	// once (it can hold at most min(desired, actual)) instead of growing it.
	p := Plan{Adopt: make([]Item, 0, min(len(desired), len(actual)))}
	for m, w := range desired {
		a, present := actual[m]
		var fin []Item
		switch {
		case w.Retire == "" || present:
		case retiring != nil:
			fin = retiring[m]
		default:
			fin = []Item{{ID: w.ID, Match: m, State: w.Retire}}
		}
		if p.put(m, w, a, present, fin) {
			p.Adopt = append(p.Adopt, Item{ID: w.ID, Match: m, Action: a})
		}
	}
	for m, a := range actual {
		if _, ok := desired[m]; ok {
			continue
		}
		if _, held := hold[m]; !held {
			p.orphan(m, a)
		}
	}
	return p
}

// planView is the plan of view v against the mirror's paths (actual): the
// specification of the full comparison, and what Preview shows.
func planView(v view, actual map[flowspec.Match]flowspec.Action, early, leaving *earlySet, maxWithdraw int) Plan {
	p := diff(v.want, actual, v.retiring, v.hold)
	p.limit(early, leaving, maxWithdraw)
	return p
}

// lookFunc looks one Match up in the mirror: ok is false while the mirror
// is not initialised.
type lookFunc func(m flowspec.Match) (a flowspec.Action, present, ok bool)

// planner holds what the comparison keeps between passes: the live view
// of the source's rows and the dirty set.
type planner struct {
	src *source
	// v is the view of the source's rows: rebuilt by a full comparison,
	// refreshed Match by Match by a dirty-only one.
	v view
	// dirty holds the Matches the next pass must compare; fullDiff says
	// it must compare all of them.
	dirty    map[flowspec.Match]struct{}
	fullDiff bool
	rowBuf   []*row
	// dirtyPeak is the most entries dirty held since it was last made
	// (trim).
	dirtyPeak int
	// compared is how many Matches the last dirty-only comparison looked
	// at (tests).
	compared int
}

// markDirty has the next comparison look at m.
func (pl *planner) markDirty(m flowspec.Match) { pl.dirty[m] = struct{}{} }

// trim gives back a dirty set a large pass grew, once it is empty again.
func (pl *planner) trim() {
	pl.dirtyPeak = max(pl.dirtyPeak, len(pl.dirty))
	if len(pl.dirty) == 0 && pl.dirtyPeak > bigScratch {
		pl.dirty, pl.dirtyPeak = make(map[flowspec.Match]struct{}), 0
	}
}

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

// wantOf returns what the live view asks for m. The live view keeps in
// want only the Matches with several rows: the view of a Match with one
// row is computed from the row.
func (pl *planner) wantOf(m flowspec.Match) (Want, bool) {
	if rw, one := pl.src.byMatch.only(m); one {
		return wantOfRow(rw, pl.v.now)
	}
	if !pl.src.byMatch.has(m) {
		return Want{}, false
	}
	w, ok := pl.v.want[m]
	return w, ok
}

// wanted reports whether the live view desires m (to keep or to retire).
func (pl *planner) wanted(m flowspec.Match) bool {
	_, ok := pl.wantOf(m)
	return ok
}

// full rebuilds the live view at now from the source's rows and compares
// every Match with the mirror: look for single lookups, paths to list the
// mirror for orphans, size its length and gen its generation. Adopted
// Matches are passed to adopt; the plan's Adopt is nil. ok is false when
// the mirror is not initialised. The plan is planView(view, mirror)
// without Adopt, and limited.
//
// It walks the rows in memory order (source.each), not the index by
// Match: a Match with one row, nearly all of them, costs no lookup but the
// mirror's; the Matches with several rows (rowShared, usually none) are
// collected and compared after. It builds no per-rule map and no list of
// adopted paths: at 100,000 rules with nothing to change it allocates
// nothing per rule.
func (pl *planner) full(now time.Time, look lookFunc, paths func(fn func(flowspec.Match, flowspec.Action)) bool,
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
	g0 := gen()
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
		if desired && p.put(m, w, a, present, v.retiring[m]) {
			adopt(Item{ID: w.ID, Match: m, Action: a}, rw)
		}
		return true
	}
	pl.src.adopted = 0
	var shared map[flowspec.Match]struct{}
	walked := pl.src.each(func(rw *row) bool {
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
		pl.src.byMatch.each(m, func(rw *row) { v.add(rw, now) })
		v.settle(m)
		w, desired := v.want[m]
		_, held := v.hold[m]
		if !compare(m, w, desired, held, nil) {
			return Plan{}, false
		}
	}
	pl.v = v
	// Orphans: the mirror holds more than the Matches found above. With
	// the generation unchanged over the walk, the mirror did not change
	// and the count says there are none; otherwise list it once.
	if gen() != g0 || size() != matched {
		listed := paths(func(m flowspec.Match, a flowspec.Action) {
			if pl.src.byMatch.has(m) {
				if pl.wanted(m) {
					return
				}
				if _, held := v.hold[m]; held {
					return
				}
			}
			p.orphan(m, a)
		})
		if !listed {
			return Plan{}, false
		}
	}
	return p, true
}

// dirtyOnly refreshes the view of the dirty Matches at now and compares
// them with the mirror (look), handing adopted Matches to adopt; ok is
// false when the mirror is not initialised. For those Matches the plan is
// what full gives.
func (pl *planner) dirtyOnly(now time.Time, look lookFunc, adopt func(Item, *row)) (p Plan, ok bool) {
	pl.dirtyPeak = max(pl.dirtyPeak, len(pl.dirty))
	pl.compared = len(pl.dirty)
	if len(pl.dirty) >= bigScratch {
		// A bulk load's pass mostly adds: one array for them instead of
		// doubling one up to a hundred thousand Items.
		p.Add = make([]Item, 0, len(pl.dirty))
	}
	for m := range pl.dirty {
		pl.rowBuf = pl.src.rowsOf(m, pl.rowBuf[:0])
		for _, rw := range pl.rowBuf {
			pl.src.unadopt(rw)
		}
		pl.v.refresh(m, pl.rowBuf, now)
		a, present, ok := look(m)
		if !ok {
			return Plan{}, false
		}
		w, desired := pl.wantOf(m)
		_, held := pl.v.hold[m]
		switch {
		case desired:
			if p.put(m, w, a, present, pl.v.retiring[m]) {
				adopt(Item{ID: w.ID, Match: m, Action: a}, nil)
			}
		case present && !held:
			p.orphan(m, a)
		}
	}
	clear(pl.rowBuf)
	pl.rowBuf = pl.rowBuf[:0]
	return p, true
}
