package reconcile

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

func TestDiff(t *testing.T) {
	a, b, c := testRule(t, 1, discard()), testRule(t, 2, rateLimit(1000)), testRule(t, 3, discard())
	type want = map[flowspec.Match]Want
	type rib = map[flowspec.Match]flowspec.Action
	tests := []struct {
		name    string
		desired want
		actual  rib
		plan    Plan
	}{
		{name: "both empty"},
		{
			name:    "add missing",
			desired: want{a.Match: {ID: 1, Action: a.Action}},
			plan:    Plan{Add: []Item{{ID: 1, Match: a.Match, Action: a.Action}}},
		},
		{
			name:    "adopt equal path",
			desired: want{a.Match: {ID: 1, Action: a.Action}},
			actual:  rib{a.Match: a.Action},
			plan:    Plan{Adopt: []Item{{ID: 1, Match: a.Match, Action: a.Action}}},
		},
		{
			name:    "update on action drift",
			desired: want{a.Match: {ID: 1, Action: a.Action}},
			actual:  rib{a.Match: rateLimit(5)},
			plan:    Plan{Update: []Item{{ID: 1, Match: a.Match, Action: a.Action, Old: rateLimit(5)}}},
		},
		{
			name:   "withdraw orphan",
			actual: rib{b.Match: b.Action},
			plan:   Plan{Withdraw: []Item{{Match: b.Match, Action: b.Action}}},
		},
		{
			name:    "retire present path",
			desired: want{a.Match: {ID: 1, Action: a.Action, Retire: store.Expired}},
			actual:  rib{a.Match: a.Action},
			plan:    Plan{Retire: []Item{{ID: 1, Match: a.Match, Action: a.Action, State: store.Expired}}},
		},
		{
			name:    "finish retiring rule once its path is gone",
			desired: want{a.Match: {ID: 1, Retire: store.Withdrawn}},
			plan:    Plan{Finish: []Item{{ID: 1, Match: a.Match, State: store.Withdrawn}}},
		},
		{
			name: "all at once",
			desired: want{
				a.Match: {ID: 1, Action: a.Action},
				b.Match: {ID: 2, Action: b.Action},
				c.Match: {ID: 3, Retire: store.Expired},
			},
			actual: rib{a.Match: a.Action, b.Match: discard(), c.Match: c.Action, testRule(t, 4, discard()).Match: discard()},
			plan: Plan{
				Adopt:    []Item{{ID: 1, Match: a.Match, Action: a.Action}},
				Update:   []Item{{ID: 2, Match: b.Match, Action: b.Action, Old: discard()}},
				Retire:   []Item{{ID: 3, Match: c.Match, Action: c.Action, State: store.Expired}},
				Withdraw: []Item{{Match: testRule(t, 4, discard()).Match, Action: discard()}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Diff(tt.desired, tt.actual)
			for _, l := range []struct {
				name      string
				got, want []Item
			}{
				{"Add", got.Add, tt.plan.Add},
				{"Update", got.Update, tt.plan.Update},
				{"Adopt", got.Adopt, tt.plan.Adopt},
				{"Withdraw", got.Withdraw, tt.plan.Withdraw},
				{"Retire", got.Retire, tt.plan.Retire},
				{"Finish", got.Finish, tt.plan.Finish},
			} {
				sortItems(l.got)
				sortItems(l.want)
				if !slices.Equal(l.got, l.want) {
					t.Errorf("%s = %+v, want %+v", l.name, l.got, l.want)
				}
			}
			if got.Capped {
				t.Error("Diff set Capped")
			}
			if got.Empty() != tt.plan.Empty() {
				t.Errorf("Empty() = %v, want %v", got.Empty(), tt.plan.Empty())
			}
		})
	}
}

func TestNewViewLifecycle(t *testing.T) {
	now := time.Now()
	r := func(id int, exp time.Time, withdraw bool) store.Rule {
		return store.Rule{ID: int64(id), Rule: testRule(t, id, discard()), ExpiresAt: exp, State: store.Active, WithdrawRequested: withdraw}
	}
	bad := r(5, time.Time{}, false)
	bad.Rule.Action = flowspec.Action{}
	dupOld, dupNew := r(6, time.Time{}, false), r(7, time.Time{}, false)
	dupOld.Rule.Match = dupNew.Rule.Match
	rows := []store.Rule{
		r(1, time.Time{}, false),          // desired forever
		r(2, now.Add(time.Minute), false), // desired, expires later
		r(3, now, false),                  // expires exactly now: retiring
		r(4, now.Add(time.Hour), true),    // withdraw requested
		bad, dupOld, dupNew,
		r(8, now.Add(time.Second), false),
	}
	v := newView(rows, now)
	for id, st := range map[int]store.State{1: "", 2: "", 3: store.Expired, 4: store.Withdrawn, 8: ""} {
		w, ok := v.want[testRule(t, id, discard()).Match]
		if !ok || w.ID != int64(id) || w.Retire != st {
			t.Errorf("rule %d: got %+v (present %v), want retire %q", id, w, ok, st)
		}
	}
	if _, ok := v.want[bad.Rule.Match]; ok {
		t.Error("invalid rule is desired")
	}
	if _, ok := v.hold[bad.Rule.Match]; !ok || len(v.invalid) != 1 {
		t.Errorf("invalid rule not held and reported: hold %v, invalid %v", v.hold, v.invalid)
	}
	if w, sh := v.want[dupNew.Rule.Match], v.shadowed[dupNew.Rule.Match]; w.ID != 7 || len(v.shadowed) != 1 || len(sh) != 1 || sh[0] != (shadowedRow{id: 6, by: 7}) {
		t.Errorf("duplicate match: want owned by 7 and 6 shadowed, got %+v %+v", w, v.shadowed)
	}
	if !v.nextExpiry.Equal(now.Add(time.Second)) {
		t.Errorf("nextExpiry = %v, want now+1s", v.nextExpiry.Sub(now))
	}
}

func TestBackoffDelay(t *testing.T) {
	b := backoff{base: 100 * time.Millisecond, max: 30 * time.Second}
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 9: 25600 * time.Millisecond, 10: 30 * time.Second, 1000: 30 * time.Second} {
		if got := b.delay(n); got != want {
			t.Errorf("delay(%d) = %v, want %v", n, got, want)
		}
	}
}

