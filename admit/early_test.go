package admit_test

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
)

// heldStore is a real SQLite store whose Upsert waits, once called, until
// the test lets it go on (nil) or fail (an error): a commit that takes
// its time, or one that fails after the rule was announced.
type heldStore struct {
	*store.Store
	entered chan struct{}
	release chan error
	// briefs counts the reads of rules a withdrawal checks (GetBrief,
	// ActiveMatches).
	briefs atomic.Int64
}

func (h *heldStore) GetBrief(ctx context.Context, id int64) (store.Rule, error) {
	h.briefs.Add(1)
	return h.Store.GetBrief(ctx, id)
}

func (h *heldStore) ActiveMatches(ctx context.Context, ms []flowspec.Match) (map[flowspec.Match]store.Existing, error) {
	h.briefs.Add(1)
	return h.Store.ActiveMatches(ctx, ms)
}

func (h *heldStore) Upsert(ctx context.Context, in store.Input) (store.Rule, bool, error) {
	h.entered <- struct{}{}
	if err := <-h.release; err != nil {
		return store.Rule{}, false, err
	}
	return h.Store.Upsert(ctx, in)
}

// Withdraw is held like Upsert, on the same channels.
func (h *heldStore) Withdraw(ctx context.Context, id int64, actor string) (store.Rule, error) {
	h.entered <- struct{}{}
	if err := <-h.release; err != nil {
		return store.Rule{}, err
	}
	return h.Store.Withdraw(ctx, id, actor)
}

// WithdrawSeen is held like Withdraw.
func (h *heldStore) WithdrawSeen(ctx context.Context, id int64, actor string, seen store.Rule) (store.Rule, error) {
	h.entered <- struct{}{}
	if err := <-h.release; err != nil {
		return store.Rule{}, err
	}
	return h.Store.WithdrawSeen(ctx, id, actor, seen)
}

// WithdrawGone is held like Withdraw.
func (h *heldStore) WithdrawGone(ctx context.Context, id int64, actor string, seen *store.Rule) (store.Rule, error) {
	h.entered <- struct{}{}
	if err := <-h.release; err != nil {
		return store.Rule{}, err
	}
	return h.Store.WithdrawGone(ctx, id, actor, seen)
}

// passCounter counts the reconciler's passes and wakes until at each.
type passCounter struct {
	n    atomic.Int64
	wake chan struct{} // one slot: a pass ended since until last looked
}

func (c *passCounter) PassDone(reconcile.PassResult) {
	c.n.Add(1)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *passCounter) Announced(flowspec.Family, string) {}
func (c *passCounter) Withdrawn(flowspec.Family, string) {}
func (c *passCounter) ExpiryLateness(time.Duration)      {}

// reconcilerWrites is the rig's store as its reconciler sees it, counting
// the writes a pass makes after a write: statuses and final states.
type reconcilerWrites struct {
	*store.Store
	statuses, finishes atomic.Int64
}

func (w *reconcilerWrites) SetStatus(ctx context.Context, ids []int64, announced bool, lastErr string) error {
	w.statuses.Add(1)
	return w.Store.SetStatus(ctx, ids, announced, lastErr)
}

func (w *reconcilerWrites) FinishMany(ctx context.Context, items []store.FinishItem) ([]error, error) {
	w.finishes.Add(1)
	return w.Store.FinishMany(ctx, items)
}

// earlyRig is the gate over a held real store, with a real reconciler
// and an in-process GoBGP. The reconciler's clock stands still, so an
// early announcement's grace never ends by itself: a withdrawal can only
// come from the write being settled.
type earlyRig struct {
	gate   *admit.Gate
	st     *heldStore
	sp     *bgp.Speaker
	rec    *reconcile.Reconciler
	passes *passCounter
	writes *reconcilerWrites
	clock  *clock.Fake // the reconciler's; it moves only when a test moves it
}

