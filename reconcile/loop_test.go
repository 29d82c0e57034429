package reconcile

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

func newTest(t *testing.T, cfg Config) (*Reconciler, *fakeStore, *fakeSpeaker) {
	t.Helper()
	st, sp := newFakeStore(), newFakeSpeaker()
	return New(testLogger(t), st, sp, cfg), st, sp
}

func pass(t *testing.T, r *Reconciler) PassResult {
	t.Helper()
	r.runPass(context.Background(), false, nil)
	return r.LastPass()
}

func TestRunConverges(t *testing.T) {
	r, st, sp := newTest(t, Config{})
	for i := range 50 {
		a := discard()
		if i%3 == 0 {
			a = rateLimit(1000 * (i + 1))
		}
		exp := time.Time{}
		if i%2 == 0 {
			exp = time.Now().Add(time.Hour)
		}
		st.add(testRule(t, i, a), exp)
	}
	// Already there as wanted, there with a drifted action, and foreign.
	sp.set(testRule(t, 1, discard()).Match, discard(), true)
	sp.set(testRule(t, 2, discard()).Match, rateLimit(7), true)
	sp.set(testRule(t, 999, discard()).Match, discard(), true)

	startLoop(t, r)
	eventually(t, 5*time.Second, "RIB == desired", converged(st, sp))
	eventually(t, 5*time.Second, "all rules reported announced", func() bool {
		for id := int64(1); id <= 50; id++ {
			if s := st.get(id); !s.Announced || s.LastError != "" {
				return false
			}
		}
		return true
	})

	// More desired state while running, from several goroutines.
	var wg sync.WaitGroup
	for i := 50; i < 60; i++ {
		wg.Go(func() {
			st.add(testRule(t, i, discard()), time.Time{})
			r.Trigger()
		})
	}
	wg.Wait()
	eventually(t, 5*time.Second, "RIB == desired after more rules", converged(st, sp))
	if d := r.Drift(); d.OrphansWithdrawn != 1 {
		t.Errorf("drift = %+v, want one orphan withdrawn", d)
	}
}

func TestSecondPassChangesNothing(t *testing.T) {
	r, st, sp := newTest(t, Config{})
	for i := range 20 {
		st.add(testRule(t, i, rateLimit(100*(i+1))), time.Now().Add(time.Hour))
	}
	sp.set(testRule(t, 3, discard()).Match, discard(), true)
	sp.set(testRule(t, 500, discard()).Match, discard(), true)

	first := pass(t, r)
	if first.Added != 19 || first.Updated != 1 || first.Withdrawn != 1 || first.Errors != 0 {
		t.Fatalf("first pass = %+v", first)
	}
	if !maps.Equal(sp.snapshot(), st.desired(time.Now())) {
		t.Fatal("RIB != desired after one pass")
	}
	calls, writes := sp.callCount(), st.writeCount()
	second := pass(t, r)
	if second.Changed() || second.Adopted != 20 || second.Pending != 0 || second.Errors != 0 || second.Err != "" {
		t.Errorf("second pass = %+v, want 20 adopted and nothing else", second)
	}
	// The second pass observes the paths the first one announced: one
	// status batch (announced), no speaker call. A third writes nothing.
	if sp.callCount() != calls || st.writeCount() != writes+1 {
		t.Errorf("second pass made %d speaker calls and %d store writes, want 0 and 1",
			sp.callCount()-calls, st.writeCount()-writes)
	}
	pass(t, r)
	if sp.callCount() != calls || st.writeCount() != writes+1 {
		t.Errorf("third pass made %d speaker calls and %d store writes, want none",
			sp.callCount()-calls, st.writeCount()-writes-1)
	}
}

func TestStatusWrittenOnlyOnChange(t *testing.T) {
	r, st, sp := newTest(t, Config{RetryBase: time.Millisecond})
	for i := range 100 {
		st.add(testRule(t, i, discard()), time.Time{})
	}
	pass(t, r)
	if w := st.writeCount(); w != 0 {
		t.Errorf("first pass wrote status %d times, want none (nothing observed yet)", w)
	}
	pass(t, r)
	if w := st.writeCount(); w != 1 {
		t.Errorf("the pass that observed the paths wrote status %d times, want one batch", w)
	}
	// WorkCount counts the statuses written besides the path changes.
	if c, w := r.ChangeCount(), r.WorkCount(); c != 100 || w != c+100 {
		t.Errorf("ChangeCount %d, WorkCount %d; want 100 paths and 100 statuses more", c, w)
	}
	for range 3 {
		pass(t, r)
	}
	if w := st.writeCount(); w != 1 {
		t.Errorf("idle passes wrote status: %d writes, want 1", w)
	}
	if c, w := r.ChangeCount(), r.WorkCount(); c != 100 || w != 200 {
		t.Errorf("idle passes: ChangeCount %d, WorkCount %d; want 100 and 200 still", c, w)
	}
	// A failure changes one rule's status: one more write, then none.
	bad := testRule(t, 7, rateLimit(9))
	sp.announceErr = func(r flowspec.Rule) error {
		if r.Match == bad.Match {
			return errFlaky
		}
		return nil
	}
	st.update(8, bad.Action, time.Time{})
	pass(t, r)
	if w := st.writeCount(); w != 2 {
		t.Errorf("after a failure: %d writes, want 2", w)
	}
	if got := r.WorkCount() - r.ChangeCount(); got != 101 {
		t.Errorf("statuses counted by WorkCount: %d, want 101", got)
	}
	if s := st.get(8); s.Announced || s.LastError != errFlaky.Error() {
		t.Errorf("status of failing rule = %v %q", s.Announced, s.LastError)
	}
}

