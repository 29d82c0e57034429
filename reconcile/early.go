package reconcile

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Early announcement: time to mitigate.
//
// A write through the API is acknowledged once it is durable in the store,
// and the reconciler announces what the store says. Waiting for the commit
// before announcing puts the commit (an fsync) on the path from a
// detector's request to the routers. AnnounceEarly takes it off: the API
// hands a rule that passed every check, and whose write the store expects
// to commit (store.Store.EarlyOK: no failed or hung commit, room on the
// disk), to the speaker before its commit starts (EarlyWait); a write the
// store may refuse is announced after its commit, so that it never
// reaches a router. The reconciler keeps such a path out of orphan
// withdrawal until the write is done (Settle) or for EarlyGrace at most;
// then the store decides as for any path: a committed rule is adopted, a
// path whose write failed (or that the committed rule does not want here)
// is an orphan and withdrawn. An announcement never outlives a write that did
// not happen, and the acknowledgement still means "stored".
//
// Early withdrawal (WithdrawEarly) is the same the other way: time to
// withdraw. The path leaves before the commit that withdraws its rule
// runs; until that write settles (or EarlyGrace) a pass does not put it
// back, although the store may still show the rule active. Once settled
// the store decides again: a withdrawn rule finishes, a rule whose
// withdrawal failed is still desired and is announced again at once.

// EarlyGrace is how long an early announcement waits for its store commit
// before the reconciler treats the path as an orphan.
const EarlyGrace = 10 * time.Second

// EarlyWait bounds how long AnnounceEarly and WithdrawEarly wait for the
// speaker to take the change before they return and the caller's commit
// starts. The commit (SQLite's work and its fsync) would otherwise run
// on the same two cores as GoBGP's steps that put the UPDATE on the wire,
// and the UPDATE left later than with the commit after it. A speaker call that takes longer (GoBGP busy with a large
// batch, or hung) goes on in the background, as before: the write's
// commit is not held up for it.
const EarlyWait = 100 * time.Millisecond

// EarlySettleWait bounds how long a store or mirror change that arrives
// while a single write made early has not settled yet waits for a pass.
// The change is most likely that write's own (its commit, its path in
// the mirror), which the write's early change already applied: a pass
// for each, right when the next write's UPDATE leaves, cost CPU that
// UPDATE waited for (two cores). A write that settles applied leaves its
// changes to the pass that comes within EarlySettleWait, one for a burst
// of writes; one that fails is passed on at once (Settle). A change that
// is not the write's waits as long at most.
const EarlySettleWait = 100 * time.Millisecond

// earlySet holds the Matches changed on the speaker ahead of their
// commit (announced, or withdrawn), with the time until which a pass
// leaves them as they are, and the speaker call still running for each.
// Written by API goroutines, read by passes.
type earlySet struct {
	mu sync.Mutex
	m  map[flowspec.Match]earlyEntry
}

type earlyEntry struct {
	// start is when the change was made; until is the end of its grace
	// (zero once settled).
	start, until time.Time
	// applied: settled with its outcome recorded by its commit (Settle).
	applied bool
	// action is what an early announcement put on the speaker (zero for
	// a withdrawal).
	action flowspec.Action
	// call is closed once the speaker call made ahead of the commit
	// returned; nil: none to wait for.
	call chan struct{}
}

func (e *earlySet) add(m flowspec.Match, a flowspec.Action, start time.Time, call chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = make(map[flowspec.Match]earlyEntry)
	}
	e.m[m] = earlyEntry{start: start, until: start.Add(EarlyGrace), action: a, call: call}
}

// settling reports whether a write behind a change of the set is still
// expected to settle soon (made less than EarlySettleWait ago, not
// settled yet), and until when it is.
func (e *earlySet) settling(now time.Time) (until time.Time, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, en := range e.m {
		if en.until.IsZero() && !en.applied {
			continue // settled failed: its pass runs at once
		}
		// Settled applied counts too: the loop may take the commit's
		// wake-up only after Settle ran.
		if end := en.start.Add(EarlySettleWait); now.Before(end) {
			until, ok = earliest(until, end), true
		}
	}
	return until, ok
}

// end ends the grace of m at once, if it has one, once the speaker call
// made for it returned (a pass then sees what that call did, and a
// withdrawal ahead of the commit cannot land after the next pass
// announced the rule again).
func (e *earlySet) end(m flowspec.Match, applied bool) bool {
	e.mu.Lock()
	en, ok := e.m[m]
	e.mu.Unlock()
	if !ok {
		return false
	}
	if en.call != nil {
		<-en.call
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if cur, ok := e.m[m]; ok && cur.call == en.call {
		e.m[m] = earlyEntry{start: en.start, applied: applied, action: en.action}
	}
	return true
}

// ended is an entry whose grace ended: a pass compares its Match again.
type ended struct {
	m flowspec.Match
	// applied: its write settled with its outcome recorded by its
	// commit; for an announcement, the speaker held action.
	applied bool
	action  flowspec.Action
}

// expire drops the entries whose grace ended by now and returns them.
func (e *earlySet) expire(now time.Time) (expired []ended) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for m, en := range e.m {
		if !now.Before(en.until) {
			expired = append(expired, ended{m: m, applied: en.applied, action: en.action})
			delete(e.m, m)
		}
	}
	return expired
}

// next is the earliest end of a grace still running; zero if none.
func (e *earlySet) next() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	var t time.Time
	for _, en := range e.m {
		t = earliest(t, en.until)
	}
	return t
}

