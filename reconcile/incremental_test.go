package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// TestIncrementalMatchesFull drives a reconciler through random sequences
// of store changes, behind-the-back RIB changes, expiries and mirror
// rebuilds. Before each pass it computes the full plan (Preview: every row
// against every path); the pass, dirty-only whenever it can be, must do
// exactly that plan: the same RIB afterwards, the same counts, the same
// rules finished. Every few steps a full pass runs instead, so the two
// paths alternate on the same state; between changes the source now and
// then reads ahead, as a pass waiting on the speaker does.
func TestIncrementalMatchesFull(t *testing.T) {
	for seed := range 40 {
		rng := rand.New(rand.NewPCG(uint64(seed), 5))
		st, sp := newFakeStore(), newFakeSpeaker()
		now := time.Unix(1_700_000_000, 0)
		cfg := Config{SettleTimeout: time.Nanosecond, RetryBase: time.Nanosecond}
		if seed%4 == 3 {
			cfg.MaxWithdrawPerPass = 1
		}
		r := New(hclog.NewNullLogger(), st, sp, cfg)
		r.clock = funcClock(func() time.Time { return now })
		ctx := context.Background()
		const keys = 40 // Matches drawn from a small space, so they collide
		match := func() flowspec.Rule { return testRule(t, rng.IntN(keys), discard()) }
		action := func() flowspec.Action {
			if rng.IntN(3) == 0 {
				return discard()
			}
			return rateLimit(1000 * (1 + rng.IntN(4)))
		}
		expiry := func() time.Time {
			if rng.IntN(3) == 0 {
				return time.Time{}
			}
			return now.Add(time.Duration(rng.IntN(20_000)) * time.Millisecond)
		}
		active := func() []int64 {
			st.mu.Lock()
			defer st.mu.Unlock()
			var ids []int64
			for id, r := range st.rules {
				if r.State == store.Active {
					ids = append(ids, id)
				}
			}
			slices.Sort(ids)
			return ids
		}
		incremental, faults := 0, 0
		var snap *snapshot
		for step := range 150 {
			for range 1 + rng.IntN(3) {
				if rng.IntN(6) == 0 {
					// A pass waiting on the speaker reads ahead; more
					// changes come after the read (source.prefetch).
					r.src.prefetch(ctx, st)
				}
				ids := active()
				switch k := rng.IntN(12); {
				case k < 3 || len(ids) == 0:
					rule := match()
					rule.Action = action()
					if rng.IntN(15) == 0 {
						rule.Action = flowspec.Action{} // invalid: held
					}
					st.add(rule, expiry()) // may duplicate a Match: shadowed
				case k < 5:
					st.update(ids[rng.IntN(len(ids))], action(), expiry())
				case k == 5:
					st.withdraw(ids[rng.IntN(len(ids))])
				case k == 6:
					st.finish(ids[rng.IntN(len(ids))], store.Withdrawn)
				case k == 7:
					rule := match()
					sp.set(rule.Match, action(), true) // foreign or drifted
				case k == 8:
					sp.set(match().Match, flowspec.Action{}, false) // deleted behind our back
				case k == 9:
					sp.overflow()
				default:
					now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
				}
			}
			now = now.Add(time.Millisecond)
			full := step%7 == 6
			if step%7 == 3 {
				// A complete read made off the loop, swapped in by the
				// next full pass of odd seeds: stale by a few steps.
				// As Run does: status writes are kept from the start of
				// the read until the pass that swaps it in.
				// Seeds 1, 5, ...: as the periodic resync reads, sums
				// checked against the copy; 3, 7, ...: rows swapped in,
				// as a seed is.
				r.src.track(true)
				if seed%4 == 1 {
					snap = readSums(ctx, st, r.src.sumSeed(), func() time.Time { return now }, 0)
				} else {
					snap = readSnapshot(ctx, st, func() time.Time { return now }, 0)
				}
			}
			pass := func() {
				if full && seed%2 == 1 && snap != nil {
					r.runPass(ctx, false, snap)
					snap = nil
					r.src.track(false)
					return
				}
				r.runPass(ctx, full, nil)
			}

			// Now and then a fault: the pass does less than the plan,
			// and what it left undone must be done by the next passes.
			if rng.IntN(6) == 0 {
				faults++
				switch rng.IntN(3) {
				case 0:
					sp.announceErr = func(flowspec.Rule) error {
						if rng.IntN(2) == 0 {
							return errFlaky
						}
						return nil
					}
				case 1:
					st.setReadErr(errors.New("database is locked"))
				default:
					st.mu.Lock()
					st.writeErr = errors.New("disk full")
					st.mu.Unlock()
				}
				pass()
				sp.announceErr = nil
				st.setReadErr(nil)
				st.mu.Lock()
				st.writeErr = nil
				st.mu.Unlock()
				continue
			}

			want, err := r.Preview(ctx)
			if err != nil {
				t.Fatalf("seed %d step %d: preview: %v", seed, step, err)
			}
			rib := sp.snapshot()
			for _, it := range slices.Concat(want.Add, want.Update) {
				rib[it.Match] = it.Action
			}
			gone := want.Retire
			if !want.Capped {
				gone = slices.Concat(gone, want.Withdraw)
			}
			for _, it := range gone {
				delete(rib, it.Match)
			}
			pass()
			res := r.LastPass()
			if res.Incremental {
				incremental++
			}

			where := func() string {
				return fmt.Sprintf("seed %d step %d (incremental %v)", seed, step, res.Incremental)
			}
			if got := sp.snapshot(); !maps.Equal(got, rib) {
				t.Fatalf("%s: RIB after the pass differs from the full plan's:\n got  %v\n want %v\n plan %+v\n pass %+v", where(), got, rib, want, res)
			}
			withdrawn := len(want.Retire)
			if !want.Capped {
				withdrawn += len(want.Withdraw)
			}
			if res.Added != len(want.Add) || res.Updated != len(want.Update) || res.Withdrawn != withdrawn ||
				res.Finished != len(want.Finish) || res.Adopted != len(want.Adopt) || res.Orphans != len(want.Withdraw) ||
				res.Capped != want.Capped || res.Errors != 0 || res.Pending != 0 {
				t.Fatalf("%s: pass %+v, full plan %+v", where(), res, want)
			}
			for _, it := range want.Finish {
				if s := st.get(it.ID).State; s != it.State {
					t.Fatalf("%s: rule %d is %q, want %q", where(), it.ID, s, it.State)
				}
			}
			checkStatuses(t, where(), r, st, sp, now)
		}
		if incremental == 0 || faults == 0 {
			t.Fatalf("seed %d: %d passes incremental, %d faults", seed, incremental, faults)
		}
		// The store changed only through revisions and the reconciler's
		// own status writes: the resyncs' sums found no drift.
		if r.src.drifted != 0 {
			t.Fatalf("seed %d: %d resyncs found drift, want none", seed, r.src.drifted)
		}
	}
}