func TestStoreReadFailureWithdrawsNothing(t *testing.T) {
	r, st, sp := newTest(t, Config{})
	now := time.Now()
	r.clock = funcClock(func() time.Time { return now })
	forever := st.add(testRule(t, 1, discard()), time.Time{})
	soon := st.add(testRule(t, 2, discard()), now.Add(time.Minute))
	pass(t, r)
	if len(sp.snapshot()) != 2 {
		t.Fatalf("RIB = %v, want both rules", sp.snapshot())
	}

	// The store goes away (and would look empty); a foreign path appears;
	// time passes the second rule's expiry.
	st.setReadErr(errors.New("database is locked"))
	orphan := testRule(t, 3, discard())
	sp.set(orphan.Match, orphan.Action, true)
	now = now.Add(2 * time.Minute)
	writes := st.writeCount()
	res := pass(t, r)
	rib := sp.snapshot()
	if _, ok := rib[st.get(forever).Rule.Match]; !ok {
		t.Error("desired path withdrawn while the store was unreadable")
	}
	if _, ok := rib[orphan.Match]; !ok {
		t.Error("orphan withdrawn while desired state was unknown")
	}
	if _, ok := rib[st.get(soon).Rule.Match]; ok {
		t.Error("rule expired by cached ExpiresAt still announced")
	}
	if res.Err == "" || res.Errors == 0 || st.writeCount() != writes {
		t.Errorf("pass = %+v, store writes %d; want an error reported and no writes", res, st.writeCount()-writes)
	}
	if st.get(soon).State != store.Active {
		t.Error("rule finished while the store was unreadable")
	}

	// Back: the orphan goes and the expired rule becomes final.
	st.setReadErr(nil)
	pass(t, r)
	pass(t, r)
	if _, ok := sp.snapshot()[orphan.Match]; ok {
		t.Error("orphan not withdrawn once the store was back")
	}
	if s := st.get(soon).State; s != store.Expired {
		t.Errorf("expired rule state = %q, want expired", s)
	}
}

func TestStoreNeverReadDoesNothing(t *testing.T) {
	r, st, sp := newTest(t, Config{})
	st.setReadErr(errors.New("no database"))
	sp.set(testRule(t, 1, discard()).Match, discard(), true)
	res := pass(t, r)
	if sp.callCount() != 0 || len(sp.snapshot()) != 1 || res.Err == "" {
		t.Errorf("pass with unknown desired state = %+v, speaker calls %d", res, sp.callCount())
	}
}

func TestMirrorNotReadyAnnouncesNothing(t *testing.T) {
	r, st, sp := newTest(t, Config{})
	sp.setReady(false)
	st.add(testRule(t, 1, discard()), time.Time{})
	res := pass(t, r)
	if sp.callCount() != 0 || res.Err == "" || st.writeCount() != 0 {
		t.Fatalf("pass with mirror not ready = %+v, speaker calls %d, store writes %d", res, sp.callCount(), st.writeCount())
	}
	startLoop(t, r)
	sp.setReady(true)
	eventually(t, 5*time.Second, "RIB == desired once the mirror is ready", converged(st, sp))
}

func TestTransientErrorBacksOffWithoutBlockingOthers(t *testing.T) {
	var told atomic.Int32
	r, st, sp := newTest(t, Config{RetryBase: 20 * time.Millisecond, RuleFailed: func(_ int64, _ string, withdraw bool, err error, terminal bool) {
		if withdraw || terminal || err != errFlaky {
			t.Errorf("RuleFailed(withdraw %v, %v, terminal %v)", withdraw, err, terminal)
		}
		told.Add(1)
	}})
	flaky := testRule(t, 0, discard())
	var tries atomic.Int32
	var firstTry, lastTry atomic.Int64
	sp.announceErr = func(r flowspec.Rule) error {
		if r.Match != flaky.Match {
			return nil
		}
		n := tries.Add(1)
		if n == 1 {
			firstTry.Store(time.Now().UnixNano())
		}
		lastTry.Store(time.Now().UnixNano())
		if n <= 4 {
			return errFlaky
		}
		return nil
	}
	id := st.add(flaky, time.Time{})
	for i := 1; i < 20; i++ {
		st.add(testRule(t, i, discard()), time.Time{})
	}
	startLoop(t, r)
	eventually(t, 5*time.Second, "other rules announced while one fails", func() bool {
		rib := sp.snapshot()
		return len(rib) >= 19
	})
	if st.get(id).LastError == "" && tries.Load() <= 1 {
		t.Log("flaky rule had not failed yet") // not an error: timing
	}
	eventually(t, 5*time.Second, "RIB == desired after retries", converged(st, sp))
	eventually(t, 5*time.Second, "flaky rule status clean", func() bool {
		s := st.get(id)
		return s.Announced && s.LastError == ""
	})
	if n := tries.Load(); n != 5 {
		t.Errorf("flaky rule tried %d times, want 5 (4 failures then success)", n)
	}
	if n := told.Load(); n != 1 {
		t.Errorf("RuleFailed called %d times for four failures of one request, want 1 (the first)", n)
	}
	// Backoff 20+40+80+160 ms between the five tries: well over 200 ms.
	if d := time.Duration(lastTry.Load() - firstTry.Load()); d < 250*time.Millisecond {
		t.Errorf("five tries took %v; backoff not applied", d)
	}
}

