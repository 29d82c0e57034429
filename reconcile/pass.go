package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// runPass runs one pass, records and logs its result, and returns when the
// loop must wake up next for expiry and for retries (zero: no need).
func (r *Reconciler) runPass(ctx context.Context, full bool) (nextExpiry, nextRetry time.Time) {
	return r.runPassWith(ctx, full, nil)
}

// runPassWith is runPass with a complete read made off the loop (nil:
// none); a pass with one is a full pass.
func (r *Reconciler) runPassWith(ctx context.Context, full bool, snap *snapshot) (nextExpiry, nextRetry time.Time) {
	now := r.now()
	res := PassResult{Started: now, DryRun: r.cfg.DryRun, Full: full || snap != nil}
	nextExpiry = r.pass(ctx, now, full, snap, &res)
	nextRetry = r.nextRetry(now)
	res.Duration = r.now().Sub(now)
	if !res.DryRun {
		r.changeCount.Add(uint64(res.Added + res.Updated + res.Withdrawn + res.Finished))
	}

	r.mu.Lock()
	r.last = res
	r.mu.Unlock()
	r.recorder().PassDone(res)
	if !res.partial {
		r.loadedOnce.Do(func() { close(r.loaded) })
	}

	lvl := hclog.Debug
	if res.Changed() {
		lvl = hclog.Info
	}
	r.log.Log(lvl, "pass", "added", res.Added, "updated", res.Updated,
		"withdrawn", res.Withdrawn, "adopted", res.Adopted, "finished", res.Finished,
		"orphans", res.Orphans, "pending", res.Pending, "errors", res.Errors,
		"capped", res.Capped, "dry_run", res.DryRun, "duration", res.Duration, "err", res.Err)
	return nextExpiry, nextRetry
}

