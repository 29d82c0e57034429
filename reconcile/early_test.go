package reconcile

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/flowspec"
)

// gatedSpeaker is a fakeSpeaker whose Announce and Withdraw, once called,
// wait until the test lets them go on: a speaker call still running.
type gatedSpeaker struct {
	*fakeSpeaker
	entered chan struct{}
	release chan struct{}
}

func (g *gatedSpeaker) Announce(ctx context.Context, rules []flowspec.Rule) []error {
	g.entered <- struct{}{}
	<-g.release
	return g.fakeSpeaker.Announce(ctx, rules)
}

func (g *gatedSpeaker) Withdraw(ctx context.Context, ms []flowspec.Match) []error {
	g.entered <- struct{}{}
	<-g.release
	return g.fakeSpeaker.Withdraw(ctx, ms)
}

// The early change reaches the speaker before the caller's commit starts:
// AnnounceEarly and WithdrawEarly return once the speaker has taken it,
// so the commit does not compete with the UPDATE for the CPU; a speaker
// call that takes longer than EarlyWait does not hold the commit up.
func TestEarlyReturnsOnceTheSpeakerTookIt(t *testing.T) {
	for _, op := range []string{"announce", "withdraw"} {
		t.Run(op, func(t *testing.T) {
			fc := clock.NewFake(time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC))
			sp := &gatedSpeaker{fakeSpeaker: newFakeSpeaker(), entered: make(chan struct{}), release: make(chan struct{})}
			r := New(testLogger(t), newFakeStore(), sp, Config{Clock: fc})
			rule := testRule(t, 1, discard())
			if op == "withdraw" {
				sp.fakeSpeaker.Announce(context.Background(), []flowspec.Rule{rule})
			}
			// took is what the call reported: the speaker took the change.
			var took atomic.Bool
			early := func() {
				if op == "announce" {
					took.Store(r.AnnounceEarly(rule))
				} else {
					took.Store(r.WithdrawEarly(rule.Match))
				}
			}
			taken := func() bool {
				_, in := sp.snapshot()[rule.Match]
				return in == (op == "announce")
			}
			limit := time.NewTimer(30 * time.Second)
			defer limit.Stop()
			wait := func(ch <-chan struct{}, what string) {
				t.Helper()
				select {
				case <-ch:
				case <-limit.C:
					t.Fatalf("%s: not within 30 s", what)
				}
			}

			// The speaker takes it: the call returns after it, not before.
			done := make(chan struct{})
			go func() { early(); close(done) }()
			wait(sp.entered, "speaker called")
			eventually(t, 30*time.Second, "a wait for the speaker call armed", func() bool {
				at, ok := fc.Next()
				return ok && at.Equal(fc.Now().Add(EarlyWait))
			})
			select {
			case <-done:
				t.Fatalf("%s returned while its speaker call was still running", op)
			default:
			}
			sp.release <- struct{}{}
			wait(done, op+" returned after the speaker call")
			if !taken() {
				t.Fatalf("%s returned before the speaker had taken the change", op)
			}
			if !took.Load() {
				t.Fatalf("%s reported the speaker did not take the change it took", op)
			}

			// A speaker call that hangs holds the caller for EarlyWait only.
			r.Settle(rule.Match, false)
			done = make(chan struct{})
			go func() { early(); close(done) }()
			wait(sp.entered, "speaker called again")
			eventually(t, 30*time.Second, "a wait for the second speaker call armed", func() bool {
				at, ok := fc.Next()
				return ok && at.Equal(fc.Now().Add(EarlyWait))
			})
			fc.Advance(EarlyWait)
			wait(done, op+" returned after EarlyWait")
			if took.Load() {
				// Its commit must not record what the speaker may yet refuse.
				t.Fatalf("%s returned after EarlyWait reported the speaker took the change", op)
			}
			sp.release <- struct{}{}    // the call goes on in the background
			r.Settle(rule.Match, false) // waits for it to have returned
			if !taken() {
				t.Fatalf("the speaker call of the second %s did not complete", op)
			}
		})
	}
}

// An early announcement the speaker refuses reports so: its commit must
// not record the status "announced".
func TestEarlyAnnouncementRefusedIsNotTaken(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC))
	sp := newFakeSpeaker()
	sp.announceErr = func(flowspec.Rule) error { return errors.New("refused (injected)") }
	r := New(testLogger(t), newFakeStore(), sp, Config{Clock: fc})
	rule := testRule(t, 1, discard())
	if r.AnnounceEarly(rule) {
		t.Fatal("AnnounceEarly reported a refused announcement as taken")
	}
	r.Settle(rule.Match, false)
}