func TestTerminalErrorRecordedNotRetried(t *testing.T) {
	var told atomic.Int32
	r, st, sp := newTest(t, Config{RetryBase: time.Millisecond, RuleFailed: func(_ int64, _ string, _ bool, _ error, terminal bool) {
		if !terminal {
			t.Error("RuleFailed: a terminal failure reported as transient")
		}
		told.Add(1)
	}})
	bad := testRule(t, 0, discard())
	var tries atomic.Int32
	sp.announceErr = func(r flowspec.Rule) error {
		if r.Match == bad.Match {
			tries.Add(1)
			return &terminalErr{"NLRI too long"}
		}
		return nil
	}
	id := st.add(bad, time.Time{})
	for i := 1; i < 5; i++ {
		st.add(testRule(t, i, discard()), time.Time{})
	}
	startLoop(t, r)
	eventually(t, 5*time.Second, "terminal error recorded", func() bool {
		s := st.get(id)
		return s.LastError == "NLRI too long" && !s.Announced
	})
	eventually(t, 5*time.Second, "other rules announced", func() bool { return len(sp.snapshot()) == 4 })
	// More passes, each waited for (the loop is triggered and the test
	// sees a pass that started after the trigger).
	for range 5 {
		before := r.LastPass().Started
		r.Trigger()
		eventually(t, 30*time.Second, "a pass after the trigger", func() bool { return r.LastPass().Started.After(before) })
	}
	if n := tries.Load(); n != 1 {
		t.Errorf("terminal rule tried %d times, want 1", n)
	}
	if n := told.Load(); n != 1 {
		t.Errorf("RuleFailed called %d times, want 1", n)
	}
	// A changed rule is a new request: tried again.
	st.update(id, rateLimit(5), time.Time{})
	eventually(t, 5*time.Second, "changed rule retried", func() bool { return tries.Load() == 2 })
}

func TestInvalidRuleRecordedAndHeld(t *testing.T) {
	r, st, sp := newTest(t, Config{})
	bad := testRule(t, 1, discard())
	sp.set(bad.Match, discard(), true) // announced by an earlier, valid version
	bad.Action = flowspec.Action{}
	id := st.add(bad, time.Time{})
	pass(t, r)
	if s := st.get(id); s.Announced || s.LastError == "" {
		t.Errorf("invalid rule status = %v %q, want an error", s.Announced, s.LastError)
	}
	if sp.callCount() != 0 {
		t.Errorf("speaker called %d times for an invalid rule", sp.callCount())
	}
}

func TestExpiryUsesTimer(t *testing.T) {
	start := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	fc := clock.NewFake(start)
	st, sp := newFakeStore(), newFakeSpeaker()
	r := New(testLogger(t), st, sp, Config{ResyncInterval: time.Hour, Clock: fc})
	keep := st.add(testRule(t, 1, discard()), time.Time{})
	expires := start.Add(time.Second)
	m := testRule(t, 2, discard()).Match
	id := st.add(testRule(t, 2, discard()), expires)
	startLoop(t, r)
	eventually(t, 30*time.Second, "rule announced", func() bool { _, ok := sp.snapshot()[m]; return ok })
	// The loop arms its expiry timer for the rule's ExpiresAt: nothing
	// else would wake it (no store or RIB change, resync in an hour).
	eventually(t, 30*time.Second, "expiry timer armed", func() bool {
		at, ok := fc.Next()
		return ok && at.Equal(expires)
	})
	fc.Set(expires.Add(-time.Nanosecond))
	if _, ok := sp.snapshot()[m]; !ok {
		t.Fatal("path withdrawn before expiry")
	}
	fc.Set(expires)
	eventually(t, 30*time.Second, "path withdrawn at expiry", func() bool { _, ok := sp.snapshot()[m]; return !ok })
	eventually(t, 30*time.Second, "rule finished as expired", func() bool { return st.get(id).State == store.Expired })
	if now := fc.Now(); !now.Equal(expires) {
		t.Fatalf("clock moved to %v; the withdrawal must come from the timer at %v", now, expires)
	}
	if _, ok := sp.snapshot()[st.get(keep).Rule.Match]; !ok {
		t.Error("rule without expiry withdrawn")
	}
}

