package reconcile

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// runPass runs one pass, records and logs its result, and returns when the
// loop must wake up next for expiry and for retries (zero: no need). snap
// is a complete read made off the loop (nil: none); a pass with one is a
// full pass.
func (r *Reconciler) runPass(ctx context.Context, full bool, snap *snapshot) (nextExpiry, nextRetry time.Time) {
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
		"capped", res.Capped, "dry_run", res.DryRun, "duration", res.Duration, "error", res.Err)
	return nextExpiry, nextRetry
}

// pass does one reconcile and fills res. It returns the nearest future
// expiry among desired rules. It is the named parts in turn:
//
//	observe   the source reads what changed in the store, the mirror says
//	          which paths changed, expiry says which rules came due
//	compare   the planner compares them (every Match, or the dirty ones)
//	schedule  the work queue keeps what must wait and paces storms
//	apply     the speaker calls, then the store's final states
//	report    the status reporter writes what the pass observed (what
//	          the comparison saw while apply runs, apply's own after it)
func (r *Reconciler) pass(ctx context.Context, now time.Time, full bool, snap *snapshot, res *PassResult) time.Time {
	storeErr := false
	r.logs.begin()
	defer func() {
		r.storeDone(storeErr, now)
		r.logs.end(r.log)
		r.trim()
	}()

	ob, proceed := r.observe(ctx, now, full, snap, res)
	storeErr = !ob.storeOK
	if !proceed {
		return ob.nextExpiry
	}
	var st statusBatch
	p, empty, ok := r.compare(now, res, &st)
	if !ok {
		return ob.nextExpiry
	}
	adds := r.schedule(p, empty, now, res)
	r.logs.expect(len(adds) + len(p.Update) + len(p.Withdraw) + len(p.Retire) + len(p.Finish))
	// What the comparison observed (paths adopted, invalid and shadowed
	// rules) is written while the speaker takes this pass's changes, not
	// after them: during a bulk load those are the statuses of the last
	// pass's 10,000s of announcements, and GoBGP's server loop would sit
	// idle for the length of their commits. The two sets of statuses
	// name different rules (an adopted path needs no change), and apply's
	// own (the speaker's refusals) are written after it, below.
	observed := r.startReport(ctx, &st, ob.storeOK)
	var applied statusBatch
	ok, finishErr := r.apply(ctx, p, adds, ob.storeOK, now, res, &applied)
	if r.endReport(observed, &st, ob.storeOK, res) {
		storeErr = true
	}
	storeErr = storeErr || finishErr
	if !ok {
		return ob.nextExpiry
	}
	if r.report(ctx, &applied, ob.storeOK, res) {
		storeErr = true
	}
	if ob.storeOK && !storeErr && res.Errors == 0 && res.Pending == 0 && (r.cfg.DryRun || !res.Changed()) &&
		r.work.idle() && r.nextRetry(now).IsZero() {
		r.quiet.ok, r.quiet.gen, r.quiet.nextExpiry, r.quiet.res = true, ob.gen, ob.nextExpiry, *res
	}
	return ob.nextExpiry
}

// observation is what observe found out for the rest of the pass.
type observation struct {
	// storeOK is false when desired state could not be read: the pass
	// works from the last rows read, withdraws no orphans and writes
	// nothing to the store.
	storeOK    bool
	gen        uint64    // the mirror's generation, read before the comparison
	nextExpiry time.Time // the nearest future ExpiresAt
}