// checkStatuses checks that every active rule's status says what was
// observed: announced exactly when its path is in the RIB as wanted, unless
// a request for it is in flight (the next pass observes it); an error for
// invalid and shadowed rules.
func checkStatuses(t *testing.T, where string, r *Reconciler, st *fakeStore, sp *fakeSpeaker, now time.Time) {
	t.Helper()
	rows, err := st.ActiveRules(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v := newView(rows, now)
	rib := sp.snapshot()
	for _, row := range rows {
		m := row.Rule.Match
		w, ok := v.want[m]
		switch {
		case ok && w.ID == row.ID && w.Retire == "":
			if r.work.inFlight(m) {
				break
			}
			a, in := rib[m]
			if asked := in && a == w.Action; asked != row.Announced || (asked && row.LastError != "") {
				t.Fatalf("%s: rule %d in the RIB as wanted: %v, status %v %q", where, row.ID, asked, row.Announced, row.LastError)
			}
		case validate(row) != nil:
			if _, retiring := retiringState(row, now); !retiring && row.LastError == "" {
				t.Fatalf("%s: invalid rule %d has no error", where, row.ID)
			}
		}
	}
	for _, sh := range v.shadowed {
		for _, s := range sh {
			if row := st.get(s.id); row.LastError != s.err() {
				t.Fatalf("%s: shadowed rule %d has status %q, want %q", where, s.id, row.LastError, s.err())
			}
		}
	}
}

// TestIncrementalPassTouchesOnlyDirty checks that after one change a pass
// compares the changed Match only, and that a store read failure still
// repairs drift from the last rows read.
func TestIncrementalPassTouchesOnlyDirty(t *testing.T) {
	r, st, sp := newTest(t, Config{})
	ctx := context.Background()
	for i := range 50 {
		st.add(testRule(t, i, discard()), time.Time{})
	}
	r.runPass(ctx, false, nil)
	r.runPass(ctx, false, nil)
	if res := r.LastPass(); res.Adopted != 50 || res.Changed() {
		t.Fatalf("not converged: %+v", res)
	}
	sp.set(testRule(t, 7, discard()).Match, discard(), false)
	r.runPass(ctx, false, nil)
	if res := r.LastPass(); !res.Incremental || res.Added != 1 || res.Adopted != 49 {
		t.Fatalf("repair pass = %+v", res)
	}
	if r.plan.compared != 1 {
		t.Errorf("compared %d Matches, want the one that changed", r.plan.compared)
	}
	st.setReadErr(errors.New("database is locked"))
	sp.set(testRule(t, 9, discard()).Match, rateLimit(1), true)
	r.runPass(ctx, false, nil)
	if res := r.LastPass(); !res.Incremental || res.Updated != 1 || res.Err == "" {
		t.Fatalf("pass with the store down = %+v", res)
	}
	st.setReadErr(nil)
	r.runPass(ctx, false, nil)
	if res := r.LastPass(); !res.Full || res.Adopted != 50 {
		t.Fatalf("pass after the store came back = %+v, want a full read", res)
	}
}

// The status writes recorded between two complete reads are dropped, not
// kept for reuse, once a burst made them large: a bulk load must not
// leave them allocated.
func TestStatusWritesReleasedAfterBurst(t *testing.T) {
	var c source
	rows := make([]store.Rule, 2*bigScratch)
	for i := range rows {
		rows[i] = store.Rule{ID: int64(i + 1), State: store.Active}
	}
	c.load(rows)
	c.ok = true
	for i := range rows {
		c.wrote(rows[i].ID, ruleStatus{announced: true}, time.Now())
	}
	st := newFakeStore()
	snap := &snapshot{at: time.Now()}
	var rs Rows
	for i := range rows {
		rs.Add(&rows[i])
	}
	snap.index(rs.take())
	if _, _, err := c.read(context.Background(), st, time.Now(), true, snap, func(flowspec.Match) {}); err != nil {
		t.Fatal(err)
	}
	if n := cap(c.writes); n > bigScratch {
		t.Errorf("after the complete read the status writes keep room for %d entries, want at most %d", n, bigScratch)
	}
}