func TestExpiredWhileDownNeverAnnounced(t *testing.T) {
	r, st, sp := newTest(t, Config{})
	id := st.add(testRule(t, 1, discard()), time.Now().Add(-time.Second))
	pass(t, r)
	if sp.callCount() != 0 {
		t.Errorf("speaker called %d times for a rule that expired while down", sp.callCount())
	}
	if s := st.get(id).State; s != store.Expired {
		t.Errorf("state = %q, want expired", s)
	}
}

func TestWithdrawFinishesOnlyAfterPathGone(t *testing.T) {
	r, st, sp := newTest(t, Config{SettleTimeout: time.Hour})
	id := st.add(testRule(t, 1, discard()), time.Time{})
	pass(t, r)
	sp.holdWithdraw = true
	st.withdraw(id)
	res := pass(t, r)
	if res.Withdrawn != 1 || st.get(id).State != store.Active {
		t.Fatalf("pass = %+v, state %q; want withdrawn requested and rule still active", res, st.get(id).State)
	}
	calls := sp.callCount()
	res = pass(t, r) // the mirror still shows the path
	if st.get(id).State != store.Active || res.Pending != 1 || sp.callCount() != calls {
		t.Fatalf("pass = %+v, state %q, calls +%d; want the rule pending and not withdrawn twice",
			res, st.get(id).State, sp.callCount()-calls)
	}
	sp.release()
	pass(t, r)
	if s := st.get(id).State; s != store.Withdrawn {
		t.Errorf("state after the path went = %q, want withdrawn", s)
	}
}

func TestOrphanCap(t *testing.T) {
	r, st, sp := newTest(t, Config{MaxWithdrawPerPass: 3})
	for i := range 5 {
		sp.set(testRule(t, 100+i, discard()).Match, discard(), true)
	}
	keep := testRule(t, 1, discard())
	st.add(keep, time.Time{})
	res := pass(t, r)
	if !res.Capped || res.Withdrawn != 0 || res.Orphans != 5 || len(sp.snapshot()) != 6 || res.Err == "" {
		t.Fatalf("capped pass = %+v, RIB size %d; want nothing withdrawn", res, len(sp.snapshot()))
	}
	if res.Added != 1 {
		t.Errorf("cap stopped the add: %+v", res)
	}

	// Retiring rules are explicit withdrawals: never capped.
	var ids []int64
	for i := range 5 {
		ids = append(ids, st.add(testRule(t, 10+i, discard()), time.Time{}))
	}
	pass(t, r)
	for _, id := range ids {
		st.withdraw(id)
	}
	res = pass(t, r)
	if res.Withdrawn != 5 {
		t.Errorf("retiring withdrawals capped: %+v", res)
	}

	r2 := New(testLogger(t), st, sp, Config{MaxWithdrawPerPass: 5})
	res = pass(t, r2)
	if res.Capped || res.Withdrawn != 5 || r2.Drift().OrphansWithdrawn != 5 {
		t.Errorf("pass under the cap = %+v, drift %+v", res, r2.Drift())
	}
	pass(t, r2)
	if !maps.Equal(sp.snapshot(), st.desired(time.Now())) {
		t.Errorf("RIB != desired")
	}
}

func TestDryRunTouchesNothing(t *testing.T) {
	r, st, sp := newTest(t, Config{DryRun: true})
	for i := range 3 {
		st.add(testRule(t, i, discard()), time.Time{})
	}
	expired := st.add(testRule(t, 10, discard()), time.Now().Add(-time.Minute))
	sp.set(testRule(t, 20, discard()).Match, discard(), true)
	sp.set(testRule(t, 10, discard()).Match, discard(), true)
	before := sp.snapshot()
	res := pass(t, r)
	if !res.DryRun || res.Added != 3 || res.Withdrawn != 2 {
		t.Errorf("dry-run pass = %+v, want 3 adds and 2 withdrawals reported", res)
	}
	if sp.callCount() != 0 || !maps.Equal(sp.snapshot(), before) || st.writeCount() != 0 {
		t.Errorf("dry run touched something: speaker calls %d, store writes %d", sp.callCount(), st.writeCount())
	}
	if st.get(expired).State != store.Active {
		t.Error("dry run finished a rule")
	}
}