// pass does one reconcile and fills res. It returns the nearest future
// expiry among desired rules.
//
// A pass compares either every Match (a full comparison: one walk over
// the cached rows by Match with a lookup in the mirror each, walk.go)
// or only the dirty ones (see incremental.go). Both give the same plan for
// the Matches they look at, and a dirty-only pass looks at every Match
// whose plan could differ from the previous pass's.
func (r *Reconciler) pass(ctx context.Context, now time.Time, full bool, snap *snapshot, res *PassResult) time.Time {
	storeErr := false
	r.failLogged = 0
	r.changeLogged, r.changeInfo = [3]int{}, [3]int{}
	defer func() {
		r.storeDone(storeErr, now)
		if n := r.failLogged - maxFailLogs; n > 0 {
			r.log.Warn("more rules failed; not logged one by one", "count", n)
		}
		r.logChangesSummary()
		r.trimScratch()
	}()
	if !full && r.rereadWanted && (r.rereadAt.IsZero() || now.Sub(r.rereadAt) >= rereadAfterStoreError) {
		// The store failed since the last complete read: read every row
		// once it is back (at most every rereadAfterStoreError while it
		// keeps failing). Revisions make this a safety net, not a need.
		full = true
	}
	if snap != nil {
		full = true // read off the loop; read swaps it in
	}
	// Early announcements whose grace ended (their commit never showed
	// up, or failed) are compared again: orphans now, unless desired.
	if expired := r.early.expire(now); len(expired) > 0 {
		for _, m := range expired {
			r.markDirty(m)
		}
		r.quiet.ok = false
	}
	if full {
		res.Full = true
		r.rereadAt = now
	}

	// Desired state. Unknown is not empty: on a read error, keep working
	// from the last rows read (they still expire on time) but withdraw no
	// orphans and write nothing to the store.
	storeOK := true
	changed, all, err := r.cache.read(ctx, r.d, now, full, snap, r.markDirty, r.forget)
	switch {
	case err == nil:
		if all {
			r.fullDiff = true
		}
		if full {
			r.rereadWanted = false
		}
	case !r.cache.ok:
		storeErr = true
		r.rereadWanted = true
		res.Errors++
		res.Err = "desired state unreadable: " + err.Error()
		res.partial = true
		r.log.Warn("cannot read desired state; doing nothing", "err", err)
		return time.Time{}
	default:
		storeErr, storeOK = true, false
		r.rereadWanted = true
		res.Errors++
		res.Err = "desired state unreadable, working from the last rows read: " + err.Error()
		res.partial = true
		r.log.Warn("cannot read desired state; using the last rows read, withdrawing no orphans", "err", err)
	}

	// Nothing changed since a pass that found nothing to do: the same plan
	// would come out, so skip the walk (see quiet).
	gen, hasGen := r.generation()
	if !full && !changed && storeOK && hasGen && r.quiet.ok && r.quiet.gen == gen &&
		(r.quiet.nextExpiry.IsZero() || now.Before(r.quiet.nextExpiry)) && r.nextRetry(now).IsZero() {
		started := res.Started
		*res = r.quiet.res
		res.Started, res.Skipped, res.Full = started, true, false
		return r.quiet.nextExpiry
	}
	r.quiet.ok = false

	// What may have changed: the mirror's dirty Matches and the rules due
	// to expire now (the rows read are marked by read).
	tracker, tracked := r.s.(DirtyTracker)
	if tracked {
		if _, complete := tracker.DrainDirty(r.markDirty); !complete {
			r.fullDiff = true
		}
	} else {
		r.fullDiff = true
	}
	r.cache.due(now, r.markDirty)
	nextExpiry := r.cache.nextExpiry()

	if r.checkRestart() {
		r.fullDiff = true
		r.restarted = true
	}

	// Actual state. Not initialised is not empty: do nothing blindly; the
	// speaker's Changes wakes us once the mirror is ready.
	var (
		st    statusBatch
		p     Plan
		look  lookFunc
		empty bool
	)
	// adopt takes a desired path found in the RIB as wanted.
	adopt := func(it Item, rw *row) {
		if rw == nil {
			rw = r.cache.byID[it.ID]
		}
		if rw != nil {
			if rw.flags&rowAdopted == 0 {
				rw.flags |= rowAdopted
				r.cache.adopted++
			}
			// Seen in the RIB as it asks (drift counts, see announce).
			rw.flags |= rowSeen
		}
		if len(r.attempts) > 0 {
			delete(r.attempts, it.Match)
		}
		// flush writes only what differs from the row's status: do not
		// grow the batch by 100,000 unchanged statuses on a full
		// comparison.
		if rw == nil || rw.status() != (ruleStatus{announced: true}) {
			st.set(it.ID, true, "")
		}
	}
	fullDiff := r.fullDiff
	if fullDiff {
		var (
			paths = r.s.Paths
			size  func() int
			gen   func() uint64
		)
		if tracked {
			look, size = tracker.Path, tracker.Len
			if g, ok := r.s.(Generationer); ok {
				gen = g.Generation
			}
		} else {
			clear(r.actual)
			if !r.s.Paths(func(m flowspec.Match, a flowspec.Action) { r.actual[m] = a }) {
				res.Err, res.partial = joinErr(res.Err, "RIB mirror not initialised"), true
				r.log.Debug("RIB mirror not initialised; waiting")
				return nextExpiry
			}
			look = func(m flowspec.Match) (flowspec.Action, bool, bool) {
				a, in := r.actual[m]
				return a, in, true
			}
			paths = func(fn func(flowspec.Match, flowspec.Action)) bool {
				for m, a := range r.actual {
					fn(m, a)
				}
				return true
			}
		}
		var ok bool
		if p, ok = r.fullWalk(now, look, paths, size, gen, adopt); !ok {
			res.Err, res.partial = joinErr(res.Err, "RIB mirror not initialised"), true
			r.log.Debug("RIB mirror not initialised; waiting")
			return nextExpiry
		}
		if tracked {
			empty = tracker.Len() == 0
		} else {
			empty = len(r.actual) == 0
		}
	} else {
		desired, actual, ok := r.dirtyState(tracker, now)
		if !ok {
			r.fullDiff = true
			res.Err, res.partial = joinErr(res.Err, "RIB mirror not initialised"), true
			r.log.Debug("RIB mirror not initialised; waiting")
			return nextExpiry
		}
		res.Incremental = true
		empty = tracker.Len() == 0
		look = func(m flowspec.Match) (flowspec.Action, bool, bool) {
			a, in := actual[m]
			return a, in, true
		}
		p = r.plan(r.v, desired, actual)
		for _, it := range p.Adopt {
			adopt(it, nil)
		}
		p.Adopt = nil
	}
	restarted := r.restarted
	r.restarted = false
	v := &r.v

	for m, e := range r.expects {
		a, present, _ := look(m)
		if e.met(a, present) || !now.Before(e.deadline) {
			delete(r.expects, m)
		}
	}

	r.prune(p)
	res.Orphans = len(p.Withdraw)
	budget := r.pace.begin(r.cfg.AnnounceRate, restarted || r.reannouncing, empty, r.peersUp(), len(p.Add)+len(r.queue), now)
	// Not paced any more: the queued additions are compared again by the
	// next pass (marked dirty below, after this pass's dirty set is
	// cleared), which is due at once.
	var dropped []flowspec.Match
	if budget < 0 && len(r.queue) > 0 {
		dropped = r.queue
		r.queue, r.queued = nil, nil
		r.pace.next = now
	}

	statuses := func(m flowspec.Match) {
		for _, bad := range v.invalid[m] {
			st.set(bad.id, false, bad.err.Error())
		}
		for _, s := range v.shadowed[m] {
			st.set(s.id, false, s.err())
		}
	}
	if fullDiff {
		for m := range v.invalid {
			statuses(m)
		}
		for m := range v.shadowed {
			statuses(m)
		}
	} else {
		for m := range r.dirty {
			statuses(m)
		}
	}
	res.Adopted = r.cache.adopted

	// Every Match this plan changes (or cannot change yet) is compared
	// again by the next pass: what settles it may not mark it dirty (a
	// backoff expiring, the store coming back, the orphan cap).
	clear(r.dirty)
	r.fullDiff = false
	// Paced additions wait in the storm queue instead (storm.go).
	carry := [][]Item{p.Add, p.Update, p.Withdraw, p.Retire, p.Finish}
	if budget >= 0 {
		carry = carry[1:]
	}
	for _, items := range carry {
		for _, it := range items {
			r.dirty[it.Match] = struct{}{}
		}
	}
	for _, m := range dropped {
		r.dirty[m] = struct{}{}
	}

	// Rules whose path the mirror already shows gone become final (store
	// writes) while this pass talks to the speaker: the two touch
	// different rules, and an expiry wave no longer holds the loop for
	// the length of its commits (it did for half of a 10,000 rules/s
	// churn). The results are taken below, in this same pass.
	var finDone chan []error
	if storeOK && len(p.Finish) > 0 {
		finDone = make(chan []error, 1) // never blocks: an early return drops the result
		items := p.Finish
		go func() { finDone <- r.finish(ctx, items) }()
	}

	// Retiring rules first, then make before break: everything desired,
	// then orphans (see storm.go for the order and the pacing).
	r.withdrawAll(ctx, p.Retire, "retire", v, now, res, &st)
	adds := p.Add
	if budget >= 0 {
		r.enqueue(p.Add)
		present := func(m flowspec.Match) (bool, bool) {
			_, in := r.actual[m]
			return in, true
		}
		if tracked {
			present = func(m flowspec.Match) (bool, bool) {
				_, in, ok := tracker.Path(m)
				return in, ok
			}
		}
		adds, _ = r.dequeue(budget, present, make([]Item, 0, min(budget, len(r.queue))))
		for _, it := range adds {
			r.dirty[it.Match] = struct{}{}
		}
		res.Pending += len(r.queue)
	}
	r.announceAll(ctx, adds, "add", now, res, &st)
	r.pace.spent(len(adds), len(r.queue), r.cfg.AnnounceRate, r.now())
	if len(r.queue) == 0 {
		r.reannouncing = false
	}
	r.announceAll(ctx, p.Update, "update", now, res, &st)
	switch {
	case !storeOK || len(p.Withdraw) == 0:
	case p.Capped:
		res.Capped = true
		res.Err = joinErr(res.Err, "orphan cap: withdrew none of the orphans")
		r.log.Warn("too many orphan paths; withdrawing none of them",
			"orphans", len(p.Withdraw), "max_withdraw_per_pass", r.cfg.MaxWithdrawPerPass)
	default:
		r.withdrawAll(ctx, p.Withdraw, "orphan", v, now, res, &st)
	}
	if ctx.Err() != nil {
		res.Err, res.partial = joinErr(res.Err, "interrupted: "+ctx.Err().Error()), true
		return nextExpiry
	}

	// A retiring rule becomes final only now that the mirror shows its
	// path gone; and only with the store readable, never in a dry run.
	if storeOK {
		var errs []error
		if finDone != nil {
			errs = <-finDone
		}
		for i, it := range p.Finish {
			delete(r.attempts, it.Match)
			if r.cfg.DryRun {
				res.Finished++
				r.log.Debug("would finish", "rule", it.ID, "state", it.State)
				continue
			}
			if err := errs[i]; err != nil {
				storeErr = true
				res.Errors++
				r.log.Warn("cannot finish rule", "rule", it.ID, "state", it.State, "err", err)
				continue
			}
			res.Finished++
			if it.State == store.Expired {
				r.recordExpired(it.ID)
			}
			r.logChange(changeFinished, "rule finished", "rule", it.ID, "state", it.State, "family", it.Match.Family())
		}
	}

	if !r.cfg.DryRun {
		unwritten := !storeOK
		if storeOK {
			if _, err := st.flush(ctx, r.d, &r.cache, r.now); err != nil {
				storeErr, unwritten = true, true
				res.Errors++
				r.log.Warn("cannot write rule status", "err", err)
			}
		}
		if unwritten {
			// Compare their Matches again, so that the next pass sets
			// the statuses that were not written.
			for id, want := range st.want {
				if row, ok := r.cache.byID[id]; ok && row.status() != want {
					r.markDirty(row.Match)
				}
			}
		}
	}
	if storeOK && !storeErr && res.Errors == 0 && res.Pending == 0 && (r.cfg.DryRun || !res.Changed()) &&
		len(r.expects) == 0 && r.nextRetry(now).IsZero() {
		r.quiet.ok, r.quiet.gen, r.quiet.nextExpiry, r.quiet.res = true, gen, nextExpiry, *res
	}
	return nextExpiry
}