// observe brings the source up to date and collects the Matches to compare:
// the rows read, the mirror's dirty Matches, the rules due to expire and the
// early announcements whose grace ended. proceed is false when the pass
// must stop here: nothing could be read, or nothing changed since a pass
// that found nothing to do (then res repeats that pass's counts).
func (r *Reconciler) observe(ctx context.Context, now time.Time, full bool, snap *snapshot, res *PassResult) (ob observation, proceed bool) {
	if !full && r.rereadWanted && (r.rereadAt.IsZero() || now.Sub(r.rereadAt) >= rereadAfterStoreError) {
		// The store failed since the last complete read: read every row
		// once it is back (at most every rereadAfterStoreError while it
		// keeps failing). Revisions make this a safety net, not a need.
		full = true
	}
	if snap != nil {
		full = true // read off the loop; read swaps it in
	}
	// Early announcements and withdrawals whose grace ended (settled, or
	// their commit never showed up) are compared again: an announcement
	// is an orphan now unless desired, a withdrawn rule still desired
	// (its commit failed) is announced again, at once. What a pass asked
	// of the speaker for that Match before the early change landed no
	// longer says what the RIB holds: the work queue forgets it, or it
	// would hold the change back as in flight until its settle timeout.
	// A path withdrawn early went by our own hand: announcing it again
	// repairs no drift.
	// An announcement whose write settled applied was on the speaker with
	// its rule's action, whether or not a pass saw it there (its pass
	// may come after EarlySettleWait): once the rows are read, its rule
	// counts as seen, so a path removed behind our back meanwhile is
	// re-added as drift, not as a first addition.
	var seen []ended
	for _, set := range []*earlySet{&r.early, &r.leaving} {
		if expired := set.expire(now); len(expired) > 0 {
			for _, x := range expired {
				r.plan.markDirty(x.m)
				r.work.forget(x.m)
				switch {
				case set == &r.leaving:
					r.unsee(x.m)
				case x.applied:
					seen = append(seen, x)
				}
			}
			r.quiet.ok = false
		}
	}
	defer func() {
		for _, x := range seen {
			r.seeEarly(x.m, x.action)
		}
	}()
	if full {
		res.Full = true
		r.rereadAt = now
	}

	// Unknown is not empty: on a read error, keep working from the last
	// rows read (they still expire on time) but withdraw no orphans and
	// write nothing to the store.
	ob.storeOK = true
	drifted := r.src.drifted
	changed, all, err := r.src.read(ctx, r.d, now, full, snap, r.plan.markDirty)
	if r.src.drifted != drifted {
		r.log.Warn("the reconciler's copy of the desired rules differed from the store at the periodic resync; every rule was read again and the routers follow the store. Expected only if the database was changed outside ribkeeper (edited by hand, or a backup restored under a running daemon); otherwise report it with this log")
	}
	switch {
	case err == nil:
		if all {
			r.plan.fullDiff = true
		}
		if full {
			r.rereadWanted = false
		}
	case !r.src.ok:
		ob.storeOK, r.rereadWanted = false, true
		res.Errors++
		res.Err = "desired state unreadable: " + err.Error()
		res.partial = true
		r.log.Warn("cannot read desired state; doing nothing", "error", err)
		return ob, false
	default:
		ob.storeOK, r.rereadWanted = false, true
		res.Errors++
		res.Err = "desired state unreadable, working from the last rows read: " + err.Error()
		res.partial = true
		r.log.Warn("cannot read desired state; using the last rows read, withdrawing no orphans", "error", err)
	}

	// Nothing changed since a pass that found nothing to do: the same plan
	// would come out, so skip the comparison (see quiet).
	ob.gen = r.s.Generation()
	if !full && !changed && ob.storeOK && r.quiet.ok && r.quiet.gen == ob.gen &&
		(r.quiet.nextExpiry.IsZero() || now.Before(r.quiet.nextExpiry)) && r.nextRetry(now).IsZero() {
		started := res.Started
		*res = r.quiet.res
		res.Started, res.Skipped, res.Full = started, true, false
		ob.nextExpiry = r.quiet.nextExpiry
		return ob, false
	}
	r.quiet.ok = false

	if _, complete := r.s.DrainDirty(r.plan.markDirty); !complete {
		r.plan.fullDiff = true
	}
	r.src.due(now, r.plan.markDirty)
	ob.nextExpiry = r.src.nextExpiry()
	if r.checkRestart() {
		r.plan.fullDiff = true
		r.restarted = true
	}
	return ob, true
}