func TestDriftCounters(t *testing.T) {
	r, st, sp := newTest(t, Config{})
	a := testRule(t, 1, discard())
	b := testRule(t, 2, discard())
	st.add(a, time.Time{})
	idB := st.add(b, time.Time{})
	startLoop(t, r)
	eventually(t, 5*time.Second, "converged", converged(st, sp))
	// The first announcements are not drift; the next pass adopts them.
	eventually(t, 5*time.Second, "adopted", func() bool { return r.LastPass().Adopted == 2 })

	sp.set(a.Match, a.Action, false) // someone deleted our path
	eventually(t, 5*time.Second, "re-added", func() bool { return r.Drift().Readded == 1 && converged(st, sp)() })
	eventually(t, 5*time.Second, "adopted", func() bool { return r.LastPass().Adopted == 2 })

	sp.set(b.Match, rateLimit(3), true) // someone changed its action
	eventually(t, 5*time.Second, "replaced", func() bool { return r.Drift().Replaced == 1 && converged(st, sp)() })
	eventually(t, 5*time.Second, "adopted", func() bool { return r.LastPass().Adopted == 2 })

	// An operator's change is not drift.
	st.update(idB, rateLimit(42), time.Time{})
	eventually(t, 5*time.Second, "updated", converged(st, sp))
	if d := r.Drift(); d != (DriftCounts{Readded: 1, Replaced: 1}) {
		t.Errorf("drift = %+v", d)
	}
}

// An operator's update announced ahead of its commit is not put back to
// the old action by a pass that still reads the old row, and is counted
// once, as an update, not as drift.
func TestEarlyUpdateIsNotDrift(t *testing.T) {
	rec := &countRecorder{}
	r, st, sp := newTest(t, Config{Recorder: rec})
	a := testRule(t, 1, discard())
	id := st.add(a, time.Time{})
	pass(t, r)
	pass(t, r) // adopts: the path was seen as asked
	if res := r.LastPass(); res.Adopted != 1 {
		t.Fatalf("not adopted: %+v", res)
	}
	upd := a
	upd.Action = rateLimit(42)
	r.AnnounceEarly(upd)
	eventually(t, 5*time.Second, "early update in the RIB", func() bool { return sp.snapshot()[a.Match] == upd.Action })
	// A pass that still reads the old row (the commit has not landed).
	if res := pass(t, r); res.Updated != 0 || sp.snapshot()[a.Match] != upd.Action {
		t.Fatalf("the pass put the old action back: %+v, RIB %v", res, sp.snapshot()[a.Match])
	}
	st.update(id, upd.Action, time.Time{})
	r.Settle(a.Match, false)
	if res := pass(t, r); res.Updated != 0 || res.Adopted != 1 {
		t.Fatalf("after the commit: %+v", res)
	}
	if d := r.Drift(); d != (DriftCounts{}) {
		t.Errorf("drift = %+v, want none", d)
	}
	if got := rec.ops(); got != "add update" {
		t.Errorf("recorded %q, want the add and one update", got)
	}
}

// countRecorder records the ops of the changes it is told about.
type countRecorder struct {
	mu  sync.Mutex
	log []string
}

func (c *countRecorder) PassDone(PassResult) {}
func (c *countRecorder) Announced(_ flowspec.Family, op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, op)
}
func (c *countRecorder) Withdrawn(_ flowspec.Family, op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, "withdraw:"+op)
}
func (c *countRecorder) ExpiryLateness(time.Duration) {}
func (c *countRecorder) ops() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.log, " ")
}

func TestPreview(t *testing.T) {
	r, st, sp := newTest(t, Config{})
	a := testRule(t, 1, discard())
	st.add(a, time.Time{})
	st.add(testRule(t, 2, discard()), time.Time{})
	sp.set(a.Match, a.Action, true)
	sp.set(testRule(t, 3, discard()).Match, discard(), true)
	p, err := r.Preview(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Add) != 1 || p.Add[0].ID != 2 || len(p.Adopt) != 1 || len(p.Withdraw) != 1 || p.Empty() {
		t.Errorf("preview = %+v", p)
	}
	if sp.callCount() != 0 || st.writeCount() != 0 {
		t.Error("preview changed something")
	}
	sp.setReady(false)
	if _, err := r.Preview(context.Background()); !errors.Is(err, ErrMirrorNotReady) {
		t.Errorf("preview with mirror not ready: err = %v", err)
	}
	st.setReadErr(errors.New("down"))
	if _, err := r.Preview(context.Background()); err == nil {
		t.Error("preview with store down: no error")
	}
}

func TestRunTwiceRefused(t *testing.T) {
	r, _, _ := newTest(t, Config{})
	startLoop(t, r)
	eventually(t, 5*time.Second, "first pass", func() bool { return !r.LastPass().Started.IsZero() })
	if err := r.Run(context.Background()); err == nil {
		t.Error("second Run did not fail")
	}
}

func TestSignalMergesBursts(t *testing.T) {
	s := newSignal()
	for range 100 {
		s.notify()
	}
	<-s.c
	select {
	case <-s.c:
		t.Error("a burst of notifications gave more than one wake-up")
	default:
	}
}

func TestStoreWriteFailureRetried(t *testing.T) {
	r, st, _ := newTest(t, Config{RetryBase: 10 * time.Millisecond})
	id := st.add(testRule(t, 1, discard()), time.Time{})
	st.mu.Lock()
	st.writeErr = errors.New("disk full")
	st.mu.Unlock()
	startLoop(t, r)
	eventually(t, 5*time.Second, "status write failing", func() bool { return r.LastPass().Errors > 0 })
	if st.get(id).Announced {
		t.Fatal("status written despite the error")
	}
	st.mu.Lock()
	st.writeErr = nil
	st.mu.Unlock()
	// No store change is signalled: the store backoff timer must retry.
	eventually(t, 5*time.Second, "status written after the store recovered", func() bool { return st.get(id).Announced })
}