func newEarlyRig(t *testing.T) *earlyRig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := hclog.New(&hclog.LoggerOptions{Output: tWriter{t}, Level: hclog.Info})
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(t.TempDir(), "rk.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sp := bgp.New(log.Named("bgp"), bgp.Config{ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: -1})
	if err := sp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sp.Stop)
	// Start returned: the mirror holds GoBGP's RIB (bgp.watchRIB).
	passes := &passCounter{wake: make(chan struct{}, 1)}
	writes := &reconcilerWrites{Store: st}
	fc := clock.NewFake(time.Now())
	rec := reconcile.New(log.Named("reconcile"), writes, sp, reconcile.Config{Clock: fc, Recorder: passes})
	done := make(chan struct{})
	go func() {
		defer close(done)
		rec.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	held := &heldStore{Store: st, entered: make(chan struct{}), release: make(chan error)}
	g := admit.New(admit.Config{Store: held, Early: rec, EarlyReady: held.EarlyOK, EarlyWithdrawReady: held.EarlyWithdrawOK})
	return &earlyRig{gate: g, st: held, sp: sp, rec: rec, passes: passes, writes: writes, clock: fc}
}

func (r *earlyRig) inRIB(m flowspec.Match) bool {
	_, present, _ := r.sp.Path(m)
	return present
}

// until waits for cond, looking again after each reconcile pass and
// every few milliseconds (a change made while a write made early has
// not settled wakes no pass: reconcile.EarlySettleWait). It fails the
// test after 30 s without cond.
func (r *earlyRig) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	limit := time.NewTimer(30 * time.Second)
	defer limit.Stop()
	poll := time.NewTicker(2 * time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-r.passes.wake:
		case <-poll.C:
		case <-limit.C:
			t.Fatalf("not within 30s: %s", what)
		}
	}
}

// A client that hangs up while its early-announced write commits does
// not take the rule off the routers: the commit completes, the path
// stays (the reconciler adopts it, the RIB never changes), and the rule
// is stored.
func TestEarlyAnnouncedWriteOutlivesItsClient(t *testing.T) {
	r := newEarlyRig(t)
	rule := mustParse(t, "match destination 203.0.113.7/32 then discard")
	ctx, hangUp := context.WithCancel(context.Background())
	type result struct {
		rule store.Rule
		err  error
	}
	done := make(chan result, 1)
	go func() {
		stored, _, err := r.gate.Add(ctx, noc, req(rule.String()))
		done <- result{stored, err}
	}()
	<-r.st.entered
	r.until(t, "the rule announced ahead of its commit", func() bool { return r.inRIB(rule.Match) })
	gen := r.sp.Generation()
	hangUp()
	r.st.release <- nil
	res := <-done
	if res.err != nil {
		t.Fatalf("the write of a client that hung up after the announcement: %v", res.err)
	}
	r.until(t, "the stored rule's status says announced", func() bool {
		got, err := r.st.Get(context.Background(), res.rule.ID)
		return err == nil && got.State == store.Active && got.Announced
	})
	if !r.inRIB(rule.Match) || r.sp.Generation() != gen {
		t.Fatalf("the path changed after the client hung up (in the RIB: %v, mirror generation %d, was %d)",
			r.inRIB(rule.Match), r.sp.Generation(), gen)
	}
}

// A write that fails after its rule was announced ahead of the commit is
// withdrawn at once (not at the end of the grace: the reconciler's clock
// stands still), and the caller gets the store's error.
func TestEarlyAnnouncedWriteThatFailsIsWithdrawn(t *testing.T) {
	r := newEarlyRig(t)
	rule := mustParse(t, "match destination 203.0.113.8/32 then discard")
	done := make(chan error, 1)
	go func() {
		_, _, err := r.gate.Add(context.Background(), noc, req(rule.String()))
		done <- err
	}()
	<-r.st.entered
	r.until(t, "the rule announced ahead of its commit", func() bool { return r.inRIB(rule.Match) })
	failure := errors.New("store: upsert rule: database unavailable: disk I/O error (injected)")
	r.st.release <- failure
	if err := <-done; !errors.Is(err, failure) {
		t.Fatalf("the caller got %v, want the store's error", err)
	}
	r.until(t, "the failed write's path withdrawn", func() bool { return !r.inRIB(rule.Match) })
	if rows, err := r.st.ActiveRules(context.Background()); err != nil || len(rows) != 0 {
		t.Fatalf("active rules after the failed write: %v, %v", rows, err)
	}
}