// compare runs the planner over every Match or over the dirty ones, and
// reports to st what it observed: adopted paths, invalid and shadowed
// rules. empty says the mirror holds no path. ok is false while the mirror
// is not initialised: not initialised is not empty, and nothing is done
// blindly (the speaker's Changes wakes the loop once it is ready).
func (r *Reconciler) compare(now time.Time, res *PassResult, st *statusBatch) (p Plan, empty, ok bool) {
	adopt := func(it Item, rw *row) { r.adopt(it, rw, st) }
	full := r.plan.fullDiff
	if full {
		p, ok = r.plan.full(now, r.s.Path, r.s.Paths, r.s.Len, r.s.Generation, adopt)
	} else {
		for m := range r.work.expects {
			r.plan.markDirty(m)
		}
		p, ok = r.plan.dirtyOnly(now, r.s.Path, adopt)
		res.Incremental = ok
	}
	if !ok {
		r.plan.fullDiff = true
		res.Err, res.partial = joinErr(res.Err, "RIB mirror not initialised"), true
		r.log.Debug("RIB mirror not initialised; waiting")
		return Plan{}, false, false
	}
	p.limit(&r.early, &r.leaving, r.cfg.MaxWithdrawPerPass)
	r.reportInvalid(full, st)
	res.Adopted = r.src.adopted
	return p, r.s.Len() == 0, true
}

// adopt takes a desired path found in the RIB as wanted: observed
// announced, the status's one source of "announced".
func (r *Reconciler) adopt(it Item, rw *row, st *statusBatch) {
	if rw == nil {
		rw = r.src.byID.get(it.ID)
	}
	if rw != nil {
		if rw.flags&rowAdopted == 0 {
			rw.flags |= rowAdopted
			r.src.adopted++
		}
		// Seen in the RIB as it asks (drift counts, see announced).
		rw.flags |= rowSeen
	}
	r.work.done(it.Match)
	// flush writes only what differs from the row's status: do not grow
	// the batch by 100,000 unchanged statuses on a full comparison.
	if rw == nil || rw.status() != (ruleStatus{announced: true}) {
		st.set(it.ID, true, "")
	}
}

// reportInvalid reports the invalid and shadowed rules of the Matches just
// compared: every Match after a full comparison, the dirty ones otherwise.
func (r *Reconciler) reportInvalid(full bool, st *statusBatch) {
	v := &r.plan.v
	statuses := func(m flowspec.Match) {
		for _, bad := range v.invalid[m] {
			st.set(bad.id, false, bad.err.Error())
		}
		for _, s := range v.shadowed[m] {
			st.set(s.id, false, s.err())
		}
	}
	if !full {
		for m := range r.plan.dirty {
			statuses(m)
		}
		return
	}
	for m := range v.invalid {
		statuses(m)
	}
	for m := range v.shadowed {
		statuses(m)
	}
}

