package reconcile

import (
	"context"
	"iter"
	"slices"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
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

// desiredCache is the reconciler's copy of the active rules for this site,
// indexed by id, by Match and by expiry, so that a change to one rule costs
// work for that rule only.
type desiredCache struct {
	// byID points into the rows of the last full read, or to copies of
	// rows read since: no allocation per row on a full read.
	byID map[int64]*store.Rule
	// byMatch holds the ids of the rows of each Match (one, unless the
	// store breaks its own uniqueness).
	byMatch map[flowspec.Match]ids
	expiry  expiryHeap
	// rev is the revision the copy is complete up to; seen remembers
	// recent revisions with when they were seen, to re-read behind them
	// while commits may still land (PostgreSQL).
	rev  int64
	seen []seenRev
	// fullAt is when every row was last read.
	fullAt time.Time
	ok     bool
}

// ids is a small set of row ids: one inline, more only for duplicates.
type ids struct {
	one  int64
	more []int64
}

func (s ids) each(fn func(int64)) {
	if s.one != 0 {
		fn(s.one)
	}
	for _, id := range s.more {
		fn(id)
	}
}

func (s ids) add(id int64) ids {
	if s.one == 0 {
		s.one = id
	} else {
		s.more = append(s.more, id)
	}
	return s
}

func (s ids) remove(id int64) ids {
	if s.one == id {
		s.one = 0
		if n := len(s.more); n > 0 {
			s.one, s.more = s.more[n-1], s.more[:n-1]
		}
		return s
	}
	s.more = slices.DeleteFunc(s.more, func(x int64) bool { return x == id })
	return s
}

func (s ids) empty() bool { return s.one == 0 && len(s.more) == 0 }

type seenRev struct {
	at  time.Time
	rev int64
}

// read refreshes the copy: every row when full is set, when there is no
// copy yet or when d cannot say what changed; otherwise only what changed
// since the copy's revision. all reports a complete re-read; otherwise
// dirty is called with the Match of every row that changed (before and
// after the change). changed reports whether the rows may differ from the
// last call's, and gone is called with the id of every row that left. On
// an error the copy is left as it was.
func (c *desiredCache) read(ctx context.Context, d Desired, now time.Time, full bool, dirty func(flowspec.Match), gone func(int64)) (changed, all bool, err error) {
	dr, incremental := d.(DeltaReader)
	if !incremental || full || !c.ok {
		var rev int64
		if incremental {
			if rev, err = dr.Revision(ctx); err != nil {
				return false, false, err
			}
		}
		rows, err := d.ActiveRules(ctx)
		if err != nil {
			return false, false, err
		}
		if c.ok && dr != nil && dr.RevisionSettle() > 0 {
			// Commits behind rev may still land: keep re-reading from
			// the bound that had settled before this read.
			c.seen = append(c.seen, seenRev{at: now, rev: rev})
		} else {
			c.rev, c.seen = rev, c.seen[:0]
		}
		c.load(rows)
		c.ok, c.fullAt = true, now
		return true, true, nil
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
		return false, false, err
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
	for _, id := range delta.Gone {
		if old, ok := c.byID[id]; ok {
			changed = true
			dirty(old.Rule.Match)
			c.unindex(*old)
			delete(c.byID, id)
		}
		gone(id)
	}
	for _, r := range delta.Active {
		old, ok := c.byID[r.ID]
		if ok && sameLifecycle(*old, r) {
			// Read again (PostgreSQL re-reads behind recent revisions
			// until they settle) or changed in nothing a pass looks at.
			*old = r
			continue
		}
		changed = true
		if ok {
			dirty(old.Rule.Match)
			c.unindex(*old)
		}
		dirty(r.Rule.Match)
		c.byID[r.ID] = &r
		c.index(r)
	}
	if !changed {
		return false, false, nil
	}
	if len(c.expiry) > 2*len(c.byID)+1024 {
		c.rebuildExpiry()
	}
	return true, false, nil
}

// sameLifecycle reports whether a and b, two readings of one rule, give
// the same view: what the reconciler derives from a row (lifecycle,
// validation, the path) depends on these fields only.
func sameLifecycle(a, b store.Rule) bool {
	return a.Rule == b.Rule && a.ExpiresAt.Equal(b.ExpiresAt) && a.State == b.State &&
		a.WithdrawRequested == b.WithdrawRequested
}

// load replaces the copy with rows.
func (c *desiredCache) load(rows []store.Rule) {
	if c.byID == nil {
		c.byID = make(map[int64]*store.Rule, len(rows))
		c.byMatch = make(map[flowspec.Match]ids, len(rows))
	} else {
		// Keep the tables: a re-read has about as many rows.
		clear(c.byID)
		clear(c.byMatch)
	}
	c.expiry = c.expiry[:0]
	for i := range rows {
		r := &rows[i]
		c.byID[r.ID] = r
		c.byMatch[r.Rule.Match] = c.byMatch[r.Rule.Match].add(r.ID)
		if expiring(*r) {
			c.expiry = append(c.expiry, expiryEntry{at: r.ExpiresAt.UnixNano(), id: r.ID})
		}
	}
	c.expiry.init()
}

func (c *desiredCache) index(r store.Rule) {
	c.byMatch[r.Rule.Match] = c.byMatch[r.Rule.Match].add(r.ID)
	if expiring(r) {
		c.expiry.push(expiryEntry{at: r.ExpiresAt.UnixNano(), id: r.ID})
	}
}

// unindex removes r from byMatch; its expiry entry goes stale and is
// dropped lazily (see valid).
func (c *desiredCache) unindex(r store.Rule) {
	s := c.byMatch[r.Rule.Match].remove(r.ID)
	if s.empty() {
		delete(c.byMatch, r.Rule.Match)
	} else {
		c.byMatch[r.Rule.Match] = s
	}
}

func (c *desiredCache) rebuildExpiry() {
	c.expiry = c.expiry[:0]
	for _, r := range c.byID {
		if expiring(*r) {
			c.expiry = append(c.expiry, expiryEntry{at: r.ExpiresAt.UnixNano(), id: r.ID})
		}
	}
	c.expiry.init()
}

// all returns the copy's rows, in no particular order.
func (c *desiredCache) all() iter.Seq[store.Rule] {
	return func(yield func(store.Rule) bool) {
		for _, r := range c.byID {
			if !yield(*r) {
				return
			}
		}
	}
}

// rowsOf appends the rows of Match m to buf.
func (c *desiredCache) rowsOf(m flowspec.Match, buf []store.Rule) []store.Rule {
	c.byMatch[m].each(func(id int64) { buf = append(buf, *c.byID[id]) })
	return buf
}

// expiring reports whether r will turn retiring by the clock alone: it
// is active, not already withdrawn, and has an ExpiresAt.
func expiring(r store.Rule) bool {
	return !r.ExpiresAt.IsZero() && !r.WithdrawRequested && (r.State == "" || r.State == store.Active)
}

// valid reports whether e still describes a row of the copy.
func (c *desiredCache) valid(e expiryEntry) bool {
	r, ok := c.byID[e.id]
	return ok && expiring(*r) && r.ExpiresAt.UnixNano() == e.at
}

// due calls fn with the Match of every row whose ExpiresAt has come by now
// and forgets them: from now on they are retiring, which the view of
// their Match shows once it is refreshed.
func (c *desiredCache) due(now time.Time, fn func(flowspec.Match)) {
	t := now.UnixNano()
	for len(c.expiry) > 0 && c.expiry[0].at <= t {
		e := c.expiry.pop()
		if c.valid(e) {
			fn(c.byID[e.id].Rule.Match)
		}
	}
}

// nextExpiry returns the nearest ExpiresAt among the rows that are not
// retiring yet (after due), zero if none.
func (c *desiredCache) nextExpiry() time.Time {
	for len(c.expiry) > 0 {
		if e := c.expiry[0]; c.valid(e) {
			return c.byID[e.id].ExpiresAt
		}
		c.expiry.pop()
	}
	return time.Time{}
}

// expiryEntry is one row's expiry in the heap: the Unix time in ns and
// the row id.
type expiryEntry struct {
	at, id int64
}

// expiryHeap is a binary min-heap by at. Entries of rows that changed are
// left in place and skipped when they reach the top.
type expiryHeap []expiryEntry

func (h expiryHeap) less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].id < h[j].id)
}

func (h *expiryHeap) push(e expiryEntry) {
	*h = append(*h, e)
	h.up(len(*h) - 1)
}

func (h *expiryHeap) pop() expiryEntry {
	old := *h
	n := len(old) - 1
	e := old[0]
	old[0] = old[n]
	*h = old[:n]
	h.down(0)
	return e
}

func (h expiryHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h expiryHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (h expiryHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