// bigScratch is the size past which the reconciler's working maps are
// dropped rather than kept for the next pass: Go maps never shrink, and
// after a burst of 100,000 changes these would hold about 300 B per path
// of empty slots (a third of its own memory) until the process ends.
const bigScratch = 4096

// trimScratch gives back the working maps a large pass grew: the dirty-only
// comparison's maps always (they are rebuilt by the next pass that needs
// them), and the expectation and dirty sets once they are empty again.
func (r *Reconciler) trimScratch() {
	r.cache.compactRows()
	if len(r.dw) > bigScratch || len(r.da) > bigScratch {
		r.dw, r.da = nil, nil
	}
	r.expectsPeak = max(r.expectsPeak, len(r.expects))
	if len(r.expects) == 0 && r.expectsPeak > bigScratch {
		r.expects, r.expectsPeak = make(map[flowspec.Match]expect), 0
	}
	r.dirtyPeak = max(r.dirtyPeak, len(r.dirty))
	if len(r.dirty) == 0 && r.dirtyPeak > bigScratch {
		r.dirty, r.dirtyPeak = make(map[flowspec.Match]struct{}), 0
	}
}

// finishParallel bounds the Finish calls in flight when the store has no
// FinishMany: each is its own conditional update, and the store commits
// concurrent writes together (SQLite's group committer).
const finishParallel = 32

