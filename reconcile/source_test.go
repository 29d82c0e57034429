package reconcile

import (
	"testing"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// TestCompactRows: after many rows came in incrementally (and some left
// or changed), compactRows puts every live row in one slice, byID points
// into it, and nothing else about the copy changes.
func TestCompactRows(t *testing.T) {
	var c source
	var first []store.Rule
	for i := range 10 {
		first = append(first, store.Rule{ID: int64(i + 1), Rule: testRule(t, i, discard()), State: store.Active})
	}
	c.load(first)
	nop := func(flowspec.Match) {}
	var delta store.Delta
	for i := 10; i < 10+2*bigScratch; i++ {
		delta.Active = append(delta.Active, store.Rule{ID: int64(i + 1), Rule: testRule(t, i, discard()), State: store.Active})
	}
	delta.Gone = []int64{3, 20, 21}
	c.apply(delta, nop)
	// A changed row: replaced by a copy in extra.
	c.apply(store.Delta{Active: []store.Rule{{ID: 30, Rule: testRule(t, 29, rateLimit(5)), State: store.Active}}}, nop)
	c.byID[40].flags |= rowSeen

	want := make(map[int64]row, len(c.byID))
	for id, r := range c.byID {
		want[id] = *r
	}
	c.compactRows()
	if len(c.extra) != 0 || len(c.rows) != len(want) || len(c.byID) != len(want) {
		t.Fatalf("after compacting: %d rows, %d extra, %d by id; want %d rows", len(c.rows), len(c.extra), len(c.byID), len(want))
	}
	for i := range c.rows {
		r := &c.rows[i]
		w, ok := want[r.ID]
		if !ok || c.byID[r.ID] != r {
			t.Fatalf("row %d: in want %v, byID points into rows %v", r.ID, ok, c.byID[r.ID] == r)
		}
		w.flags &^= rowExtra
		if *r != w {
			t.Fatalf("row %d changed: %+v, want %+v", r.ID, *r, w)
		}
	}
	if c.byID[30].Action != rateLimit(5) || c.byID[40].flags&rowSeen == 0 {
		t.Fatal("a row's fields were lost")
	}
	// Below the threshold (fewer extra rows than rows): left alone.
	rows := c.rows
	c.apply(store.Delta{Active: []store.Rule{{ID: 99999, Rule: testRule(t, 99998, discard()), State: store.Active}}}, nop)
	c.compactRows()
	if len(c.extra) != 1 || &c.rows[0] != &rows[0] {
		t.Fatal("compacted a copy with few new rows")
	}
}