func TestIsTerminal(t *testing.T) {
	if !IsTerminal(&terminalErr{"bad"}) || !IsTerminal(&InvalidRuleError{}) {
		t.Error("terminal errors not recognised")
	}
	if IsTerminal(errFlaky) || IsTerminal(nil) {
		t.Error("transient error recognised as terminal")
	}
	if !IsTerminal(fmtWrap(&terminalErr{"bad"})) {
		t.Error("wrapped terminal error not recognised")
	}
}

func fmtWrap(err error) error { return fmt.Errorf("announce: %w", err) }

// TestDiffConvergedAllocs: the steady state costs one allocation (the Adopt
// list), whatever the size.
func TestDiffConvergedAllocs(t *testing.T) {
	desired := make(map[flowspec.Match]Want)
	actual := make(map[flowspec.Match]flowspec.Action)
	for i := range 1000 {
		r := testRule(t, i, discard())
		desired[r.Match] = Want{ID: int64(i + 1), Action: r.Action}
		actual[r.Match] = r.Action
	}
	if n := testing.AllocsPerRun(20, func() { Diff(desired, actual) }); n > 1 {
		t.Errorf("Diff of a converged set: %v allocs, want 1", n)
	}
}

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
		r.src.byMatch.all(func(m flowspec.Match) {
			w, ok := r.plan.wantOf(m)
			if vw, vok := v.want[m]; ok != vok || w != vw {
				t.Fatalf("seed %d: wantOf = %v %v, view %v %v", seed, w, ok, vw, vok)
			}
		})
		if !maps.Equal(r.plan.v.hold, v.hold) {
			t.Fatalf("seed %d: hold %v, want %v", seed, r.plan.v.hold, v.hold)
		}
	}
}