// BatchFinisher is optionally implemented by a Desired that finishes many
// rules in few transactions (store.Store does). An expiry burst then costs
// a commit per 5,000 rules instead of one per rule: with one commit per
// rule a pass that finishes 25,000 expired rules took 12 s, during which
// every one of them stayed in the reconciler's view.
type BatchFinisher interface {
	// FinishMany finishes each item as Desired.Finish does and returns
	// each one's error in order; err is set if the writes failed as a
	// whole (each unwritten item's error is set too).
	FinishMany(ctx context.Context, items []store.FinishItem) (errs []error, err error)
}

// finish makes the rules of items final and returns each one's error; in
// a dry run it does nothing.
func (r *Reconciler) finish(ctx context.Context, items []Item) []error {
	errs := make([]error, len(items))
	bf, batch := r.d.(BatchFinisher)
	switch {
	case r.cfg.DryRun || len(items) == 0:
	case len(items) == 1:
		errs[0] = r.d.Finish(ctx, items[0].ID, items[0].State)
	case batch:
		in := make([]store.FinishItem, len(items))
		for i, it := range items {
			in[i] = store.FinishItem{ID: it.ID, State: it.State}
		}
		if got, _ := bf.FinishMany(ctx, in); len(got) == len(items) { // each item's error says it all
			errs = got
		} else {
			for i := range errs {
				errs[i] = errors.New("reconcile: FinishMany returned a result per item for a different number of items")
			}
		}
	default:
		var wg sync.WaitGroup
		sem := make(chan struct{}, finishParallel)
		for i, it := range items {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				errs[i] = r.d.Finish(ctx, it.ID, it.State)
			})
		}
		wg.Wait()
	}
	return errs
}