// schedule hands the plan to the work queue. It settles the expectations
// the mirror now shows, forgets what no longer applies, has the next pass
// compare every Match this plan changes (or cannot change yet: what
// settles them — a backoff expiring, the store coming back, the orphan cap
// — may not mark them dirty), and paces the additions of a storm: it
// returns the additions that go to the speaker now.
func (r *Reconciler) schedule(p Plan, empty bool, now time.Time, res *PassResult) (adds []Item) {
	restarted := r.restarted
	r.restarted = false
	r.work.observe(r.s.Path, now)
	r.work.prune(p, r.plan.wanted)
	res.Orphans = len(p.Withdraw)

	q := &r.work
	// The process's first load is no storm (storm.go): a session up
	// meanwhile came up with this process and holds nothing of ours.
	storm := r.isLoaded()
	budget := q.pace.begin(r.cfg.AnnounceRate, storm && (restarted || r.reannouncing), storm && empty, r.peersUp(), len(p.Add)+len(q.queue), now)
	// Not paced any more: the queued additions are compared again by the
	// next pass, which is due at once.
	var dropped []flowspec.Match
	if budget < 0 && len(q.queue) > 0 {
		dropped = q.unpace(now)
	}

	clear(r.plan.dirty)
	r.plan.fullDiff = false
	// Paced additions wait in the storm queue instead (storm.go).
	carry := [][]Item{p.Add, p.Update, p.Withdraw, p.Retire, p.Finish}
	if budget >= 0 {
		carry = carry[1:]
	}
	for _, items := range carry {
		for _, it := range items {
			r.plan.markDirty(it.Match)
		}
	}
	for _, m := range dropped {
		r.plan.markDirty(m)
	}
	if budget < 0 {
		return p.Add
	}
	q.enqueue(p.Add)
	present := func(m flowspec.Match) (bool, bool) {
		_, in, ok := r.s.Path(m)
		return in, ok
	}
	adds, _ = q.dequeue(budget, r.plan.wantOf, present, make([]Item, 0, min(budget, len(q.queue))))
	// A paced addition withdrawn ahead of its commit meanwhile waits for
	// that write to settle (its Match is compared again then).
	adds = r.leaving.spare(adds)
	for _, it := range adds {
		r.plan.markDirty(it.Match)
	}
	res.Pending += len(q.queue)
	return adds
}

// apply makes the plan's changes: retiring rules first, then make before
// break — additions and updates, then orphans (see storm.go for the order)
// — and, once the speaker calls are done, the retiring rules whose path
// the mirror shows gone become final. ok is false when ctx ended; storeErr
// reports a final state the store could not write.
func (r *Reconciler) apply(ctx context.Context, p Plan, adds []Item, storeOK bool, now time.Time, res *PassResult, st *statusBatch) (ok, storeErr bool) {
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

	r.withdrawAll(ctx, p.Retire, "retire", now, res, st)
	r.announceAll(ctx, adds, "add", now, res, st)
	r.work.pace.spent(len(adds), len(r.work.queue), r.cfg.AnnounceRate, r.now())
	if len(r.work.queue) == 0 {
		r.reannouncing = false
	}
	r.announceAll(ctx, p.Update, "update", now, res, st)
	switch {
	case !storeOK || len(p.Withdraw) == 0:
	case p.Capped:
		res.Capped = true
		res.Err = joinErr(res.Err, "orphan cap: withdrew none of the orphans")
		r.log.Warn("too many orphan paths; withdrawing none of them",
			"orphans", len(p.Withdraw), "max_withdraw_per_pass", r.cfg.MaxWithdrawPerPass)
	default:
		r.withdrawAll(ctx, p.Withdraw, "orphan", now, res, st)
	}
	if ctx.Err() != nil {
		res.Err, res.partial = joinErr(res.Err, "interrupted: "+ctx.Err().Error()), true
		return false, false
	}
	if finDone == nil {
		return true, false
	}
	return true, r.finished(p.Finish, <-finDone, res)
}

// finished does the bookkeeping of the final states written for items
// (errs[i] is items[i]'s outcome); failed reports an error.
func (r *Reconciler) finished(items []Item, errs []error, res *PassResult) (failed bool) {
	for i, it := range items {
		r.work.done(it.Match)
		if r.cfg.DryRun {
			res.Finished++
			r.log.Debug("would finish", "rule", it.ID, "state", it.State)
			continue
		}
		if err := errs[i]; err != nil {
			failed = true
			res.Errors++
			r.log.Warn("cannot finish rule", "rule", it.ID, "state", it.State, "error", err)
			continue
		}
		res.Finished++
		if it.State == store.Expired {
			r.recordExpired(it.ID)
		}
		if lv := r.logs.change(r.log, changeFinished); lv != hclog.NoLevel {
			r.log.Log(lv, "rule finished", "rule", it.ID, "state", it.State, "family", it.Match.Family())
		}
	}
	return failed
}

