package reconcile

import (
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Dirty-only passes. Every pass plans from desired and actual state, never
// from event contents; but at 100,000 rules comparing everything costs
// hundreds of milliseconds, and after one change all but one Match compare
// equal again. So a pass compares only the Matches whose plan may differ
// from the previous pass's (the dirty set), and every other Match is known
// to be settled (adopted, or neither desired nor in the RIB):
//
//   - the mirror's dirty Matches (DirtyTracker.DrainDirty): paths added,
//     replaced or removed, by us or behind our back;
//   - the Matches of the rows the desired cache read (before and after the
//     change);
//   - the Matches of rules whose ExpiresAt has come (a heap, not a scan);
//   - every Match the previous pass planned to change, and every Match
//     with a change in flight (expects): whatever settles them (a backoff
//     expiring, the mirror catching up, the store coming back) may not mark
//     them dirty.
//
// Anything that cannot be listed makes the next pass compare everything
// (the full path, unchanged): the first pass, the periodic resync, a
// complete re-read of the rows, a mirror that overflowed its dirty set or
// was rebuilt (speaker restart, compaction), and a speaker or store that
// cannot say what changed. TestIncrementalMatchesFull checks that both
// paths reach the same plans.

// DirtyTracker is optionally implemented by a Speaker whose mirror records
// which Matches changed (bgp.Speaker does). Without it every pass compares
// every path.
type DirtyTracker interface {
	// DrainDirty calls fn for every Match whose path changed since the
	// previous call and forgets them; complete is false (fn not called)
	// when it cannot say, and then every path must be compared.
	DrainDirty(fn func(flowspec.Match)) (gen uint64, complete bool)
	// Path returns the path for m as Paths reports it; ok is false while
	// the mirror is not initialised.
	Path(m flowspec.Match) (a flowspec.Action, present, ok bool)
	// Len returns the number of paths.
	Len() int
}

// rereadAfterStoreError bounds how often the loop re-reads every row while
// the store keeps failing (see pass).
const rereadAfterStoreError = 10 * time.Second

// markDirty has the next comparison look at m.
func (r *Reconciler) markDirty(m flowspec.Match) { r.dirty[m] = struct{}{} }

// forget drops what is known of a rule no longer active for this site:
// all of it is on its cached row, gone with it (desiredCache.writes drops
// its entries when it next compacts).
func (r *Reconciler) forget(int64) {}

// dirtyState refreshes the view of the dirty Matches and returns desired
// and actual state restricted to them; ok is false when the mirror is not
// initialised.
func (r *Reconciler) dirtyState(t DirtyTracker, now time.Time) (desired map[flowspec.Match]Want, actual map[flowspec.Match]flowspec.Action, ok bool) {
	for m := range r.expects {
		r.dirty[m] = struct{}{}
	}
	r.dirtyPeak = max(r.dirtyPeak, len(r.dirty))
	if r.dw == nil || len(r.dw) > bigScratch {
		// Do not keep a large map around after a burst.
		r.dw = make(map[flowspec.Match]Want, len(r.dirty))
		r.da = make(map[flowspec.Match]flowspec.Action, len(r.dirty))
	} else {
		clear(r.dw)
		clear(r.da)
	}
	for m := range r.dirty {
		r.rowBuf = r.cache.rowsOf(m, r.rowBuf[:0])
		for _, rw := range r.rowBuf {
			r.cache.unadopt(rw)
		}
		r.v.refresh(m, r.rowBuf, now)
		if w, ok := r.wantOf(m); ok {
			r.dw[m] = w
		}
		a, present, ok := t.Path(m)
		if !ok {
			return nil, nil, false
		}
		if present {
			r.da[m] = a
		}
	}
	clear(r.rowBuf)
	r.rowBuf = r.rowBuf[:0]
	return r.dw, r.da, true
}
