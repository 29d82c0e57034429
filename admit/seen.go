package admit

import (
	"sync"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// Rules as stored by this gate: time to withdraw.
//
// A withdrawal checks the rule as stored, and used to read it (GetBrief,
// or ActiveMatches by match) before its path could leave. That read was
// the one store call on the way from a DELETE to the routers, and the
// slowest part of it in the tail: measured with BenchmarkTimeToWithdraw,
// a read waiting 3.4 ms in SQLite's locks while the previous
// withdrawal's commit ran, 12 ms through a garbage collection (interning
// the rule's action blocks while the collector finishes marking). The
// gate keeps the brief rule each single Add stored; the withdrawal of
// such a rule (by id, or by match: a detector's unban) is checked on it,
// its path leaves at once, and the store's WithdrawSeen withdraws the
// rule only if it is still as seen, in the commit's own transaction. A
// rule that changed since (written by another process, finished by the
// reconciler) is refused there (store.ErrChanged), nothing is written,
// and the gate decides again on the rule as read then: the same checks
// on the same stored rule as before. Only then can a path leave for a
// withdrawal that is refused: the rule changed hands in another process
// since this gate stored it; it is announced again at once.
//
// The gate forgets a rule when any other write of this gate may have
// changed it (batches, sets, static rules, bulk withdrawals and
// guardrail enforcement clear every entry; a withdrawal by match of a
// rule not kept forgets it), once its expiry has passed (the reconciler
// finishes it on its own), and when a rule with the same match is
// stored: a withdrawal by an old id never takes off the path of a newer
// rule with the same match.

// maxSeen bounds the rules kept: single writes only, a few hundred bytes
// each.
const maxSeen = 4096

type seenRules struct {
	mu      sync.Mutex
	byID    map[int64]store.Rule
	byMatch map[flowspec.Match]int64
}

// put keeps r (as its single write stored it), in brief.
func (c *seenRules) put(r store.Rule) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = make(map[int64]store.Rule)
		c.byMatch = make(map[flowspec.Match]int64)
	}
	if old, ok := c.byMatch[r.Rule.Match]; ok {
		delete(c.byID, old)
	}
	if len(c.byID) >= maxSeen {
		for id, o := range c.byID { // any one
			delete(c.byID, id)
			delete(c.byMatch, o.Rule.Match)
			break
		}
	}
	c.byID[r.ID] = store.Rule{ID: r.ID, Rule: r.Rule, Actor: r.Actor, Origin: r.Origin, Sites: r.Sites,
		ExpiresAt: r.ExpiresAt, State: r.State, WithdrawRequested: r.WithdrawRequested}
	c.byMatch[r.Rule.Match] = r.ID
}

// take returns and forgets the rule kept for id, unless its expiry has
// passed by now.
func (c *seenRules) take(id int64, now time.Time) (store.Rule, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.byID[id]
	if !ok {
		return store.Rule{}, false
	}
	delete(c.byID, id)
	delete(c.byMatch, r.Rule.Match)
	if !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt) {
		return store.Rule{}, false
	}
	return r, true
}

// takeMatch is take for the rule kept with match m.
func (c *seenRules) takeMatch(m flowspec.Match, now time.Time) (store.Rule, bool) {
	c.mu.Lock()
	id, ok := c.byMatch[m]
	c.mu.Unlock()
	if !ok {
		return store.Rule{}, false
	}
	return c.take(id, now)
}

// forget forgets the rule kept with match m, if any.
func (c *seenRules) forget(m flowspec.Match) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := c.byMatch[m]; ok {
		delete(c.byID, id)
		delete(c.byMatch, m)
	}
}

// clear forgets every rule.
func (c *seenRules) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.byID)
	clear(c.byMatch)
}
