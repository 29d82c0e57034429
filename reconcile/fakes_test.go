package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// fakeStore is a small stateful desired-state store: rules in a map, a
// coalescing change feed, and injectable errors.
type fakeStore struct {
	mu       sync.Mutex
	rules    map[int64]*store.Rule
	nextID   int64
	changes  chan struct{}
	readErr  error
	writeErr error
	writes   int // successful Finish and SetStatus calls
	// mostStatus is the most ids one SetStatus call named.
	mostStatus int
	// rev counts changes to desired state (not status); changed holds the
	// revision of each rule's last change (DeltaReader).
	rev     int64
	changed map[int64]int64
	// fullReads counts ActiveRules calls.
	fullReads int
}

func newFakeStore() *fakeStore {
	return &fakeStore{rules: make(map[int64]*store.Rule), changes: make(chan struct{}, 1), changed: make(map[int64]int64)}
}

// touch records a change to rule id. Called with mu held.
func (s *fakeStore) touch(id int64) {
	s.rev++
	s.changed[id] = s.rev
}

func (s *fakeStore) Revision(ctx context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readErr != nil {
		return 0, s.readErr
	}
	return s.rev, nil
}

func (s *fakeStore) EachChangedSince(ctx context.Context, rev int64, fn func(*store.Rule) error) (store.Changes, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readErr != nil {
		return store.Changes{}, s.readErr
	}
	ch := store.Changes{Next: max(rev, s.rev)}
	var r store.Rule
	for id, at := range s.changed {
		if at <= rev {
			continue
		}
		if x := s.rules[id]; x != nil && x.State == store.Active {
			// One Rule, scribbled over after each call, as the store's.
			r = *x
			if err := fn(&r); err != nil {
				return store.Changes{}, err
			}
			r = store.Rule{ID: -1, LastError: "reused", State: store.Withdrawn}
		} else {
			ch.Gone = append(ch.Gone, id)
		}
	}
	return ch, nil
}

func (s *fakeStore) notify() {
	select {
	case s.changes <- struct{}{}:
	default:
	}
}

func (s *fakeStore) Changes() <-chan struct{} { return s.changes }

// EachActive walks the active rules as store.Store does: one Rule, reused,
// and scribbled over after each call, so that a reader keeping the pointer
// (or anything it shares) reads garbage.
func (s *fakeStore) EachActive(ctx context.Context, fn func(*store.Rule) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fullReads++
	if s.readErr != nil {
		return s.readErr
	}
	var r store.Rule
	for _, x := range s.rules {
		if x.State != store.Active {
			continue
		}
		r = *x
		if err := fn(&r); err != nil {
			return err
		}
		r = store.Rule{ID: -1, LastError: "reused", State: store.Withdrawn}
	}
	return nil
}

// load replaces the copy with rows, compacted.
func (c *source) load(rows []store.Rule) {
	var rs Rows
	for i := range rows {
		rs.Add(&rows[i])
	}
	c.loadRows(rs.take())
}

// newView applies the lifecycle and validate steps to rows at now.
func newView(rows []store.Rule, now time.Time) view {
	var rs Rows
	for i := range rows {
		rs.Add(&rows[i])
	}
	return newViewRows(rs.take(), now)
}

func (s *fakeStore) ActiveRules(ctx context.Context) ([]store.Rule, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fullReads++
	if s.readErr != nil {
		return nil, s.readErr
	}
	var out []store.Rule
	for _, r := range s.rules {
		if r.State == store.Active {
			out = append(out, *r)
		}
	}
	return out, nil
}

// FinishMany finishes every item, as store.Store does (one write).
func (s *fakeStore) FinishMany(ctx context.Context, items []store.FinishItem) ([]error, error) {
	errs := make([]error, len(items))
	for i, it := range items {
		errs[i] = s.Finish(ctx, it.ID, it.State)
	}
	for _, err := range errs {
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return errs, err
		}
	}
	return errs, nil
}

