package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// pollInterval is how often an idle SQLite committer looks for commits made
// by other processes (PRAGMA data_version: one page-cache lookup).
const pollInterval = 250 * time.Millisecond

// maxGroup bounds the work (in rules) of one group transaction; a single
// larger request still runs, alone.
const maxGroup = 512

// errClosed is returned to writes queued when the Store closes.
var errClosed = errors.New("store closed")

// writeReq is one queued write: a caller's Upsert, Withdraw, UpsertMany...
type writeReq struct {
	ctx context.Context // the caller's, with its deadline; checked before fn starts and before the commit, never passed to SQL
	op  string          // what the write does, for the log of a late outcome
	n   int             // work in rules, for grouping and the deadline
	fn  func(ctx context.Context, w *wtx) (changed bool, err error)
	// background marks a write that waits while others are queued (the
	// reconciler's status reports): a mitigation never queues behind
	// the statuses of a million-rule load.
	background bool
	state      atomic.Int32 // see the req* states
	done       chan error   // capacity 1; receives the result once
}

// A request's state moves from reqQueued to reqTaken (the committer runs
// it) and reqCommitting (its transaction's COMMIT started), or to
// reqAbandoned (its caller gave up, or its deadline passed, before the
// commit started: it is never stored). A caller whose deadline passes
// during the COMMIT itself marks it reqLate: it was answered that the
// outcome is pending, and the committer logs the outcome when it comes.
const (
	reqQueued int32 = iota
	reqTaken
	reqAbandoned
	reqCommitting
	reqLate
	reqDone
)

// committer runs every write of a SQLite Store on one connection, many
// callers' writes per transaction (group commit), and polls that connection
// for commits made by other processes. See the package doc.
type committer struct {
	s  *Store
	ss *sqliteSession

	mu      sync.Mutex
	pending []*writeReq
	closed  bool
	wake    chan struct{} // capacity 1
	// queued, when set (by tests only), gets the queue's length after
	// each submit, without waiting.
	queued chan int
}

func newCommitter(s *Store, ss *sqliteSession) *committer {
	return &committer{s: s, ss: ss, wake: make(chan struct{}, 1)}
}

// submit queues reqs, in order, as one step (tests use several to form a
// known group) and returns false if the committer has stopped.
func (c *committer) submit(reqs ...*writeReq) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.pending = append(c.pending, reqs...)
	if c.queued != nil {
		select {
		case c.queued <- len(c.pending):
		default:
		}
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return true
}

// take removes the next group from the queue: requests in order while their
// work fits maxGroup, and at least one.
func (c *committer) take() []*writeReq {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Every other write before the background ones, each kind in the
	// order it came.
	if i := slices.IndexFunc(c.pending, func(r *writeReq) bool { return r.background }); i >= 0 &&
		slices.ContainsFunc(c.pending[i:], func(r *writeReq) bool { return !r.background }) {
		fg := make([]*writeReq, 0, len(c.pending))
		var bg []*writeReq
		for _, r := range c.pending {
			if r.background {
				bg = append(bg, r)
			} else {
				fg = append(fg, r)
			}
		}
		c.pending = append(fg, bg...)
	}
	n, work := 0, 0
	for n < len(c.pending) && (n == 0 || work+c.pending[n].n <= maxGroup) {
		work += c.pending[n].n
		n++
	}
	g := make([]*writeReq, n)
	copy(g, c.pending)
	c.pending = append(c.pending[:0], c.pending[n:]...)
	return g
}

// requeue puts requests that did not run back at the front of the queue.
func (c *committer) requeue(reqs []*writeReq) {
	c.mu.Lock()
	c.pending = append(reqs[:len(reqs):len(reqs)], c.pending...)
	c.mu.Unlock()
}

func (c *committer) run(ctx context.Context) {
	defer c.ss.close()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			c.mu.Lock()
			c.closed = true
			rest := c.pending
			c.pending = nil
			c.mu.Unlock()
			for _, r := range rest {
				r.done <- errClosed
			}
			return
		case <-tick.C:
			c.poll(ctx)
			continue
		case <-c.wake:
		}
		for {
			g := c.take()
			if len(g) == 0 {
				break
			}
			c.commit(g)
		}
	}
}