func TestOrphanCapZeroIsUnlimited(t *testing.T) {
	r, _, sp := newTest(t, Config{})
	for i := range 50 {
		sp.set(testRule(t, i, discard()).Match, discard(), true)
	}
	if res := pass(t, r); res.Capped || res.Withdrawn != 50 || len(sp.snapshot()) != 0 {
		t.Errorf("pass without a cap = %+v, RIB size %d", res, len(sp.snapshot()))
	}
}

func TestStormPacedExpiryNot(t *testing.T) {
	const n, rate = 2000, 1000 // a batch is 1000 (1 s at 1k/s)
	r, st, sp := newTest(t, Config{AnnounceRate: rate})
	now := time.Now()
	r.clock = funcClock(func() time.Time { return now })
	pass(t, r) // the first load (nothing desired yet) is done
	ids := make([]int64, 0, n)
	for i := range n {
		ids = append(ids, st.add(testRule(t, i, discard()), time.Now().Add(time.Hour)))
	}
	// Into an empty RIB with many rules desired: paced.
	res := pass(t, r)
	if res.Added != rate || res.Pending != n-rate {
		t.Fatalf("first paced pass = %+v, want %d added", res, rate)
	}
	// Withdrawals are not paced, even while the storm lasts.
	st.withdraw(ids[0])
	sp.release()
	res = pass(t, r)
	if res.Withdrawn+res.Finished != 1 {
		t.Fatalf("withdrawal during the storm = %+v", res)
	}
	for i := 0; len(sp.snapshot()) < n-1; i++ {
		if i > 1000 {
			t.Fatalf("storm never ended: %d of %d after 50 s of clock", len(sp.snapshot()), n-1)
		}
		now = now.Add(50 * time.Millisecond) // the bucket refills by the clock
		sp.release()
		pass(t, r)
	}
	// Ordinary additions into a populated RIB are not paced.
	for i := range n {
		st.add(testRule(t, n+i, discard()), time.Time{})
	}
	if res := pass(t, r); res.Added != n || res.Pending != 0 {
		t.Fatalf("bulk into a populated RIB = %+v", res)
	}
}

// peeredSpeaker is a fakeSpeaker that reports established sessions.
type peeredSpeaker struct {
	*fakeSpeaker
	up atomic.Int32
}

func (s *peeredSpeaker) EstablishedPeers() int { return int(s.up.Load()) }

// TestStormUnpacedWithoutPeers: while no session is established a storm
// is announced in one pass; with a session up, the same storm (after a
// speaker restart) is paced.
func TestStormUnpacedWithoutPeers(t *testing.T) {
	const rate, n = 1000, 5000
	st, fs := newFakeStore(), newFakeSpeaker()
	sp := &peeredSpeaker{fakeSpeaker: fs}
	r := New(testLogger(t), st, sp, Config{AnnounceRate: rate})
	// The bucket refills by the reconciler's clock, which moves only when
	// the test says: how long a pass takes on a loaded machine is no
	// part of what is checked.
	now := time.Now()
	r.clock = funcClock(func() time.Time { return now })
	for i := range n {
		st.add(testRule(t, i, discard()), now.Add(time.Hour))
	}
	if res := pass(t, r); res.Added != n || res.Pending != 0 {
		t.Fatalf("pass into an empty RIB without peers = %+v, want all %d added", res, n)
	}
	if res := pass(t, r); res.Changed() || res.Pending != 0 {
		t.Fatalf("converged pass = %+v", res)
	}
	// Empty the RIB behind our back with a session up: paced.
	sp.up.Store(1)
	fs.mu.Lock()
	for m := range fs.rib {
		delete(fs.rib, m)
		fs.mark(m)
	}
	fs.mu.Unlock()
	res := pass(t, r)
	if res.Added != rate || res.Pending != n-rate {
		t.Fatalf("pass into an emptied RIB with a peer = %+v, want a paced batch of %d", res, rate)
	}
	res = pass(t, r)
	if res.Added != 0 || res.Pending != n-rate {
		t.Fatalf("pass right after a paced batch, no time passed = %+v, want nothing added", res)
	}
	if wait := r.work.pace.next.Sub(now); wait != time.Second {
		t.Fatalf("next paced batch in %v, want 1s (a batch's worth at %d/s)", wait, rate)
	}
	now = now.Add(250 * time.Millisecond)
	if res := pass(t, r); res.Added != rate/4 || res.Added+res.Pending != n-rate {
		t.Fatalf("pass 250ms after a paced batch = %+v, want the %d the bucket refilled", res, rate/4)
	}
	// The session goes away: the queue is dropped and the next pass, due
	// at once, announces the rest.
	sp.up.Store(0)
	pass(t, r)
	if next := r.work.pace.next; !next.Equal(now) {
		t.Fatalf("next pass due at %v after the queue was dropped, want at once (%v)", next, now)
	}
	if res := pass(t, r); res.Pending != 0 || len(fs.snapshot()) != n {
		t.Fatalf("pass after the session went down = %+v, RIB %d of %d", res, len(fs.snapshot()), n)
	}
}