// spare removes from items the Matches still within their grace.
func (e *earlySet) spare(items []Item) []Item {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.m) == 0 {
		return items
	}
	return slices.DeleteFunc(items, func(it Item) bool {
		_, early := e.m[it.Match]
		return early
	})
}

// AnnounceEarly hands rule to the speaker ahead of the store commit that
// declares it (see above) and returns once the speaker has taken it, or
// after EarlyWait while the speaker call goes on. Call it only for a rule
// that passed every check a write makes, for this site, and whose write
// the store expects to commit; call Settle once the write returned,
// committed or failed. A failed announcement is only logged: the
// reconciler announces the rule again once the commit shows it. In a dry
// run it does nothing.
//
// taken reports that the speaker holds the path now (its call returned
// without an error within EarlyWait): what a pass would observe and
// record as the rule's status, so the write's own commit may record it
// (store.Input.Announced) and the pass after it has nothing to write.
func (r *Reconciler) AnnounceEarly(rule flowspec.Rule) (taken bool) {
	if r.cfg.DryRun {
		return false
	}
	r.log.Debug("announcing ahead of the commit", "text", rule)
	call := make(chan struct{})
	var ok atomic.Bool
	r.early.add(rule.Match, rule.Action, r.now(), call)
	go func() {
		defer close(call)
		op := "add"
		if a, present, _ := r.s.Path(rule.Match); present {
			if a == rule.Action {
				op = "" // already as asked: nothing changes on the routers
			} else {
				op = "update"
			}
		}
		if err := r.s.Announce(context.Background(), []flowspec.Rule{rule})[0]; err != nil {
			r.log.Debug("early announcement failed; the reconciler retries after the commit", "text", rule, "error", err)
			return
		}
		ok.Store(true)
		if op != "" {
			// The pass that follows adopts this path: it is counted here,
			// once, as the change it is (an operator's, not drift).
			r.recorder().Announced(rule.Match.Family(), op)
		}
	}()
	return r.awaitEarly(call) && ok.Load()
}

// WithdrawEarly takes the path of m off the speaker ahead of the store
// commit that withdraws its rule, and returns once the speaker has taken
// the withdrawal, or after EarlyWait while the call goes on: time to
// withdraw as time to mitigate. Call it only for an active rule of this site
// whose withdrawal passed every check and whose commit the store expects
// to succeed; call Settle once the write returned, committed or failed.
// Until then (or EarlyGrace at most) a pass does not announce m again,
// although the store still shows the rule active: a pass that read the
// store before the commit landed would otherwise put the path straight
// back. Settle ends that: a committed withdrawal finishes the rule as any
// other, a failed one leaves the rule active and the next pass announces
// it again at once. The withdrawal is the speaker's own (Speaker.Withdraw),
// so a rule held back from some peers is withdrawn only where it went.
// In a dry run it does nothing.
//
// gone reports that the speaker holds no path of m now (its call
// returned without an error within EarlyWait): what a pass would observe
// before it finishes the rule, so the withdrawal's own commit may finish
// it (store.Store.WithdrawGone) and the pass after it has nothing to
// write.
func (r *Reconciler) WithdrawEarly(m flowspec.Match) (gone bool) {
	if r.cfg.DryRun {
		return false
	}
	r.log.Debug("withdrawing ahead of the commit", "match", m)
	call := make(chan struct{})
	var ok atomic.Bool
	r.leaving.add(m, flowspec.Action{}, r.now(), call)
	go func() {
		defer close(call)
		_, present, _ := r.s.Path(m)
		if err := r.s.Withdraw(context.Background(), []flowspec.Match{m})[0]; err != nil {
			r.log.Debug("early withdrawal failed; the reconciler withdraws after the commit", "match", m, "error", err)
			return
		}
		ok.Store(true)
		if present {
			r.recorder().Withdrawn(m.Family(), "retire")
		}
	}()
	return r.awaitEarly(call) && ok.Load()
}

// awaitEarly waits until call is closed (the speaker call made ahead of
// a commit returned), or EarlyWait on the reconciler's clock; returned
// reports the former.
func (r *Reconciler) awaitEarly(call <-chan struct{}) (returned bool) {
	select {
	case <-call:
		return true
	default:
	}
	t := r.clock.NewTimer()
	defer t.Stop()
	t.Reset(EarlyWait)
	select {
	case <-call:
		return true
	case <-t.C():
		r.log.Debug("speaker call ahead of a commit still running; the commit goes on", "waited", EarlyWait)
		return false
	}
}

// Settle says that the write behind an early announcement or withdrawal
// of m is done, committed or failed: the next pass treats the path like
// any other (a failed write's path is an orphan, unless something else
// desires it; a failed withdrawal's rule is announced again). It waits
// for the speaker call made ahead of the commit to have returned, so that
// the pass that follows sees what it did (and neither announces nor
// counts the change a second time).
//
// applied says the write committed and its commit recorded what the
// speaker took (the status "announced", the rule finished): the RIB and
// the store agree on m, so no pass is needed at once; the store change
// of the commit is taken by the next pass, within EarlySettleWait.
// Otherwise (a failed write, a change the speaker had not taken) a pass
// runs at once.
func (r *Reconciler) Settle(m flowspec.Match, applied bool) {
	a, w := r.early.end(m, applied), r.leaving.end(m, applied)
	if (a || w) && !applied {
		r.Trigger()
	}
}