// poll signals the change feed when another process changed desired state.
func (c *committer) poll(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, c.s.timeout)
	defer cancel()
	changed, err := c.ss.externalChange(pctx, nil)
	if err != nil {
		c.s.log.Debug("poll sqlite for changes by other processes", "error", err)
	}
	if changed {
		c.s.signal()
	}
}

// commit runs the group g in one transaction. Each request runs inside its
// own savepoint: one that fails is rolled back alone and gets its error,
// the others commit. Every request gets its result only after the commit.
func (c *committer) commit(g []*writeReq) {
	work := 0
	for _, r := range g {
		work += r.n
	}
	if err := c.s.refused(); err != nil {
		// Lost, corrupt or held: nothing runs.
		for _, r := range g {
			if r.state.CompareAndSwap(reqQueued, reqTaken) {
				r.done <- err
			}
		}
		return
	}
	ctx, cancel := c.s.call(context.Background(), work)
	defer cancel()
	// outcome is the transaction's: nil once committed. The store's
	// health knows it before any caller hears of it (see EarlyOK).
	var outcome error
	f := c.s.health.begin(c.s.clock.Now(), work)
	res := make([]error, len(g))
	ran := make([]bool, len(g))
	deliver := func() {
		c.s.health.end(f, outcome)
		for i, r := range g {
			if ran[i] {
				r.done <- res[i]
			}
		}
	}
	t, err := c.ss.begin(ctx)
	if err != nil {
		// Nothing ran: every request gets the error (the database is the
		// problem, not one request).
		for i := range g {
			ran[i], res[i] = g[i].state.CompareAndSwap(reqQueued, reqTaken), err
		}
		outcome = err
		deliver()
		return
	}
	defer t.rollback(context.WithoutCancel(ctx))
	external, err := c.ss.externalChange(ctx, t)
	if err != nil {
		c.s.log.Debug("poll sqlite for changes by other processes", "error", err)
	}
	if external {
		c.s.signal() // another process's change: already committed
	}
	st := t.(*sqliteTx)
	w := &wtx{tx: t}
	single := len(g) == 1
	changed := false
	fail := func(err error) { // the transaction is lost: fail what ran, requeue the rest
		outcome = err
		var rest []*writeReq
		for i, r := range g {
			if ran[i] {
				res[i] = err
			} else if r.state.Load() == reqQueued {
				rest = append(rest, r)
			}
		}
		if len(rest) > 0 {
			c.requeue(rest)
		}
	}
	for i, r := range g {
		if r.ctx.Err() != nil || !r.state.CompareAndSwap(reqQueued, reqTaken) {
			continue // the caller gave up before it ran; it never will
		}
		ran[i] = true
		mark := len(w.events)
		if !single {
			if err := st.execPrepared(ctx, "SAVEPOINT item"); err != nil {
				fail(fmt.Errorf("savepoint: %w", err))
				deliver()
				return
			}
		}
		ch, err := r.fn(ctx, w)
		if err != nil {
			res[i] = err
			w.events = w.events[:mark]
			if single {
				outcome = err
				deliver()
				return
			}
			if rerr := st.execPrepared(ctx, "ROLLBACK TO item"); rerr != nil {
				// SQLite rolled back the whole transaction (I/O error,
				// disk full...): the others' work is gone too.
				fail(fmt.Errorf("transaction rolled back after another write failed: %w", rerr))
				res[i] = err
				deliver()
				return
			}
		}
		if !single {
			if err := st.execPrepared(ctx, "RELEASE item"); err != nil {
				fail(fmt.Errorf("release savepoint: %w", err))
				deliver()
				return
			}
		}
		changed = changed || (ch && err == nil)
	}
	if err := c.s.flushEvents(ctx, w); err != nil {
		fail(err)
		deliver()
		return
	}
	var adopt func()
	if changed {
		if adopt, err = c.ss.ownChanges(ctx, t); err != nil {
			fail(fmt.Errorf("read history: %w", err))
			deliver()
			return
		}
	}
	if err := c.s.checkFile(); err != nil {
		fail(err) // the file this transaction would commit to is not the store's any more
		deliver()
		return
	}
	if !c.committing(g, ran) {
		// A caller gave up or its deadline passed while its write ran:
		// it was (or is being) answered that nothing was stored, so
		// nothing is. The others run again in the next transaction.
		c.s.health.abandon(f)
		return
	}
	err = c.s.commit(ctx, t)
	if err != nil {
		fail(fmt.Errorf("commit: %w", err))
	} else if changed {
		adopt()
		c.s.signal()
	}
	c.late(g, ran, err)
	deliver()
}