// quiet remembers a pass that found nothing to do. The plan is a function
// of the desired rows, the clock (expiry), the mirror and the backoff state
// only; while the store's revision and the mirror's generation stay the
// same, no expiry comes due and nothing waits for a retry, the next pass
// would find nothing to do either, and skips the walk over both sides. A
// full pass (the periodic resync) never skips: it re-reads every row.
type quiet struct {
	ok         bool
	gen        uint64
	nextExpiry time.Time
	res        PassResult
}

// generation reads the speaker's mirror generation, if it has one.
func (r *Reconciler) generation() (uint64, bool) {
	g, ok := r.s.(Generationer)
	if !ok {
		return 0, false
	}
	return g.Generation(), true
}

// plan is Diff plus what Diff cannot know from two maps: the Matches of
// invalid rules are held (not orphans), every retiring row of a gone Match
// finishes, and the orphan cap. desired is v.want, or the part of it that
// a dirty-only pass compares (and actual the same part of the mirror).
func (r *Reconciler) plan(v view, desired map[flowspec.Match]Want, actual map[flowspec.Match]flowspec.Action) Plan {
	p := Diff(desired, actual)
	p.Withdraw = r.early.spare(p.Withdraw)
	if len(v.hold) > 0 {
		p.Withdraw = slices.DeleteFunc(p.Withdraw, func(it Item) bool {
			_, held := v.hold[it.Match]
			return held
		})
	}
	if len(p.Finish) > 0 {
		fin := make([]Item, 0, len(p.Finish))
		for _, it := range p.Finish {
			fin = append(fin, v.retiring[it.Match]...)
		}
		p.Finish = fin
	}
	p.Capped = r.cfg.MaxWithdrawPerPass > 0 && len(p.Withdraw) > r.cfg.MaxWithdrawPerPass
	return p
}

