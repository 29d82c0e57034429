package reconcile

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// hookSpeaker is a fakeSpeaker that runs a test's one-shot hook inside
// the next call the reconciler's loop makes to the speaker, before the
// call reaches the RIB or after it did and before the loop sees the
// result: an API goroutine's early change that lands in the middle of a
// pass. Calls made by the hook itself (the early change's own) pass
// straight through.
type hookSpeaker struct {
	*fakeSpeaker
	mu sync.Mutex
	// onAnnounce and onWithdraw are taken by the next Announce or
	// Withdraw call made outside a hook; after says whether the hook
	// runs after the call reached the RIB.
	onAnnounce, onWithdraw func()
	after                  bool
	inHook                 bool
}

func (h *hookSpeaker) take(hook *func()) (fn func(), after bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.inHook || *hook == nil {
		return nil, false
	}
	fn, *hook = *hook, nil
	h.inHook = true
	return fn, h.after
}

func (h *hookSpeaker) run(fn func()) {
	fn()
	h.mu.Lock()
	h.inHook = false
	h.mu.Unlock()
}

func (h *hookSpeaker) arm(hook *func(), fn func(), after bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	*hook, h.after = fn, after
}

func (h *hookSpeaker) armed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.onAnnounce != nil || h.onWithdraw != nil
}

func (h *hookSpeaker) Announce(ctx context.Context, rules []flowspec.Rule) []error {
	return h.around(&h.onAnnounce, func() []error { return h.fakeSpeaker.Announce(ctx, rules) })
}

func (h *hookSpeaker) Withdraw(ctx context.Context, ms []flowspec.Match) []error {
	return h.around(&h.onWithdraw, func() []error { return h.fakeSpeaker.Withdraw(ctx, ms) })
}

// around makes the speaker call, running the hook armed in *hook (if
// any) before or after it.
func (h *hookSpeaker) around(hook *func(), call func() []error) []error {
	fn, after := h.take(hook)
	if fn != nil && !after {
		h.run(fn)
	}
	errs := call()
	if fn != nil && after {
		h.run(fn)
	}
	return errs
}

// earlyRace names the moments at which an early change (made and then
// refused by the store) lands against the pass that carries an outside
// change of the same rule.
var earlyRace = []string{
	"before the pass",          // right after the outside change, from another goroutine
	"before the pass's call",   // inside the pass, before its speaker call
	"after the pass's call",    // inside the pass, its call in the RIB, its result not yet booked
	"after the pass's change",  // once the RIB shows the pass's change; the next pass may or may not have run
	"alongside, after a yield", // another goroutine, after a random number of yields
}

// A withdrawal that leaves ahead of its commit and that the store then
// refuses leaves the rule active: the path is announced again at once
// (early.go), whatever pass is running when the withdrawal leaves and
// when it settles. The case that broke: an outside change of the rule
// (another process's write, a new action) is announced by a pass; the
// early withdrawal takes the path off before the next pass saw the
// announcement in the mirror; the refusal settles it. The work queue still
// expected the announcement the early withdrawal undid, and held the
// re-announcement back until its settle timeout (on a clock that stands
// still: never).
//
// The reconciler's clock never moves: neither the grace, nor a settle
// timeout, nor a backoff, nor the resync may be what brings the path back.
// And the path's coming back is no drift repair.
func TestRefusedEarlyWithdrawalIsAnnouncedAgainAtOnce(t *testing.T) {
	const n = 200
	fc, st, sp, r, ids, rules := newRaceRig(t, n)
	rng := rand.New(rand.NewPCG(19, 1))

	for i := range n {
		m, at := rules[i].Match, earlyRace[i%len(earlyRace)]
		changed := rateLimit(1000 * (i + 1))
		// The gate's side: the path leaves, the store refuses the
		// withdrawal (the rule stays active as the outside change left
		// it), the write is settled.
		refused := func() {
			r.WithdrawEarly(m)
			r.Settle(m, false)
		}
		done := make(chan struct{})
		switch at {
		case "before the pass's call":
			sp.arm(&sp.onAnnounce, func() { refused(); close(done) }, false)
		case "after the pass's call":
			sp.arm(&sp.onAnnounce, func() { refused(); close(done) }, true)
		}
		st.update(ids[i], changed, time.Time{})
		switch at {
		case "before the pass":
			refused()
			close(done)
		case "after the pass's change":
			eventually(t, 30*time.Second, fmt.Sprintf("rule %d's change in the RIB", i), func() bool {
				return sp.snapshot()[m] == changed
			})
			refused()
			close(done)
		case "alongside, after a yield":
			yields := rng.IntN(200)
			go func() {
				for range yields {
					runtime.Gosched()
				}
				refused()
				close(done)
			}()
		}
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("rule %d (%s): the early withdrawal never ran", i, at)
		}
		eventually(t, 30*time.Second, fmt.Sprintf("rule %d (withdrawal refused %s) announced again with its new action", i, at), func() bool {
			a, in := sp.snapshot()[m]
			return in && a == changed
		})
		if sp.armed() {
			t.Fatalf("rule %d (%s): the hook never ran", i, at)
		}
	}
	if now := fc.Now(); !now.Equal(time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)) {
		t.Fatalf("the reconciler's clock moved to %v", now)
	}
	// The path went by the gate's hand, and came back by the
	// reconciler's: neither is drift.
	if d := r.Drift(); d != (DriftCounts{}) {
		t.Errorf("drift = %+v, want none", d)
	}
}

// The same the other way: an announcement ahead of its commit whose
// write fails never outlives it, even when it lands in the middle of the
// pass that withdraws the Match's retiring rule: the path is withdrawn at
// once after Settle, and the retiring rule finishes.
func TestFailedEarlyAnnouncementIsWithdrawnAtOnce(t *testing.T) {
	const n = 100
	fc, st, sp, r, ids, rules := newRaceRig(t, n)

	for i := range n {
		m := rules[i].Match
		// A new rule for the same Match, announced ahead of a commit
		// that fails.
		failed := func() {
			r.AnnounceEarly(flowspec.Rule{Match: m, Action: rateLimit(1000 * (i + 1))})
			r.Settle(m, false)
		}
		done := make(chan struct{})
		sp.arm(&sp.onWithdraw, func() { failed(); close(done) }, i%2 == 0)
		st.withdraw(ids[i])
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("rule %d: the early announcement never ran", i)
		}
		eventually(t, 30*time.Second, fmt.Sprintf("rule %d's path withdrawn and the rule finished", i), func() bool {
			_, in := sp.snapshot()[m]
			return !in && st.get(ids[i]).State == store.Withdrawn
		})
	}
	if now := fc.Now(); !now.Equal(time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)) {
		t.Fatalf("the reconciler's clock moved to %v", now)
	}
}

// newRaceRig runs a reconciler on a clock that never moves, over n rules
// it has announced.
func newRaceRig(t *testing.T, n int) (*clock.Fake, *fakeStore, *hookSpeaker, *Reconciler, []int64, []flowspec.Rule) {
	t.Helper()
	fc := clock.NewFake(time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC))
	st := newFakeStore()
	sp := &hookSpeaker{fakeSpeaker: newFakeSpeaker()}
	r := New(testLogger(t), st, sp, Config{Clock: fc})
	startLoop(t, r)
	ids := make([]int64, n)
	rules := make([]flowspec.Rule, n)
	for i := range n {
		rules[i] = testRule(t, i, discard())
		ids[i] = st.add(rules[i], time.Time{})
	}
	eventually(t, 30*time.Second, "every rule announced", converged(st, sp.fakeSpeaker))
	return fc, st, sp, r, ids, rules
}