// committing moves every request of g that ran to reqCommitting right
// before the COMMIT, and reports true. If one of them cannot move (its
// caller gave up) or its deadline passed, nothing commits: the
// transaction is rolled back by the caller of committing, those
// requests get the error of a write that was not stored, and the others
// go back to the front of the queue, to run again while their callers
// wait. From reqCommitting on, a caller whose deadline passes is told
// that the outcome is pending (see late).
func (c *committer) committing(g []*writeReq, ran []bool) bool {
	ok := true
	for i, r := range g {
		if !ran[i] {
			continue
		}
		if r.ctx.Err() != nil || !r.state.CompareAndSwap(reqTaken, reqCommitting) {
			ok = false
			break
		}
	}
	if ok {
		return true
	}
	var again []*writeReq
	for i, r := range g {
		if !ran[i] {
			if r.state.Load() == reqQueued {
				again = append(again, r)
			}
			continue
		}
		ran[i] = false
		expired := r.ctx.Err() != nil
		if !expired && (r.state.CompareAndSwap(reqCommitting, reqQueued) || r.state.CompareAndSwap(reqTaken, reqQueued)) {
			again = append(again, r)
			continue
		}
		// Its caller gave up (reqAbandoned), or gives up now: it hears
		// that nothing was stored, from here or from its own context.
		r.state.CompareAndSwap(reqTaken, reqAbandoned)
		r.state.CompareAndSwap(reqCommitting, reqAbandoned)
		r.done <- c.s.notStored(r.ctx, r.op)
	}
	if len(again) > 0 {
		c.requeue(again)
	}
	return false
}

// late settles the requests of g whose COMMIT outcome is known now: a
// caller still waiting gets it through done; one whose deadline passed
// during the COMMIT was told the outcome is pending, and the log says
// what it turned out to be.
func (c *committer) late(g []*writeReq, ran []bool, err error) {
	for i, r := range g {
		if !ran[i] || r.state.CompareAndSwap(reqCommitting, reqDone) {
			continue
		}
		if r.state.Load() != reqLate {
			continue
		}
		c.s.lateCommits.Add(1)
		if err == nil {
			c.s.log.Warn("a write whose caller was answered 503 at its deadline committed after all, when the disk answered: it is stored and will be announced (GET /v1/rules shows it)",
				"op", r.op, "write_timeout", c.s.writeTimeout)
		} else {
			c.s.log.Warn("a write whose caller was answered 503 at its deadline failed when the disk answered: it is not stored",
				"op", r.op, "error", err)
		}
	}
}

// enqueue runs fn through the committer and waits for its result, for
// as long as the write's deadline ([store] write_timeout, scaled for
// batches) allows. The answer is always the truth:
//
//   - committed: nil;
//   - the deadline passed (or ctx ended) before the write's COMMIT
//     started: it is never stored, and the caller gets an error that
//     says so (the committer drops it from the queue, or rolls its
//     transaction back and runs the others again);
//   - the deadline passed during the COMMIT (a disk that stopped
//     answering mid-fsync cannot be rolled back): the caller gets an
//     error that says the outcome is pending; if the commit lands when
//     the disk answers, the rule is stored like any other (GET shows it)
//     and the log says so.
//
// Either way the caller is answered by its deadline, however long the
// disk hangs, and the writes queued behind a hung one are answered by
// theirs without being run.
func (c *committer) enqueue(ctx context.Context, op string, n int, background bool, fn func(ctx context.Context, w *wtx) (bool, error)) error {
	cctx, cancel := c.s.writeBound(ctx, n)
	defer cancel()
	r := &writeReq{ctx: cctx, op: op, n: max(n, 1), fn: fn, background: background, done: make(chan error, 1)}
	if !c.submit(r) {
		return errClosed
	}
	select {
	case err := <-r.done:
		return err
	case <-cctx.Done():
	}
	if r.state.CompareAndSwap(reqQueued, reqAbandoned) || r.state.CompareAndSwap(reqTaken, reqAbandoned) {
		return c.s.notStored(cctx, op)
	}
	if r.state.CompareAndSwap(reqCommitting, reqLate) {
		return c.s.pending(cctx, op)
	}
	return <-r.done // settled meanwhile: the committer answered
}