// report writes the statuses of st (the status reporter; in a dry run
// nothing) and waits for them, reading the store's next changes
// meanwhile when there is enough to wait for. When they cannot be
// written, their Matches are compared again by the next pass, which sets
// them. storeErr reports a failed write.
func (r *Reconciler) report(ctx context.Context, st *statusBatch, storeOK bool, res *PassResult) (storeErr bool) {
	w := r.startReport(ctx, st, storeOK)
	if w != nil && w.total >= readAheadMin {
		r.src.prefetch(ctx, r.d)
	}
	return r.endReport(w, st, storeOK, res)
}

// startReport starts the writes of report off the loop and returns them
// under way; nil when nothing is written (a dry run, desired state
// unreadable, nothing to report). endReport waits for them.
func (r *Reconciler) startReport(ctx context.Context, st *statusBatch, storeOK bool) *statusWrites {
	if r.cfg.DryRun || !storeOK || len(st.want) == 0 {
		return nil
	}
	return st.start(ctx, r.d, &r.src, r.now)
}

// endReport waits for the writes startReport started (w, from st) and
// takes their results into the copy.
func (r *Reconciler) endReport(w *statusWrites, st *statusBatch, storeOK bool, res *PassResult) (storeErr bool) {
	if r.cfg.DryRun {
		return false
	}
	unwritten := !storeOK
	if w != nil {
		_, rules, err := w.done(&r.src)
		r.statusCount.Add(uint64(rules))
		if err != nil {
			storeErr, unwritten = true, true
			res.Errors++
			r.log.Warn("cannot write rule status", "error", err)
		}
	}
	if unwritten {
		for id, want := range st.want {
			if row := r.src.byID.get(id); row != nil && row.status() != want {
				r.plan.markDirty(row.Match)
			}
		}
	}
	return storeErr
}

// waiting reports whether the work queue holds the request for m back this
// pass, counting it as pending when it will go later.
func (r *Reconciler) waiting(m flowspec.Match, o op, a flowspec.Action, now time.Time, res *PassResult) bool {
	wait, pending := r.work.waiting(m, o, a, now)
	if pending {
		res.Pending++
	}
	return wait
}

// trim gives back the working memory a large pass grew.
func (r *Reconciler) trim() {
	r.src.compactRows(false)
	r.work.trim()
	r.plan.trim()
}

// rereadAfterStoreError bounds how often the loop re-reads every row while
// the store keeps failing (see observe).
const rereadAfterStoreError = 10 * time.Second

// bigScratch is the size past which the reconciler's working maps are
// dropped rather than kept for the next pass: Go maps never shrink, and
// after a burst of 100,000 changes these would hold about 300 B per path
// of empty slots (a third of its own memory) until the process ends.
const bigScratch = 4096