func (s *fakeStore) Finish(ctx context.Context, id int64, state store.State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writeErr != nil {
		return s.writeErr
	}
	r, ok := s.rules[id]
	if !ok {
		return store.ErrNotFound
	}
	if r.State == store.Active {
		r.State = state
		r.Announced = false
		s.touch(id)
	}
	s.writes++
	s.notify()
	return nil
}

func (s *fakeStore) SetStatus(ctx context.Context, ids []int64, announced bool, lastErr string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writeErr != nil {
		return s.writeErr
	}
	for _, id := range ids {
		if r, ok := s.rules[id]; ok {
			r.Announced, r.LastError = announced, lastErr
		}
	}
	s.mostStatus = max(s.mostStatus, len(ids))
	s.writes++
	return nil
}

// add stores an active rule and returns its id.
func (s *fakeStore) add(r flowspec.Rule, expires time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	s.rules[s.nextID] = &store.Rule{ID: s.nextID, Rule: r, ExpiresAt: expires, State: store.Active}
	s.touch(s.nextID)
	s.notify()
	return s.nextID
}

func (s *fakeStore) withdraw(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules[id].WithdrawRequested = true
	s.touch(id)
	s.notify()
}

// update changes an active rule's action and expiry (an upsert).
func (s *fakeStore) update(id int64, a flowspec.Action, expires time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules[id].Rule.Action = a
	s.rules[id].ExpiresAt = expires
	s.touch(id)
	s.notify()
}

// finish makes a rule final behind the reconciler's back (another site,
// an operator's purge).
func (s *fakeStore) finish(id int64, state store.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules[id].State = state
	s.touch(id)
	s.notify()
}

func (s *fakeStore) setReadErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readErr = err
}

func (s *fakeStore) get(id int64) store.Rule {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.rules[id]
}

func (s *fakeStore) writeCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// desired returns what the RIB should hold for the store's rules at now.
func (s *fakeStore) desired(now time.Time) map[flowspec.Match]flowspec.Action {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[flowspec.Match]flowspec.Action)
	for _, r := range s.rules {
		if _, retiring := retiringState(*r, now); r.State == store.Active && !retiring {
			out[r.Rule.Match] = r.Rule.Action
		}
	}
	return out
}

// funcClock is a clock that reads a test's variable; its timers are real.
type funcClock func() time.Time

func (f funcClock) Now() time.Time      { return f() }
func (funcClock) NewTimer() clock.Timer { return clock.Real{}.NewTimer() }

// fakeSpeaker is a small stateful speaker: its RIB is a map that Announce and
// Withdraw change (then signal), with injectable errors and a mirror that
// can be held back.
type fakeSpeaker struct {
	mu      sync.Mutex
	rib     map[flowspec.Match]flowspec.Action
	ready   bool
	changes chan struct{}
	calls   int // Announce and Withdraw calls, failed ones included
	// announceErr, if set, is consulted before every Announce.
	announceErr func(r flowspec.Rule) error
	// holdWithdraw keeps withdrawn paths in the mirror until release.
	holdWithdraw bool
	held         []flowspec.Match
	// dirty and dirtyAll are DrainDirty's record of changes, gen counts
	// them.
	dirty    map[flowspec.Match]struct{}
	dirtyAll bool
	gen      uint64
	// epoch is Epoch; peers is EstablishedPeers (1 unless a test sets it).
	epoch uint64
	peers int
}

// mark records a change to m. Called with mu held.
func (s *fakeSpeaker) mark(m flowspec.Match) {
	s.dirty[m] = struct{}{}
	s.gen++
}

func (s *fakeSpeaker) Generation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

func (s *fakeSpeaker) Epoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

func (s *fakeSpeaker) PeerReestablished() uint64 { return 0 }

func (s *fakeSpeaker) EstablishedPeers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peers
}

func (s *fakeSpeaker) DrainDirty(fn func(flowspec.Match)) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ready {
		return 0, false
	}
	if s.dirtyAll {
		s.dirtyAll = false
		clear(s.dirty)
		return s.gen, false
	}
	for m := range s.dirty {
		fn(m)
	}
	clear(s.dirty)
	return s.gen, true
}

func (s *fakeSpeaker) Path(m flowspec.Match) (flowspec.Action, bool, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ready {
		return flowspec.Action{}, false, false
	}
	a, ok := s.rib[m]
	return a, ok, true
}