// prune forgets per-Match state that no longer applies, so that memory
// follows the desired and actual sets.
func (r *Reconciler) prune(p Plan) {
	if len(r.attempts) == 0 {
		return
	}
	var orphans map[flowspec.Match]struct{}
	if len(p.Withdraw) > 0 {
		orphans = make(map[flowspec.Match]struct{}, len(p.Withdraw))
		for _, it := range p.Withdraw {
			orphans[it.Match] = struct{}{}
		}
	}
	for m := range r.attempts {
		_, wanted := r.wantOf(m)
		_, orphan := orphans[m]
		if !wanted && !orphan {
			delete(r.attempts, m)
		}
	}
}

// waiting reports whether a request for m must not be made this pass: it
// failed terminally, it is backing off, or the speaker accepted it and the
// mirror has not caught up yet.
func (r *Reconciler) waiting(m flowspec.Match, o op, a flowspec.Action, now time.Time, res *PassResult) bool {
	if at, ok := r.attempts[m]; ok && at.same(o, a) {
		if at.terminal {
			return true
		}
		if now.Before(at.next) {
			res.Pending++
			return true
		}
	}
	if e, ok := r.expects[m]; ok && e.op == o && (o != opAnnounce || e.action == a) {
		res.Pending++
		return true
	}
	return false
}

// failed records a failed request: terminal ones are not retried while the
// request stays the same; transient ones back off exponentially.
func (r *Reconciler) failed(m flowspec.Match, o op, a flowspec.Action, err error, now time.Time) (retryIn time.Duration, terminal bool) {
	at, ok := r.attempts[m]
	if !ok || !at.same(o, a) {
		at = &attempt{op: o, action: a}
		r.attempts[m] = at
	}
	at.failures++
	if IsTerminal(err) {
		at.terminal = true
		return 0, true
	}
	retryIn = backoff{base: r.cfg.RetryBase, max: r.cfg.RetryMax}.delay(at.failures)
	at.next = now.Add(retryIn)
	return retryIn, false
}

// announceBatch is how many rules one Announce call carries, and
// announceParallel how many such calls a pass keeps in flight. GoBGP takes
// a batch in one step of its server loop and packs NLRIs with the same
// attributes into one UPDATE; with two batches in flight its loop always
// has the next one queued while the reconciler prepares or books the
// other. The items of one pass have distinct Matches, so their order does
// not matter; all of them complete before the pass goes on (make before
// break).
const (
	announceBatch    = 2000
	announceParallel = 2
)

// announceAll announces items (adds or updates, kind says which): the
// batches go out concurrently, the bookkeeping runs on the loop goroutine
// in item order.
func (r *Reconciler) announceAll(ctx context.Context, items []Item, kind string, now time.Time, res *PassResult, st *statusBatch) {
	todo := items[:0:0]
	for _, it := range items {
		if r.waiting(it.Match, opAnnounce, it.Action, now, res) {
			continue
		}
		if r.cfg.DryRun {
			if kind == "update" {
				res.Updated++
			} else {
				res.Added++
			}
			r.log.Debug("would announce", "rule", it.ID, "op", kind, "family", it.Match.Family(), "text", it.Rule())
			continue
		}
		todo = append(todo, it)
	}
	if len(todo) == 0 {
		return
	}
	errs := make([]error, len(todo))
	done := make([]bool, len(todo))
	batches := (len(todo) + announceBatch - 1) / announceBatch
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(announceParallel, batches) {
		wg.Go(func() {
			for {
				b := int(next.Add(1) - 1)
				if b >= batches || ctx.Err() != nil {
					return
				}
				lo, hi := b*announceBatch, min((b+1)*announceBatch, len(todo))
				rules := make([]flowspec.Rule, hi-lo)
				for i := range rules {
					rules[i] = todo[lo+i].Rule()
				}
				copy(errs[lo:hi], r.s.Announce(ctx, rules))
				for i := lo; i < hi; i++ {
					done[i] = true
				}
			}
		})
	}
	wg.Wait()
	for i, it := range todo {
		if !done[i] {
			continue // interrupted: the caller reports it
		}
		r.announced(it, kind, errs[i], now, res, st)
	}
}