// finish makes the rules of items final and returns each one's error; in
// a dry run it does nothing. The store writes them a chunk per
// transaction: with one commit per rule a pass that finished 25,000 expired
// rules took 12 s, during which every one of them stayed in the view.
func (r *Reconciler) finish(ctx context.Context, items []Item) []error {
	if r.cfg.DryRun || len(items) == 0 {
		return make([]error, len(items))
	}
	in := make([]store.FinishItem, len(items))
	for i, it := range items {
		in[i] = store.FinishItem{ID: it.ID, State: it.State}
	}
	errs, _ := r.d.FinishMany(ctx, in) // each item's error says it all
	if len(errs) != len(items) {
		errs = make([]error, len(items))
		for i := range errs {
			errs[i] = errors.New("reconcile: FinishMany returned a result per item for a different number of items")
		}
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

// readAheadMin is the work (rules announced, statuses written) a pass
// waits on before it reads the store's next changes meanwhile
// (source.prefetch). A pass of a few rules waits less than the read
// takes, and a single rule's announcement would wait behind it.
const readAheadMin = 1000

// announceAll announces items (adds or updates, kind says which): the
// batches go out concurrently, the bookkeeping runs on the loop goroutine
// in item order.
func (r *Reconciler) announceAll(ctx context.Context, items []Item, kind string, now time.Time, res *PassResult, st *statusBatch) {
	todo := make([]Item, 0, len(items))
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
	r.work.reserve(len(todo))
	st.reserve(len(todo))
	errs := make([]error, len(todo))
	done := make([]bool, len(todo))
	batches := (len(todo) + announceBatch - 1) / announceBatch
	// returned has a value for each batch the speaker took: the loop
	// reads the store's next changes after each (see readAhead).
	returned := make(chan struct{}, batches)
	wait := startEach(batches, announceParallel, func() bool { return ctx.Err() != nil }, func(b int) {
		lo, hi := b*announceBatch, min((b+1)*announceBatch, len(todo))
		rules := make([]flowspec.Rule, hi-lo)
		for i := range rules {
			rules[i] = todo[lo+i].Rule()
		}
		copy(errs[lo:hi], r.s.Announce(ctx, rules))
		for i := lo; i < hi; i++ {
			done[i] = true
		}
		returned <- struct{}{}
	})
	if len(todo) >= readAheadMin {
		r.readAhead(ctx, batches, returned)
	}
	wait()
	for i, it := range todo {
		if !done[i] {
			continue // interrupted: the caller reports it
		}
		r.announced(it, kind, errs[i], now, res, st)
	}
}

// readAhead reads the store's changes for the next pass while the
// speaker takes this one's batches: at once, then again each time a
// batch returns (returned) until the last one is under way, or ctx ends
// (then batches may never return). During a bulk load the API commits
// thousands of rules while GoBGP takes a pass's additions; read once, at
// the start, the rest waited for the next pass, and GoBGP's server loop
// sat idle while the loop read them.
func (r *Reconciler) readAhead(ctx context.Context, batches int, returned <-chan struct{}) {
	r.src.prefetch(ctx, r.d)
	for range batches - 1 {
		select {
		case <-returned:
		case <-ctx.Done():
			return
		}
		r.src.prefetch(ctx, r.d)
	}
}

// startEach calls fn with each of 0..n-1 on up to workers goroutines,
// each taking the next index until none is left or stop reports true, and
// returns a function that waits for them: the caller works meanwhile.
func startEach(n, workers int, stop func() bool, fn func(i int)) (wait func()) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || stop() {
					return
				}
				fn(i)
			}
		})
	}
	return wg.Wait
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
		retryIn, term := r.work.failed(it.Match, opAnnounce, it.Action, err, now)
		r.ruleFailed(it, false, err, term)
		switch {
		case !r.logs.failure():
		case term:
			r.log.Error("rule rejected; not retrying", "rule", it.ID, "op", kind, "family", it.Match.Family(), "text", it.Rule(), "error", err)
		default:
			r.log.Warn("announce failed; will retry", "rule", it.ID, "op", kind, "family", it.Match.Family(), "text", it.Rule(), "retry_in", retryIn, "error", err)
		}
		return
	}
	*count++
	// The status says announced once the mirror shows the path (adopt):
	// until then the request is in flight and the status stays as it was.
	r.work.accepted(it.Match, opAnnounce, it.Action, now)
	if kind == "add" && r.reannouncing {
		r.reannounced.Add(1)
		r.logs.reannounced++
		kind = "reannounce"
	}
	// rowSeen: this row's path was seen in the RIB with the Action it
	// asks for (an Update carries that Action).
	if rw := r.src.byID.get(it.ID); rw != nil && rw.flags&rowSeen != 0 {
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
	if lv := r.logs.change(r.log, changeAnnounced); lv != hclog.NoLevel {
		r.log.Log(lv, "rule announced", "rule", it.ID, "op", kind, "family", it.Match.Family(), "text", it.Rule())
	}
}

