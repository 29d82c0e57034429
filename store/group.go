package store

import (
	"context"
	"errors"
	"fmt"
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
	ctx   context.Context // the caller's; checked before fn starts, never passed to SQL
	n     int             // work in rules, for grouping and the deadline
	fn    func(ctx context.Context, w *wtx) (changed bool, err error)
	state atomic.Int32 // reqQueued → reqTaken (committer) or reqAbandoned (caller)
	done  chan error   // capacity 1; receives the result once, after commit
}

const (
	reqQueued int32 = iota
	reqTaken
	reqAbandoned
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
	if err := c.s.commit(ctx, t); err != nil {
		fail(fmt.Errorf("commit: %w", err))
		deliver()
		return
	}
	if changed {
		adopt()
		c.s.signal()
	}
	deliver()
}

// enqueue runs fn through the committer and waits for its result. A caller
// whose context ends before fn started gets the context's error and fn
// never runs; once fn started, the caller waits for the commit (bounded by
// the group's deadline), so the answer is always the truth.
func (c *committer) enqueue(ctx context.Context, n int, fn func(ctx context.Context, w *wtx) (bool, error)) error {
	cctx, cancel := c.s.call(ctx, n)
	defer cancel()
	r := &writeReq{ctx: cctx, n: max(n, 1), fn: fn, done: make(chan error, 1)}
	if !c.submit(r) {
		return errClosed
	}
	select {
	case err := <-r.done:
		return err
	case <-cctx.Done():
		if r.state.CompareAndSwap(reqQueued, reqAbandoned) {
			return cctx.Err()
		}
		return <-r.done
	}
}
