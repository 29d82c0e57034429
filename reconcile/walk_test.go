package reconcile

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// TestFullWalkMatchesDiff checks the full comparison (planner.full) against its
// specification, plan(newView(rows), Diff) on random rows and mirrors:
// retiring, invalid, duplicate (shadowed) and final rows, orphans, paths
// with another action, with and without a generation.
func TestFullWalkMatchesDiff(t *testing.T) {
	now := time.Now()
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		const n = 40
		var rows []store.Rule
		for i := range n {
			if rng.IntN(4) == 0 {
				continue
			}
			a := discard()
			if rng.IntN(3) == 0 {
				a = rateLimit(1 + rng.IntN(2))
			}
			row := store.Rule{ID: int64(len(rows) + 1), Rule: testRule(t, i, a), State: store.Active}
			switch rng.IntN(10) {
			case 0:
				row.ExpiresAt = now.Add(-time.Second)
			case 1:
				row.WithdrawRequested = true
			case 2:
				row.Rule.Action = flowspec.Action{}
			case 3:
				row.ExpiresAt = now.Add(time.Hour)
			}
			rows = append(rows, row)
			if rng.IntN(6) == 0 { // a duplicate of the same Match
				dup := row
				dup.ID = int64(len(rows) + 1)
				dup.WithdrawRequested = rng.IntN(2) == 0
				if rng.IntN(3) == 0 {
					dup.State = store.Withdrawn
				}
				rows = append(rows, dup)
			}
		}
		mirror := make(map[flowspec.Match]flowspec.Action)
		for i := range n + 10 {
			if rng.IntN(3) == 0 {
				continue
			}
			a := discard()
			if rng.IntN(4) == 0 {
				a = rateLimit(1)
			}
			mirror[testRule(t, i, discard()).Match] = a
		}

		v := newView(rows, now)
		r, _, _ := newTest(t, Config{MaxWithdrawPerPass: rng.IntN(8)})
		want := planView(v, mirror, &r.early, &r.leaving, r.cfg.MaxWithdrawPerPass)

		r.src.load(rows)
		var adopted []Item
		look := func(m flowspec.Match) (flowspec.Action, bool, bool) {
			a, in := mirror[m]
			return a, in, true
		}
		paths := func(fn func(flowspec.Match, flowspec.Action)) bool {
			for m, a := range mirror {
				fn(m, a)
			}
			return true
		}
		size := func() int { return len(mirror) }
		g := uint64(1)
		gen := func() uint64 {
			if seed%2 == 1 {
				g++ // a mirror changing during the walk: always listed
			}
			return g
		}
		got, ok := r.plan.full(now, look, paths, size, gen, func(it Item, _ *row) { adopted = append(adopted, it) })
		if !ok {
			t.Fatal("mirror not initialised")
		}
		got.limit(&r.early, &r.leaving, r.cfg.MaxWithdrawPerPass)
		got.Adopt = adopted
		for _, p := range []*Plan{&want, &got} {
			for _, items := range [][]Item{p.Add, p.Update, p.Adopt, p.Withdraw, p.Retire, p.Finish} {
				sortItems(items)
			}
		}
		for name, pair := range map[string][2][]Item{
			"Add": {got.Add, want.Add}, "Update": {got.Update, want.Update}, "Adopt": {got.Adopt, want.Adopt},
			"Withdraw": {got.Withdraw, want.Withdraw}, "Retire": {got.Retire, want.Retire}, "Finish": {got.Finish, want.Finish},
		} {
			if !slices.Equal(pair[0], pair[1]) {
				t.Fatalf("seed %d: %s = %v, want %v", seed, name, pair[0], pair[1])
			}
		}
		if got.Capped != want.Capped {
			t.Fatalf("seed %d: Capped = %v, want %v", seed, got.Capped, want.Capped)
		}
		// The live view agrees with the full one Match by Match.
		for m := range r.src.byMatch {
			w, ok := r.plan.wantOf(m)
			if vw, vok := v.want[m]; ok != vok || w != vw {
				t.Fatalf("seed %d: wantOf = %v %v, view %v %v", seed, w, ok, vw, vok)
			}
		}
		if !maps.Equal(r.plan.v.hold, v.hold) {
			t.Fatalf("seed %d: hold %v, want %v", seed, r.plan.v.hold, v.hold)
		}
	}
}

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