// withdrawAll withdraws items (kind: "retire" or "orphan") in one call to
// the speaker, then does the bookkeeping of each in order.
func (r *Reconciler) withdrawAll(ctx context.Context, items []Item, kind string, now time.Time, res *PassResult, st *statusBatch) {
	todo := make([]Item, 0, len(items))
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
		r.withdrawn(it, kind, errs[i], now, res, st)
	}
}

// ruleFailed tells Config.RuleFailed of a failure that is the first of
// its request, or final.
func (r *Reconciler) ruleFailed(it Item, withdraw bool, err error, terminal bool) {
	if r.cfg.RuleFailed != nil && (terminal || r.work.failures(it.Match) == 1) {
		r.cfg.RuleFailed(it.ID, it.Rule().String(), withdraw, err, terminal)
	}
}

// withdrawn does the bookkeeping of one withdrawal that returned err.
func (r *Reconciler) withdrawn(it Item, kind string, err error, now time.Time, res *PassResult, st *statusBatch) {
	if err != nil {
		res.Errors++
		for _, rr := range r.plan.v.retiring[it.Match] {
			st.set(rr.ID, true, err.Error())
		}
		retryIn, term := r.work.failed(it.Match, opWithdraw, flowspec.Action{}, err, now)
		r.ruleFailed(it, true, err, term)
		switch {
		case !r.logs.failure():
		case term:
			r.log.Error("withdraw rejected; not retrying", "rule", it.ID, "op", kind, "family", it.Match.Family(), "text", it.Rule(), "error", err)
		default:
			r.log.Warn("withdraw failed; will retry", "rule", it.ID, "op", kind, "family", it.Match.Family(), "text", it.Rule(), "retry_in", retryIn, "error", err)
		}
		return
	}
	res.Withdrawn++
	r.unsee(it.Match)
	r.work.accepted(it.Match, opWithdraw, flowspec.Action{}, now)
	if kind == "orphan" {
		r.orphaned.Add(1)
	}
	r.recorder().Withdrawn(it.Match.Family(), kind)
	if lv := r.logs.change(r.log, changeWithdrawn); lv != hclog.NoLevel {
		r.log.Log(lv, "rule withdrawn", "rule", it.ID, "op", kind, "family", it.Match.Family(), "text", it.Rule())
	}
}

// storeDone updates the backoff for store errors (reads and writes): the
// level-triggered pass repeats whatever failed once the retry timer fires.
func (r *Reconciler) storeDone(failed bool, now time.Time) {
	if !failed {
		r.storeFail, r.storeNext = 0, time.Time{}
		return
	}
	r.storeFail++
	r.storeNext = now.Add(r.work.retry.delay(r.storeFail))
}

// nextRetry is when the loop must wake up for the work queue (a backoff,
// an expectation that may time out, a paced batch), an early announcement's
// or withdrawal's grace or the store's backoff; zero if nothing waits.
func (r *Reconciler) nextRetry(now time.Time) time.Time {
	t := r.work.next()
	if r.storeFail > 0 {
		t = earliest(t, r.storeNext)
	}
	t = earliest(t, r.early.next())
	t = earliest(t, r.leaving.next())
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

// seeEarly sets rowSeen on the rows of m that ask for a: an early
// announcement put that path on the speaker and its write settled
// applied.
func (r *Reconciler) seeEarly(m flowspec.Match, a flowspec.Action) {
	r.src.byMatch.each(m, func(rw *row) {
		if rw.Action == a {
			rw.flags |= rowSeen
		}
	})
}

// unsee clears rowSeen on the rows of m: its path was withdrawn.
func (r *Reconciler) unsee(m flowspec.Match) {
	r.src.byMatch.each(m, func(rw *row) { rw.flags &^= rowSeen })
}