// announced does the bookkeeping of one Announce call that returned err.
func (r *Reconciler) announced(it Item, kind string, err error, now time.Time, res *PassResult, st *statusBatch) {
	count := &res.Added
	if kind == "update" {
		count = &res.Updated
	}
	if err != nil {
		res.Errors++
		st.set(it.ID, false, err.Error())
		retryIn, term := r.failed(it.Match, opAnnounce, it.Action, err, now)
		switch {
		case !r.logFailure():
		case term:
			r.log.Error("rule rejected; not retrying", "rule", it.ID, "op", kind, "family", it.Match.Family(), "text", it.Rule(), "err", err)
		default:
			r.log.Warn("announce failed; will retry", "rule", it.ID, "op", kind, "family", it.Match.Family(), "text", it.Rule(), "retry_in", retryIn, "err", err)
		}
		return
	}
	*count++
	delete(r.attempts, it.Match)
	r.expects[it.Match] = expect{op: opAnnounce, action: it.Action, deadline: now.Add(r.cfg.SettleTimeout)}
	st.set(it.ID, true, "")
	if kind == "add" && r.reannouncing {
		r.reannounced.Add(1)
		kind = "reannounce"
	}
	// rowSeen: this row's path was seen in the RIB with the Action it
	// asks for (an Update carries that Action).
	if rw := r.cache.byID[it.ID]; rw != nil && rw.flags&rowSeen != 0 {
		switch kind {
		case "add":
			r.readded.Add(1)
			kind = "readd"
		case "update":
			r.replaced.Add(1)
			kind = "replace"
		}
	}
	r.recorder().Announced(it.Match.Family(), kind)
	r.logChange(changeAnnounced, "rule announced", "rule", it.ID, "op", kind, "family", it.Match.Family(), "text", it.Rule())
}

// withdrawAll withdraws items (kind: "retire" or "orphan") in one call to
// the speaker, then does the bookkeeping of each in order.
func (r *Reconciler) withdrawAll(ctx context.Context, items []Item, kind string, v *view, now time.Time, res *PassResult, st *statusBatch) {
	todo := items[:0:0]
	for _, it := range items {
		if r.waiting(it.Match, opWithdraw, flowspec.Action{}, now, res) {
			continue
		}
		if r.cfg.DryRun {
			res.Withdrawn++
			r.log.Debug("would withdraw", "rule", it.ID, "op", kind, "family", it.Match.Family(), "text", it.Rule())
			continue
		}
		todo = append(todo, it)
	}
	if len(todo) == 0 || ctx.Err() != nil {
		return
	}
	ms := make([]flowspec.Match, len(todo))
	for i, it := range todo {
		ms[i] = it.Match
	}
	errs := r.s.Withdraw(ctx, ms)
	for i, it := range todo {
		r.withdrawn(it, kind, errs[i], v, now, res, st)
	}
}

// withdrawn does the bookkeeping of one withdrawal that returned err.
func (r *Reconciler) withdrawn(it Item, kind string, err error, v *view, now time.Time, res *PassResult, st *statusBatch) {
	if err != nil {
		res.Errors++
		for _, rr := range v.retiring[it.Match] {
			st.set(rr.ID, true, err.Error())
		}
		retryIn, term := r.failed(it.Match, opWithdraw, flowspec.Action{}, err, now)
		switch {
		case !r.logFailure():
		case term:
			r.log.Error("withdraw rejected; not retrying", "rule", it.ID, "op", kind, "family", it.Match.Family(), "text", it.Rule(), "err", err)
		default:
			r.log.Warn("withdraw failed; will retry", "rule", it.ID, "op", kind, "family", it.Match.Family(), "text", it.Rule(), "retry_in", retryIn, "err", err)
		}
		return
	}
	res.Withdrawn++
	delete(r.attempts, it.Match)
	r.unsee(it.Match)
	r.expects[it.Match] = expect{op: opWithdraw, deadline: now.Add(r.cfg.SettleTimeout)}
	if kind == "orphan" {
		r.orphaned.Add(1)
	}
	r.recorder().Withdrawn(it.Match.Family(), kind)
	r.logChange(changeWithdrawn, "rule withdrawn", "rule", it.ID, "op", kind, "family", it.Match.Family(), "text", it.Rule())
}