// Loaded (when the daemon brings the BGP sessions up) waits for a pass
// that could read the desired state and the mirror, and has every desired
// rule in the RIB by then.
func TestLoadedAfterFirstCompletePass(t *testing.T) {
	r, st, sp := newTest(t, Config{})
	for i := range 20 {
		st.add(testRule(t, i, discard()), time.Time{})
	}
	isLoaded := func() bool {
		select {
		case <-r.Loaded():
			return true
		default:
			return false
		}
	}
	st.setReadErr(errors.New("database is locked"))
	pass(t, r)
	if isLoaded() {
		t.Fatal("loaded after a pass that could not read the desired state")
	}
	st.setReadErr(nil)
	sp.setReady(false)
	pass(t, r)
	if isLoaded() {
		t.Fatal("loaded after a pass that could not read the RIB")
	}
	sp.setReady(true)
	pass(t, r)
	if !isLoaded() {
		t.Fatal("not loaded after a complete pass")
	}
	if got := len(sp.snapshot()); got != 20 {
		t.Fatalf("loaded with %d of 20 rules in the RIB", got)
	}
}

// An early announcement (ahead of its store commit) is not an orphan
// until its write is settled: adopted when the commit landed, withdrawn
// when the write failed or the grace ends without a commit.
func TestEarlyAnnouncement(t *testing.T) {
	r, st, sp := newTest(t, Config{})
	now := time.Now()
	r.clock = funcClock(func() time.Time { return now })
	inRIB := func(m flowspec.Match) bool { _, ok := sp.snapshot()[m]; return ok }

	committed := testRule(t, 1, discard())
	r.AnnounceEarly(committed)
	eventually(t, 5*time.Second, "early path in the RIB", func() bool { return inRIB(committed.Match) })
	pass(t, r)
	if !inRIB(committed.Match) {
		t.Fatal("early path withdrawn as an orphan before its commit")
	}
	st.add(committed, time.Time{})
	r.Settle(committed.Match, false)
	if res := pass(t, r); res.Added != 0 || !inRIB(committed.Match) {
		t.Fatalf("after the commit: %+v", res)
	}

	abandoned := testRule(t, 2, discard())
	r.AnnounceEarly(abandoned)
	eventually(t, 5*time.Second, "second early path in the RIB", func() bool { return inRIB(abandoned.Match) })
	r.Settle(abandoned.Match, false) // its write failed: no row
	pass(t, r)
	if inRIB(abandoned.Match) {
		t.Fatal("abandoned early path still in the RIB")
	}

	lost := testRule(t, 3, discard())
	r.AnnounceEarly(lost)
	eventually(t, 5*time.Second, "third early path in the RIB", func() bool { return inRIB(lost.Match) })
	pass(t, r)
	if !inRIB(lost.Match) {
		t.Fatal("early path withdrawn within its grace")
	}
	if next := r.nextRetry(now); next.IsZero() || next.After(now.Add(EarlyGrace)) {
		t.Fatalf("no wake-up at the end of the grace: %v", next)
	}
	now = now.Add(EarlyGrace)
	pass(t, r)
	if inRIB(lost.Match) {
		t.Fatal("early path without a commit still in the RIB after its grace")
	}
	if !inRIB(committed.Match) {
		t.Fatal("the committed rule went too")
	}
}