func (s *fakeSpeaker) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rib)
}

// overflow makes the next DrainDirty incomplete, as a mirror whose dirty
// set overflowed or that was rebuilt.
func (s *fakeSpeaker) overflow() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dirtyAll = true
	s.gen++
}

func newFakeSpeaker() *fakeSpeaker {
	return &fakeSpeaker{rib: make(map[flowspec.Match]flowspec.Action), ready: true, changes: make(chan struct{}, 1),
		dirty: make(map[flowspec.Match]struct{}), dirtyAll: true, peers: 1}
}

func (s *fakeSpeaker) notify() {
	select {
	case s.changes <- struct{}{}:
	default:
	}
}

func (s *fakeSpeaker) Changes() <-chan struct{} { return s.changes }

func (s *fakeSpeaker) Announce(ctx context.Context, rules []flowspec.Rule) []error {
	errs := make([]error, len(rules))
	for i, r := range rules {
		errs[i] = s.announce(r)
	}
	return errs
}

func (s *fakeSpeaker) announce(r flowspec.Rule) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.announceErr != nil {
		if err := s.announceErr(r); err != nil {
			return err
		}
	}
	s.rib[r.Match] = r.Action
	s.mark(r.Match)
	s.notify()
	return nil
}

func (s *fakeSpeaker) Withdraw(ctx context.Context, ms []flowspec.Match) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range ms {
		s.calls++
		if s.holdWithdraw {
			s.held = append(s.held, m)
			continue
		}
		delete(s.rib, m)
		s.mark(m)
	}
	s.notify()
	return make([]error, len(ms))
}

func (s *fakeSpeaker) Paths(fn func(flowspec.Match, flowspec.Action)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ready {
		return false
	}
	for m, a := range s.rib {
		fn(m, a)
	}
	return true
}

// release applies the withdrawals held back so far.
func (s *fakeSpeaker) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdWithdraw = false
	for _, m := range s.held {
		delete(s.rib, m)
		s.mark(m)
	}
	s.held = nil
	s.notify()
}

// set changes the RIB behind the reconciler's back (drift, foreign paths).
func (s *fakeSpeaker) set(m flowspec.Match, a flowspec.Action, present bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if present {
		s.rib[m] = a
	} else {
		delete(s.rib, m)
	}
	s.mark(m)
	s.notify()
}

func (s *fakeSpeaker) setReady(ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready = ok
	s.dirtyAll = true
	s.notify()
}

func (s *fakeSpeaker) snapshot() map[flowspec.Match]flowspec.Action {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.rib)
}

func (s *fakeSpeaker) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// terminalErr is bad data as a speaker would report it.
type terminalErr struct{ msg string }

func (e *terminalErr) Error() string  { return e.msg }
func (e *terminalErr) Terminal() bool { return true }

var errFlaky = errors.New("speaker busy")

// testRule returns a distinct valid rule for each i.
func testRule(t testing.TB, i int, a flowspec.Action) flowspec.Rule {
	t.Helper()
	r, err := flowspec.Parse(fmt.Sprintf("match destination 198.18.%d.%d/32 then discard", i/256%256, i%256))
	if err != nil {
		t.Fatalf("test rule %d: %v", i, err)
	}
	r.Action = a
	return r
}

func discard() flowspec.Action { return flowspec.Discard() }

func rateLimit(n int) flowspec.Action { return flowspec.RateLimit(float32(n)) }

func testLogger(t testing.TB) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "reconcile", Level: hclog.Debug, Output: t.Output()})
}

// startLoop runs r until the test ends.
func startLoop(t *testing.T, r *Reconciler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// eventually polls cond until it holds or the timeout passes.
// eventually waits until cond holds, polling it; timeout is only when to
// give up (never less than 30 s: a loaded machine is slow, not wrong).
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	timeout = max(timeout, 30*time.Second)
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func converged(st *fakeStore, sp *fakeSpeaker) func() bool {
	return func() bool { return maps.Equal(sp.snapshot(), st.desired(time.Now())) }
}