// passCount counts the passes that ended.
type passCount struct {
	countRecorder
	n atomic.Int64
}

func (c *passCount) PassDone(PassResult) { c.n.Add(1) }

// countedLoop runs a reconciler on fakes and a fake clock, its passes
// counted, and returns once its first pass is done.
func countedLoop(t *testing.T) (*clock.Fake, *fakeStore, *fakeSpeaker, *passCount, *Reconciler) {
	t.Helper()
	fc := clock.NewFake(time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC))
	st, sp := newFakeStore(), newFakeSpeaker()
	passes := &passCount{}
	r := New(testLogger(t), st, sp, Config{Clock: fc, Recorder: passes})
	startLoop(t, r)
	eventually(t, 30*time.Second, "the first pass", func() bool { return passes.n.Load() == 1 })
	return fc, st, sp, passes, r
}

// A store or mirror change that lands while a single write made early
// has not settled (most likely that write's own: its commit, its path in
// the mirror) runs no pass then: a write that settles applied (its
// commit recorded what the speaker took) leaves them to the pass that
// comes EarlySettleWait later, one for a burst of writes; a write that
// failed settles with a pass at once. A pass for each change ran right
// when the next write's UPDATE left, on the same two cores.
func TestWakesWaitForEarlySettle(t *testing.T) {
	fc, st, _, passes, r := countedLoop(t)

	for i, applied := range []bool{false, true} {
		rule := testRule(t, i+1, discard())
		n := passes.n.Load()
		start := fc.Now()
		r.AnnounceEarly(rule) // the mirror changes
		if applied {
			// The loop may take the commit's wake-up only after the
			// write settled: that one waits too.
			r.Settle(rule.Match, true)
		}
		id := st.add(rule, time.Time{}) // the write's commit
		eventually(t, 30*time.Second, "the loop waiting EarlySettleWait for the write to settle", func() bool {
			at, ok := fc.Next()
			return ok && at.Equal(start.Add(EarlySettleWait))
		})
		if got := passes.n.Load(); got != n {
			t.Fatalf("write %d: %d passes while it had not settled, want none", i, got-n)
		}
		r.Settle(rule.Match, applied)
		if applied {
			if got := passes.n.Load(); got != n {
				t.Fatalf("write %d settled applied: %d passes at once, want none", i, got-n)
			}
			if at, ok := fc.Next(); !ok || !at.Equal(start.Add(EarlySettleWait)) {
				t.Fatalf("write %d settled applied: next wake-up %v (%v), want EarlySettleWait after it started", i, at, ok)
			}
			fc.Advance(EarlySettleWait)
		}
		eventually(t, 30*time.Second, "a pass that adopts the committed rule", func() bool {
			return passes.n.Load() > n && st.get(id).Announced
		})
	}
}

// A path announced ahead of its commit, whose write settled applied (the
// commit recorded it announced), and removed behind the reconciler's
// back before any pass compared it, is drift: the pass that puts it back
// counts a re-add, as for a path a pass had adopted. The write's own
// deferred pass (EarlySettleWait) may come after the removal; the
// rule was on the routers all the same. Seen in the e2e drift test: a
// gRPC DeletePath 60 ms after the write, re-added as a plain "add".
func TestEarlyAnnouncedThenRemovedIsDrift(t *testing.T) {
	fc, st, sp, passes, r := countedLoop(t)

	rule := testRule(t, 1, discard())
	start := fc.Now()
	if !r.AnnounceEarly(rule) {
		t.Fatal("the speaker did not take the early announcement")
	}
	st.add(rule, time.Time{}) // the write's commit
	r.Settle(rule.Match, true)
	eventually(t, 30*time.Second, "the loop waiting EarlySettleWait for the write to settle", func() bool {
		at, ok := fc.Next()
		return ok && at.Equal(start.Add(EarlySettleWait))
	})
	if n := passes.n.Load(); n != 1 {
		t.Fatalf("%d passes before EarlySettleWait, want the first only", n)
	}
	sp.set(rule.Match, flowspec.Action{}, false) // gone behind our back
	fc.Advance(EarlySettleWait)
	eventually(t, 30*time.Second, "the rule back on the speaker", func() bool {
		a, in := sp.snapshot()[rule.Match]
		return in && a == rule.Action
	})
	eventually(t, 30*time.Second, "the re-add counted", func() bool { return r.Drift().Readded == 1 })
}