// A seed (the daemon's start-up reading, shared with the guardrails'
// check) is the first pass's complete read: the pass reads no row again,
// and catches up with what changed after the seed's revision (a
// withdrawal, a new rule) before it announces anything.
func TestSeedIsTheFirstRead(t *testing.T) {
	r, st, sp := newTest(t, Config{})
	for i := range 20 {
		st.add(testRule(t, i, discard()), time.Time{})
	}
	ctx := context.Background()
	rev, err := st.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rows Rows
	var gone int64
	if err := st.EachActive(ctx, func(x *store.Rule) error {
		rows.Add(x)
		gone = x.ID
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	st.withdraw(gone) // e.g. by the guardrails, after the reading
	added := st.add(testRule(t, 20, discard()), time.Time{})
	r.Seed(rev, &rows, time.Now())

	startLoop(t, r)
	<-r.Loaded()
	rib := sp.snapshot()
	if len(rib) != 20 {
		t.Errorf("loaded with %d paths, want 20 (19 seeded and 1 added since)", len(rib))
	}
	if _, ok := rib[st.get(gone).Rule.Match]; ok {
		t.Errorf("rule %d, withdrawn after the seed's revision, was announced", gone)
	}
	if _, ok := rib[st.get(added).Rule.Match]; !ok {
		t.Errorf("rule %d, added after the seed's revision, is not announced", added)
	}
	st.mu.Lock()
	reads := st.fullReads
	st.mu.Unlock()
	if reads != 1 {
		t.Errorf("ActiveRules called %d times, want 1 (the seed's): the first pass read every row again", reads)
	}
}

// The process's first load is not paced, even with a session up: that
// session came up with this process and holds nothing of ours (GoBGP
// would have sent it the whole table at once had the load come first).
// An empty RIB found later is a storm again.
func TestFirstLoadNotPaced(t *testing.T) {
	const rate, n = 1000, 5000
	st, fs := newFakeStore(), newFakeSpeaker()
	sp := &peeredSpeaker{fakeSpeaker: fs}
	sp.up.Store(1)
	r := New(testLogger(t), st, sp, Config{AnnounceRate: rate})
	now := time.Now()
	r.clock = funcClock(func() time.Time { return now })
	for i := range n {
		st.add(testRule(t, i, discard()), time.Time{})
	}
	if res := pass(t, r); res.Added != n || res.Pending != 0 {
		t.Fatalf("first load with a session up = %+v, want all %d added at once", res, n)
	}
	for i := range n {
		fs.set(testRule(t, i, discard()).Match, discard(), false)
	}
	fs.release()
	now = now.Add(time.Minute) // past the expectations of the first load
	if res := pass(t, r); res.Added != rate {
		t.Fatalf("RIB found empty after the first load = %+v, want a paced batch of %d", res, rate)
	}
}

// movingStore is a store that moved to another database server (a
// PostgreSQL failover) whose revisions went back: the new primary lacks
// the last events seen on the old one and numbers its own with the same
// ids, so ChangedSince from the old revision misses them.
type movingStore struct {
	*fakeStore
	moves atomic.Uint64
}

func (m *movingStore) ServerMoves() uint64 { return m.moves.Load() }

// After the store moved to another server, the next pass reads every row
// instead of trusting the revision of the old one.
func TestServerMoveReadsEveryRow(t *testing.T) {
	st := &movingStore{fakeStore: newFakeStore()}
	sp := newFakeSpeaker()
	r := New(testLogger(t), st, sp, Config{})
	st.add(testRule(t, 1, discard()), time.Time{})
	pass(t, r)
	// The failover: a rule written on the new server under a revision
	// the reader has already seen, so ChangedSince does not return it.
	st.mu.Lock()
	seen := st.rev
	st.mu.Unlock()
	id := st.add(testRule(t, 2, discard()), time.Time{})
	st.mu.Lock()
	st.rev, st.changed[id] = seen, seen
	reads := st.fullReads
	st.mu.Unlock()
	pass(t, r)
	if _, ok := sp.snapshot()[st.get(id).Rule.Match]; ok {
		t.Fatal("the test's store returned the rule without a move: it proves nothing")
	}
	st.moves.Add(1)
	pass(t, r)
	st.mu.Lock()
	after := st.fullReads
	st.mu.Unlock()
	if after != reads+1 {
		t.Errorf("ActiveRules called %d times after the move, want 1", after-reads)
	}
	if _, ok := sp.snapshot()[st.get(id).Rule.Match]; !ok {
		t.Error("the rule written on the new server is not announced after the move")
	}
}

// TestBurstCompactedOnceSettled: rows that came in after the last
// doubling (fewer than the rows read before) stay scattered while passes
// run, and are compacted by the settle timer, compactAfter after the last
// pass, on the loop's clock.
func TestBurstCompactedOnceSettled(t *testing.T) {
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	fc := clock.NewFake(start)
	st, sp := newFakeStore(), newFakeSpeaker()
	r := New(testLogger(t), st, sp, Config{ResyncInterval: time.Hour, Clock: fc})
	n := 2 * bigScratch
	for i := range n {
		st.add(testRule(t, i, discard()), time.Time{})
	}
	startLoop(t, r)
	eventually(t, 30*time.Second, "first load announced", func() bool { return len(sp.snapshot()) == n })
	for i := n; i < n+bigScratch+10; i++ {
		st.add(testRule(t, i, discard()), time.Time{})
	}
	n += bigScratch + 10
	eventually(t, 30*time.Second, "burst announced", func() bool { return len(sp.snapshot()) == n })
	// Passes ran; the rows are still scattered. Only the clock moves
	// from here: each step to the loop's next timer (a retry may come
	// first and push the settle timer back), and the rows are compacted
	// once a timer fires with no pass for compactAfter before it.
	if got := r.settled.Load(); got != 0 {
		t.Fatalf("%d compactions before the clock moved", got)
	}
	for step := 0; r.settled.Load() == 0; step++ {
		if step == 20 {
			t.Fatal("rows still scattered after 20 timers")
		}
		var at time.Time
		eventually(t, 30*time.Second, "the settle timer (or a retry) armed", func() bool {
			var ok bool
			at, ok = fc.Next()
			return (ok && at.Sub(fc.Now()) <= compactAfter) || r.settled.Load() != 0
		})
		if r.settled.Load() != 0 {
			break
		}
		fc.Set(at)
		eventually(t, 30*time.Second, "the timer handled", func() bool {
			next, ok := fc.Next()
			return r.settled.Load() != 0 || (ok && next.After(at))
		})
	}
}
