package reconcile

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/ribkeeper/ribkeeper/store"
)

// DeltaReader is optionally implemented by a Desired that can say what
// changed since a revision (store.Store does). With it the reconciler keeps
// a copy of the active rules and, between full re-reads, reads only the
// rules that changed: a pass woken at 100,000 rules with nothing changed
// costs one indexed lookup instead of reading every row.
type DeltaReader interface {
	// Revision returns the newest revision. Read before a full read,
	// ChangedSince(it) afterwards misses nothing.
	Revision(ctx context.Context) (int64, error)
	// ChangedSince returns the rules changed after rev.
	ChangedSince(ctx context.Context, rev int64) (store.Delta, error)
	// RevisionSettle is how long a revision must be re-read behind the
	// newest one seen (commits can land out of id order; 0 if they cannot).
	RevisionSettle() time.Duration
}

// Generationer is optionally implemented by a Speaker whose mirror counts
// its changes (bgp.Speaker does): equal readings mean nothing changed.
type Generationer interface {
	Generation() uint64
}

// DefaultFullReadInterval is how often the loop re-reads every desired row
// even though the store's revisions say nothing changed.
const DefaultFullReadInterval = DefaultResyncInterval

// desiredCache is the reconciler's copy of the active rules for this site.
type desiredCache struct {
	byID map[int64]store.Rule
	rows []store.Rule // byID as a slice, rebuilt when it changes
	// rev is the revision the copy is complete up to; seen remembers
	// recent revisions with when they were seen, to re-read behind them
	// while commits may still land (PostgreSQL).
	rev  int64
	seen []seenRev
	// fullAt is when every row was last read.
	fullAt time.Time
	ok     bool
}

type seenRev struct {
	at  time.Time
	rev int64
}

// read refreshes the copy: every row when full is set, when there is no
// copy yet or when d cannot say what changed; otherwise only what changed
// since the copy's revision. changed reports whether the rows may differ
// from the last call's.
func (c *desiredCache) read(ctx context.Context, d Desired, now time.Time, full bool) (changed bool, err error) {
	dr, incremental := d.(DeltaReader)
	if !incremental || full || !c.ok {
		var rev int64
		if incremental {
			if rev, err = dr.Revision(ctx); err != nil {
				return false, err
			}
		}
		rows, err := d.ActiveRules(ctx)
		if err != nil {
			return false, err
		}
		if c.ok && dr != nil && dr.RevisionSettle() > 0 {
			// Commits behind rev may still land: keep re-reading from
			// the bound that had settled before this read.
			c.seen = append(c.seen, seenRev{at: now, rev: rev})
		} else {
			c.rev, c.seen = rev, c.seen[:0]
		}
		c.rows, c.ok, c.fullAt = rows, true, now
		c.byID = nil
		return true, nil
	}
	settle := dr.RevisionSettle()
	from := c.rev
	for _, s := range c.seen {
		// Re-read behind each revision seen until it settled.
		if now.Sub(s.at) >= settle {
			from = max(from, s.rev)
		}
	}
	delta, err := dr.ChangedSince(ctx, from)
	if err != nil {
		return false, err
	}
	if settle > 0 {
		c.seen = slices.DeleteFunc(c.seen, func(s seenRev) bool { return s.rev <= from })
		if delta.Next > from && (len(c.seen) == 0 || c.seen[len(c.seen)-1].rev < delta.Next) {
			c.seen = append(c.seen, seenRev{at: now, rev: delta.Next})
		}
		// c.rev stays the settled lower bound.
		c.rev = from
	} else {
		c.rev = max(c.rev, delta.Next)
	}
	if len(delta.Active) == 0 && len(delta.Gone) == 0 {
		return false, nil
	}
	if c.byID == nil {
		c.byID = make(map[int64]store.Rule, len(c.rows)+len(delta.Active))
		for _, r := range c.rows {
			c.byID[r.ID] = r
		}
	}
	for _, id := range delta.Gone {
		delete(c.byID, id)
	}
	for _, r := range delta.Active {
		c.byID[r.ID] = r
	}
	c.rows = c.rows[:0]
	for _, r := range c.byID {
		c.rows = append(c.rows, r)
	}
	slices.SortFunc(c.rows, func(a, b store.Rule) int { return cmp.Compare(a.ID, b.ID) })
	return true, nil
}