// announced adds text through the rig's gate (its commit let through at
// once) and waits until the stored rule's status says announced.
func (r *earlyRig) announced(t *testing.T, text string) store.Rule {
	t.Helper()
	done := make(chan error, 1)
	var stored store.Rule
	go func() {
		var err error
		stored, _, err = r.gate.Add(context.Background(), noc, req(text))
		done <- err
	}()
	<-r.st.entered
	r.st.release <- nil
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r.until(t, "the rule announced and its status written", func() bool {
		got, err := r.st.Get(context.Background(), stored.ID)
		return err == nil && got.Announced && r.inRIB(stored.Rule.Match)
	})
	// The write settled applied: its changes wait for the pass that
	// comes EarlySettleWait later, and so would any other change.
	r.clock.Advance(reconcile.EarlySettleWait)
	return stored
}

// settledPass waits until a pass that started after this call ended.
func (r *earlyRig) settledPass(t *testing.T) {
	t.Helper()
	n := r.passes.n.Load()
	r.rec.Trigger()
	// The pass running now may have started before the call: wait for
	// the one after it too.
	r.until(t, "two more reconcile passes", func() bool {
		if r.passes.n.Load() == n+1 {
			r.rec.Trigger()
		}
		return r.passes.n.Load() >= n+2
	})
}

// A withdrawal leaves ahead of its commit: the path is gone while the
// commit is still held, no pass puts it back although the store still
// shows the rule active, and once the commit lands (the client having
// gone away meanwhile) the rule is withdrawn for good.
func TestEarlyWithdrawal(t *testing.T) {
	r := newEarlyRig(t)
	rule := r.announced(t, "match destination 203.0.113.20/32 then discard")
	ctx, hangUp := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.gate.Withdraw(ctx, noc, rule.ID)
		done <- err
	}()
	<-r.st.entered
	r.until(t, "the path withdrawn ahead of the commit", func() bool { return !r.inRIB(rule.Rule.Match) })
	r.settledPass(t)
	if r.inRIB(rule.Rule.Match) {
		t.Fatal("a pass announced the rule again while its withdrawal was committing")
	}
	if got, err := r.st.Get(context.Background(), rule.ID); err != nil || got.State != store.Active || got.WithdrawRequested {
		t.Fatalf("before the commit the store should still show the rule active: %+v, %v", got, err)
	}
	hangUp()
	r.st.release <- nil
	if err := <-done; err != nil {
		t.Fatalf("the withdrawal of a client that hung up after the path left: %v", err)
	}
	r.until(t, "the rule finished as withdrawn", func() bool {
		got, err := r.st.Get(context.Background(), rule.ID)
		return err == nil && got.State == store.Withdrawn && !got.Announced
	})
	r.settledPass(t)
	if r.inRIB(rule.Rule.Match) {
		t.Fatal("the withdrawn rule's path came back")
	}
}