// maxFailLogs bounds the per-rule failure lines of one pass: when the
// speaker is down every rule fails, and one line per rule per retry would
// bury everything else.
const maxFailLogs = 20

// maxChangeLogs bounds the per-rule Info lines of one pass ("rule
// announced", "rule withdrawn", "rule finished"): a bulk load of 100,000
// rules logs the first ones, then the rest at Debug and one summary line.
const maxChangeLogs = 100

// Kinds of rule change logged (index into Reconciler.changeLogged).
const (
	changeAnnounced = iota
	changeWithdrawn
	changeFinished
)

// logChange logs one rule change: at Info for the first maxChangeLogs
// changes of the pass, at Debug after that (the rule text is formatted
// only if the line is written).
func (r *Reconciler) logChange(kind int, msg string, args ...any) {
	r.changeLogged[kind]++
	if r.changeLogged[0]+r.changeLogged[1]+r.changeLogged[2] <= maxChangeLogs {
		r.changeInfo[kind]++
		r.log.Info(msg, args...)
	} else if r.log.IsDebug() {
		r.log.Debug(msg, args...)
	}
}

// logChangesSummary writes the Info line for the changes of this pass
// that logChange did not write at Info.
func (r *Reconciler) logChangesSummary() {
	c, in := r.changeLogged, r.changeInfo
	more := c[0] + c[1] + c[2] - in[0] - in[1] - in[2]
	if more <= 0 {
		return
	}
	r.log.Info(fmt.Sprintf("and %d more rule changes (logged at debug level)", more),
		"announced", c[changeAnnounced]-in[changeAnnounced],
		"withdrawn", c[changeWithdrawn]-in[changeWithdrawn],
		"finished", c[changeFinished]-in[changeFinished])
}

// logFailure reports whether this pass may log one more rule failure.
func (r *Reconciler) logFailure() bool {
	r.failLogged++
	return r.failLogged <= maxFailLogs
}

// storeDone updates the backoff for store errors (reads and writes): the
// level-triggered pass repeats whatever failed once the retry timer fires.
func (r *Reconciler) storeDone(failed bool, now time.Time) {
	if !failed {
		r.storeFail, r.storeNext = 0, time.Time{}
		return
	}
	r.storeFail++
	r.storeNext = now.Add(backoff{base: r.cfg.RetryBase, max: r.cfg.RetryMax}.delay(r.storeFail))
}

// nextRetry is when the loop must wake up for a backoff or an expectation
// that may time out; zero if nothing waits.
func (r *Reconciler) nextRetry(now time.Time) time.Time {
	var t time.Time
	for _, a := range r.attempts {
		if !a.terminal {
			t = earliest(t, a.next)
		}
	}
	for _, e := range r.expects {
		t = earliest(t, e.deadline)
	}
	if r.storeFail > 0 {
		t = earliest(t, r.storeNext)
	}
	t = earliest(t, r.pace.next)
	t = earliest(t, r.early.next())
	if !t.IsZero() && t.Before(now) {
		t = now
	}
	return t
}

func joinErr(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// unsee clears rowSeen on the rows of m: its path was withdrawn.
func (r *Reconciler) unsee(m flowspec.Match) {
	r.cache.byMatch[m].each(func(id int64) {
		if rw := r.cache.byID[id]; rw != nil {
			rw.flags &^= rowSeen
		}
	})
}
