package reconcile

import (
	"context"
	"slices"
	"sync"
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
// disk), to the speaker while its commit is still running; a write the
// store may refuse is announced after its commit, so that it never
// reaches a router. The reconciler keeps such a path out of orphan
// withdrawal until the write is done (Settle) or for EarlyGrace at most;
// then the store decides as for any path: a committed rule is adopted, a
// path whose write failed (or that the committed rule does not want here)
// is an orphan and withdrawn. An announcement never outlives a write that did
// not happen, and the acknowledgement still means "stored".

// EarlyGrace is how long an early announcement waits for its store commit
// before the reconciler treats the path as an orphan.
const EarlyGrace = 10 * time.Second

// earlySet holds the Matches announced ahead of their commit, with the
// time until which they are not orphans. Written by API goroutines, read
// by passes.
type earlySet struct {
	mu sync.Mutex
	m  map[flowspec.Match]time.Time
}

func (e *earlySet) add(m flowspec.Match, until time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = make(map[flowspec.Match]time.Time)
	}
	e.m[m] = until
}

// end ends the grace of m at once, if it has one.
func (e *earlySet) end(m flowspec.Match) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.m[m]
	if ok {
		e.m[m] = time.Time{}
	}
	return ok
}

// expire drops the entries whose grace ended by now and returns their
// Matches: a pass compares them again.
func (e *earlySet) expire(now time.Time) (expired []flowspec.Match) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for m, until := range e.m {
		if !now.Before(until) {
			expired = append(expired, m)
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
	for _, until := range e.m {
		t = earliest(t, until)
	}
	return t
}

// spare removes from orphans the Matches still within their grace.
func (e *earlySet) spare(orphans []Item) []Item {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.m) == 0 {
		return orphans
	}
	return slices.DeleteFunc(orphans, func(it Item) bool {
		_, early := e.m[it.Match]
		return early
	})
}

// AnnounceEarly hands rule to the speaker ahead of the store commit that
// declares it (see above) and returns at once. Call it only for a rule
// that passed every check a write makes, for this site, and whose write
// the store expects to commit; call Settle once the write returned,
// committed or failed. A failed announcement is only logged: the
// reconciler announces the rule again once the commit shows it. In a dry
// run it does nothing.
func (r *Reconciler) AnnounceEarly(rule flowspec.Rule) {
	if r.cfg.DryRun {
		return
	}
	r.log.Debug("announcing ahead of the commit", "text", rule)
	r.early.add(rule.Match, r.now().Add(EarlyGrace))
	go func() {
		if err := r.s.Announce(context.Background(), []flowspec.Rule{rule})[0]; err != nil {
			r.log.Debug("early announcement failed; the reconciler retries after the commit", "text", rule, "err", err)
		}
	}()
}

// Settle says that the write behind an early announcement of m is done,
// committed or failed: the next pass treats the path like any other (a
// failed write's path is an orphan, unless something else desires it).
func (r *Reconciler) Settle(m flowspec.Match) {
	if r.early.end(m) {
		r.Trigger()
	}
}
