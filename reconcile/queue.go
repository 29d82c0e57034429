package reconcile

import (
	"maps"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// workQueue is the per-rule work queue, one of the reconciler's named
// parts (in the manner of client-go's workqueue): for every Match it knows
// whether a request may go to the speaker this pass. It keeps
//
//   - attempts: failed requests, retried with exponential backoff
//     (transient) or never while the request stays the same (terminal);
//   - expectations: requests the speaker accepted that the mirror does not
//     show yet; the same request is not made again until the mirror shows
//     it or the settle timeout passes, so a pass in between neither repeats
//     work nor counts it as drift;
//   - the storm queue and its pacer (storm.go): additions held back after a
//     speaker restart or into an empty RIB.
//
// Times are the pass's clock readings: the queue arms nothing itself, it
// says when the loop must wake (next).
type workQueue struct {
	retry  backoff
	settle time.Duration

	attempts map[flowspec.Match]*attempt
	expects  map[flowspec.Match]expect
	// expectsPeak is the most entries expects held since it was last
	// made (trim).
	expectsPeak int

	// queue holds the paced additions not announced yet, in order, and
	// queued the same Matches as a set (storm.go).
	queue  []flowspec.Match
	queued map[flowspec.Match]struct{}
	pace   pacer
}

func newWorkQueue(cfg Config) workQueue {
	return workQueue{
		retry:    backoff{base: cfg.RetryBase, max: cfg.RetryMax},
		settle:   cfg.SettleTimeout,
		attempts: make(map[flowspec.Match]*attempt),
		expects:  make(map[flowspec.Match]expect),
	}
}

// waiting reports whether a request for m must not be made this pass: it
// failed terminally, it is backing off, or the speaker accepted it and the
// mirror has not caught up yet. pending is set when it will be made later.
func (q *workQueue) waiting(m flowspec.Match, o op, a flowspec.Action, now time.Time) (wait, pending bool) {
	if at, ok := q.attempts[m]; ok && at.same(o, a) {
		if at.terminal {
			return true, false
		}
		if now.Before(at.next) {
			return true, true
		}
	}
	if e, ok := q.expects[m]; ok && e.op == o && (o != opAnnounce || e.action == a) {
		return true, true
	}
	return false, false
}

// failed records a failed request: terminal ones are not retried while the
// request stays the same; transient ones back off exponentially.
func (q *workQueue) failed(m flowspec.Match, o op, a flowspec.Action, err error, now time.Time) (retryIn time.Duration, terminal bool) {
	at, ok := q.attempts[m]
	if !ok || !at.same(o, a) {
		at = &attempt{op: o, action: a}
		q.attempts[m] = at
	}
	at.failures++
	if IsTerminal(err) {
		at.terminal = true
		return 0, true
	}
	retryIn = q.retry.delay(at.failures)
	at.next = now.Add(retryIn)
	return retryIn, false
}

// failures counts the failures in a row of m's current request.
func (q *workQueue) failures(m flowspec.Match) int {
	if at, ok := q.attempts[m]; ok {
		return at.failures
	}
	return 0
}

// accepted records a request the speaker took: the mirror should show it
// within the settle timeout.
func (q *workQueue) accepted(m flowspec.Match, o op, a flowspec.Action, now time.Time) {
	delete(q.attempts, m)
	q.expects[m] = expect{op: o, action: a, deadline: now.Add(q.settle)}
}

// done forgets what the queue knows of m: it needs nothing any more
// (adopted, or its rule finished).
func (q *workQueue) done(m flowspec.Match) {
	if len(q.attempts) > 0 {
		delete(q.attempts, m)
	}
}

// forget drops the expectation of m: its path was changed outside the
// passes (an early announcement or withdrawal), so the change a pass asked
// for may be undone and the mirror may never show it.
func (q *workQueue) forget(m flowspec.Match) {
	delete(q.expects, m)
}

// inFlight reports whether a request for m was accepted and the mirror does
// not show it yet.
func (q *workQueue) inFlight(m flowspec.Match) bool {
	_, ok := q.expects[m]
	return ok
}

// observe drops the expectations the mirror now shows met (look) or whose
// settle timeout passed: their Matches are compared afresh.
func (q *workQueue) observe(look lookFunc, now time.Time) {
	for m, e := range q.expects {
		a, present, _ := look(m)
		if e.met(a, present) || !now.Before(e.deadline) {
			delete(q.expects, m)
		}
	}
}

// restarted forgets the expectations: they were about a RIB that is gone.
func (q *workQueue) restarted() { clear(q.expects) }

// prune forgets the attempts of Matches that are neither desired (wanted)
// nor orphans, so that memory follows the desired and actual sets.
func (q *workQueue) prune(p Plan, wanted func(flowspec.Match) bool) {
	if len(q.attempts) == 0 {
		return
	}
	var orphans map[flowspec.Match]struct{}
	if len(p.Withdraw) > 0 {
		orphans = make(map[flowspec.Match]struct{}, len(p.Withdraw))
		for _, it := range p.Withdraw {
			orphans[it.Match] = struct{}{}
		}
	}
	for m := range q.attempts {
		_, orphan := orphans[m]
		if !orphan && !wanted(m) {
			delete(q.attempts, m)
		}
	}
}

// next is when the loop must wake up for a backoff, an expectation that
// may time out or the next paced batch; zero if nothing waits.
func (q *workQueue) next() time.Time {
	var t time.Time
	for _, a := range q.attempts {
		if !a.terminal {
			t = earliest(t, a.next)
		}
	}
	for _, e := range q.expects {
		t = earliest(t, e.deadline)
	}
	return earliest(t, q.pace.next)
}

// idle reports whether nothing waits: no retry, no expectation, no paced
// batch.
func (q *workQueue) idle() bool {
	return len(q.expects) == 0 && q.next().IsZero()
}

// reserve makes room for n more expectations at once when that is many
// (a bulk pass): the map then grows once instead of doubling its way up,
// rehashing every entry at each step (a tenth of a 100,000-rule pass's
// CPU).
func (q *workQueue) reserve(n int) { q.expects = reserved(q.expects, n) }

// reserved returns m, or when n is bigScratch or more a copy of it with
// room for n more entries (see workQueue.reserve).
func reserved[K comparable, V any](m map[K]V, n int) map[K]V {
	if n < bigScratch {
		return m
	}
	r := make(map[K]V, len(m)+n)
	maps.Copy(r, m)
	return r
}

// trim gives back the expectation map a large pass grew (Go maps never
// shrink) once it is empty again.
func (q *workQueue) trim() {
	q.expectsPeak = max(q.expectsPeak, len(q.expects))
	if len(q.expects) == 0 && q.expectsPeak > bigScratch {
		q.expects, q.expectsPeak = make(map[flowspec.Match]expect), 0
	}
}