// A single write whose change the speaker took ahead of the commit is one
// commit: the announcement's commit records the status "announced", the
// withdrawal's finishes the rule, so the passes that follow have nothing
// to write (a second commit per write took CPU from the next write's
// UPDATE, and the next write's commit queued behind it).
func TestSingleEarlyWriteIsOneCommit(t *testing.T) {
	r := newEarlyRig(t)
	rule := r.announced(t, "match destination 203.0.113.22/32 then discard")
	r.settledPass(t)
	if got := r.rec.LastPass().Adopted; got != 1 {
		t.Fatalf("%d rules adopted after the announcement, want 1", got)
	}
	if n := r.writes.statuses.Load(); n != 0 {
		t.Errorf("the reconciler wrote statuses %d times after an early announcement the speaker took; want none (its commit records it)", n)
	}
	done := make(chan error, 1)
	var withdrawn store.Rule
	go func() {
		var err error
		withdrawn, err = r.gate.Withdraw(context.Background(), noc, rule.ID)
		done <- err
	}()
	<-r.st.entered
	r.st.release <- nil
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if withdrawn.State != store.Withdrawn || withdrawn.Announced {
		t.Errorf("the withdrawal answered %+v; want the rule withdrawn and not announced", withdrawn)
	}
	r.settledPass(t)
	if got := r.rec.LastPass().Adopted; got != 0 {
		t.Fatalf("%d rules adopted after the withdrawal, want 0", got)
	}
	if got, err := r.st.Get(context.Background(), rule.ID); err != nil || got.State != store.Withdrawn || got.Announced {
		t.Fatalf("after the withdrawal: %+v, %v", got, err)
	}
	if s, f := r.writes.statuses.Load(), r.writes.finishes.Load(); s != 0 || f != 0 {
		t.Errorf("the reconciler wrote %d statuses and %d final states after an early withdrawal the speaker took; want none (its commit finishes the rule)", s, f)
	}
	if r.inRIB(rule.Rule.Match) {
		t.Fatal("the withdrawn rule's path came back")
	}
	hist, err := r.st.History(context.Background(), rule.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range hist {
		kinds = append(kinds, string(e.Kind))
	}
	if want := "created status withdraw-requested withdrawn"; strings.Join(kinds, " ") != want {
		t.Errorf("history %q, want %q", strings.Join(kinds, " "), want)
	}
}

// A withdrawal that the store refuses after its path left ahead of the
// commit is announced again at once (not at the end of the grace: the
// reconciler's clock stands still), and the caller gets the store's
// error; the rule stays active.
func TestEarlyWithdrawalThatFailsIsAnnouncedAgain(t *testing.T) {
	r := newEarlyRig(t)
	rule := r.announced(t, "match destination 203.0.113.21/32 then discard")
	done := make(chan error, 1)
	go func() {
		_, err := r.gate.Withdraw(context.Background(), noc, rule.ID)
		done <- err
	}()
	<-r.st.entered
	r.until(t, "the path withdrawn ahead of the commit", func() bool { return !r.inRIB(rule.Rule.Match) })
	failure := errors.New("store: withdraw rule: database unavailable: disk I/O error (injected)")
	r.st.release <- failure
	if err := <-done; !errors.Is(err, failure) {
		t.Fatalf("the caller got %v, want the store's error", err)
	}
	r.until(t, "the rule announced again", func() bool { return r.inRIB(rule.Rule.Match) })
	got, err := r.st.Get(context.Background(), rule.ID)
	if err != nil || got.State != store.Active || got.WithdrawRequested {
		t.Fatalf("after the failed withdrawal: %+v, %v", got, err)
	}
	if a, _, _ := r.sp.Path(rule.Rule.Match); a != rule.Rule.Action {
		t.Fatalf("announced again with action %v, want %v", a, rule.Rule.Action)
	}
	// The path went by the gate's hand: putting it back is no drift.
	if d := r.rec.Drift(); d != (reconcile.DriftCounts{}) {
		t.Errorf("drift = %+v, want none", d)
	}
}

// The withdrawal of a rule this gate stored leaves before anything is
// read from the store: its checks are made on the rule as stored by its
// Add, and the store's commit withdraws it only if it is still so.
func TestEarlyWithdrawalOfAKeptRuleReadsNothingFirst(t *testing.T) {
	t.Run("ByID", func(t *testing.T) {
		testKeptRuleReadsNothingFirst(t, func(g *admit.Gate, rule store.Rule) error {
			_, err := g.Withdraw(context.Background(), noc, rule.ID)
			return err
		})
	})
	t.Run("ByMatch", func(t *testing.T) {
		testKeptRuleReadsNothingFirst(t, func(g *admit.Gate, rule store.Rule) error {
			_, err := g.WithdrawMatch(context.Background(), noc, rule.Rule.String())
			return err
		})
	})
}

func testKeptRuleReadsNothingFirst(t *testing.T, withdraw func(*admit.Gate, store.Rule) error) {
	r := newEarlyRig(t)
	rule := r.announced(t, "match destination 203.0.113.23/32 then discard")
	r.st.briefs.Store(0)
	done := make(chan error, 1)
	go func() { done <- withdraw(r.gate, rule) }()
	<-r.st.entered
	r.until(t, "the path withdrawn ahead of the commit", func() bool { return !r.inRIB(rule.Rule.Match) })
	if n := r.st.briefs.Load(); n != 0 {
		t.Errorf("the rule was read %d times before its path left; want none", n)
	}
	r.st.release <- nil
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r.until(t, "the rule finished as withdrawn", func() bool {
		got, err := r.st.Get(context.Background(), rule.ID)
		return err == nil && got.State == store.Withdrawn
	})
}

// A rule changed behind the gate's back since its Add (another process
// on the same store) is decided on as stored now: a withdrawal its new
// owner's rule refuses leaves nothing withdrawn, the caller gets the
// refusal and the path, off while the gate decided, is announced again
// at once.
func TestEarlyWithdrawalOfAChangedRuleDecidesOnTheStoredRule(t *testing.T) {
	t.Run("ByID", func(t *testing.T) {
		testChangedRule(t, "id", func(g *admit.Gate, a admit.Actor, rule store.Rule) error {
			_, err := g.Withdraw(context.Background(), a, rule.ID)
			return err
		})
	})
	t.Run("ByMatch", func(t *testing.T) {
		testChangedRule(t, "text", func(g *admit.Gate, a admit.Actor, rule store.Rule) error {
			_, err := g.WithdrawMatch(context.Background(), a, rule.Rule.String())
			return err
		})
	})
}

func testChangedRule(t *testing.T, field string, withdraw func(*admit.Gate, admit.Actor, store.Rule) error) {
	r := newEarlyRig(t)
	rule := r.announced(t, "match destination 203.0.113.24/32 then discard")
	// A detector's token that may withdraw only its own rules wrote it...
	det := admit.Actor{Name: "noc", Source: admit.SourceTCP, Scope: admit.Scope{Prefixes: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}}
	// ...and another process's write made it someone else's.
	changed, err := flowspec.Parse("match destination 203.0.113.24/32 then rate-limit 1000")
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := r.st.Store.Upsert(context.Background(), store.Input{Rule: changed, Actor: "other", ExpiresAt: rule.ExpiresAt})
	if err != nil || got.ID != rule.ID || got.Actor != "other" {
		t.Fatalf("the change behind the gate's back: %+v, %v", got, err)
	}
	r.until(t, "the changed rule announced", func() bool {
		a, _, _ := r.sp.Path(rule.Rule.Match)
		return a == changed.Action
	})
	// No settled pass here, on purpose: the withdrawal leaves while the
	// pass that announced the change may still be booking it, and the
	// path must come back at once all the same.
	done := make(chan error, 1)
	r.st.briefs.Store(0)
	go func() { done <- withdraw(r.gate, det, rule) }()
	// Every commit the withdrawal asks for goes on (none, if the gate
	// refuses it before any).
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-r.st.entered:
				r.st.release <- nil
			case <-stop:
				return
			}
		}
	}()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("no answer within 30s")
	}
	wantRefusal(t, "withdrawal of a rule that changed hands", err, admit.KindForbidden, field, `"other"`)
	got, err = r.st.Get(context.Background(), rule.ID)
	if err != nil || got.State != store.Active || got.WithdrawRequested {
		t.Fatalf("after the refused withdrawal: %+v, %v", got, err)
	}
	r.until(t, "the rule announced again", func() bool { return r.inRIB(rule.Rule.Match) })
	if r.st.briefs.Load() == 0 {
		t.Error("the rule was never read: its kept copy should have proved stale and the stored rule decided")
	}
}

// WithdrawMatch (POST /v1/rules/withdraw) takes the same early path.
func TestEarlyWithdrawalByMatch(t *testing.T) {
	r := newEarlyRig(t)
	rule := r.announced(t, "match destination 203.0.113.22/32 then discard")
	done := make(chan error, 1)
	go func() {
		_, err := r.gate.WithdrawMatch(context.Background(), noc, rule.Rule.String())
		done <- err
	}()
	<-r.st.entered
	r.until(t, "the path withdrawn ahead of the commit", func() bool { return !r.inRIB(rule.Rule.Match) })
	r.st.release <- nil
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r.until(t, "the rule finished as withdrawn", func() bool {
		got, err := r.st.Get(context.Background(), rule.ID)
		return err == nil && got.State == store.Withdrawn
	})
}

// tWriter sends a logger's lines to the test's log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
