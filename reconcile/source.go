package reconcile

import (
	"cmp"
	"context"
	"hash/maphash"
	"slices"
	"time"
	"unique"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// source is the desired-state source, one of the reconciler's named parts:
// its copy of the active rules for this site, indexed by id, by Match and by
// expiry, so that a change to one rule costs work for that rule only. It is
// brought up to date by a full read (the first pass, after a store error)
// or by the rules changed since a revision (every other pass), and says
// which Matches those changes touched. The periodic resync checks it
// against a complete read kept as a sum per row (readSums, verify), and
// reads every row again if they differ.
type source struct {
	// byID points into the rows of the last full read, or to copies of
	// rows read since: no allocation per row on a full read.
	byID rowIndex
	// byMatch holds the rows of each Match (one, unless the
	// store breaks its own uniqueness).
	byMatch matchIDs
	expiry  expiryHeap
	// rev is the revision the copy is complete up to.
	rev int64
	// moves is the store's ServerMoves at the last complete read.
	moves uint64
	// fullAt is when every row was last read.
	fullAt time.Time
	ok     bool
	// adopted counts the rows flagged rowAdopted.
	adopted int
	// writes lists the rows whose status the reconciler wrote since the
	// last snapshot swapped in, with when each write returned (see
	// wrote): status writes move no revision, so a snapshot read off the
	// loop may predate them.
	writes []statusWrite
	// tracking says a complete read is under way off the loop (or a
	// seed waits for the first pass): only then are writes kept, since
	// a snapshot that starts later already holds every status written.
	tracking bool
	// rows are the rows of the last complete read (byID points into
	// them) and extra those read since (rowExtra), each live unless
	// flagged rowStale: the full comparison walks them in memory order
	// (each row next to the last), not byID's. staleExtra counts the
	// stale ones in extra, staleRows those in rows.
	rows       []row
	extra      []*row
	staleExtra int
	staleRows  int
	// scratch holds the rows of the last incremental read, for reuse.
	scratch []row
	// ahead holds incremental reads made while the last pass waited on
	// the speaker or the store (prefetch), in order: the first starts at
	// rev, each next one where the one before ended. The next read
	// applies them before it reads the rest.
	ahead []delta
	// spare is an array of rows for the next read ahead, for reuse.
	spare []row
	// seed hashes rows into sums (readSums, verify); drifted counts the
	// resyncs that found the copy differing from the store.
	seed    maphash.Seed
	drifted uint64
}

// maxAhead bounds the reads prefetch keeps for the next pass: a pass of
// 50,000 additions reads ahead after each of its 25 batches
// (Reconciler.readAhead).
const maxAhead = 32

// prefetch reads what changed in d since the copy's revision (or since the
// last read ahead) without applying it, for the next read: a pass calls it
// while it waits on GoBGP or on a status commit, so that during a bulk
// load the store read of the next pass overlaps the speaker's work on this
// one instead of leaving GoBGP's server loop idle between passes (at
// 100,000 rules it waited a third of the load for the next batch). A
// failed read is dropped: the next read does it again.
func (c *source) prefetch(ctx context.Context, d Desired) {
	if !c.ok || len(c.ahead) >= maxAhead || serverMoves(d) != c.moves {
		return
	}
	from := c.rev
	if n := len(c.ahead); n > 0 {
		from = c.ahead[n-1].next
	}
	dl, err := readDelta(ctx, d, from, c.spare[:0])
	if err != nil || dl.next <= from {
		c.spare = dl.active[:0]
		return
	}
	c.spare = nil
	dl.from = from
	c.ahead = append(c.ahead, dl)
}

// catchUp applies the reads made ahead (prefetch) that continue the copy
// and drops them all.
func (c *source) catchUp(dirty func(flowspec.Match)) (changed bool) {
	for _, dl := range c.ahead {
		if dl.from != c.rev {
			break // a complete read came in between
		}
		c.rev = max(c.rev, dl.next)
		if c.applyRead(dl, dirty, true) {
			changed = true
		}
	}
	// The largest array not past maxScratchRows serves the next read
	// ahead (apply copies the rows it keeps).
	for _, dl := range c.ahead {
		if n := cap(dl.active); n <= maxScratchRows && n > cap(c.spare) {
			c.spare = dl.active[:0]
		}
	}
	c.ahead = nil
	return changed
}

type statusWrite struct {
	id, at int64 // at: Unix ns
}

// track starts or stops keeping status writes (see tracking); stopping
// drops those kept.
func (c *source) track(on bool) {
	c.tracking = on
	if !on {
		c.writes = trimmed(c.writes)
	}
}

// trimmed empties ws for reuse, or drops it when a burst grew it past
// bigScratch: between two complete reads it holds a write per row
// announced (16 MB after a load of a million routes), which would
// otherwise stay allocated until the process ends.
func trimmed(ws []statusWrite) []statusWrite {
	if cap(ws) > bigScratch {
		return nil
	}
	return ws[:0]
}

// wrote records that the store holds st for row id since at.
func (c *source) wrote(id int64, st ruleStatus, at time.Time) {
	rw := c.byID.get(id)
	if rw == nil {
		return
	}
	rw.setStatus(st)
	if !c.tracking {
		return
	}
	c.writes = append(c.writes, statusWrite{id: id, at: at.UnixNano()})
	if len(c.writes) > 2*c.byID.len()+1024 {
		// Keep the latest write of each row still in the copy.
		slices.SortFunc(c.writes, func(a, b statusWrite) int {
			return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(b.at, a.at))
		})
		c.writes = slices.CompactFunc(c.writes, func(a, b statusWrite) bool { return a.id == b.id })
		c.writes = slices.DeleteFunc(c.writes, func(w statusWrite) bool { return c.byID.get(w.id) == nil })
	}
}

// row is what the reconciler keeps of a stored rule: what lifecycle,
// validation, the path and the status write-back look at, and nothing of
// its text, reason, actor, sites or timestamps (a third of the size).
// EachActive already filters by site. It is 56 bytes: the last error is
// an interned handle (errors are few and repeat; a string header was 8
// bytes more per row, a million rules 8 MB).
type row struct {
	ID      int64
	Match   flowspec.Match
	Action  flowspec.Action
	expires int64 // ExpiresAt in Unix ns; 0: never
	lastErr errText
	flags   uint8
}

// errText is an interned error text; the zero errText is "".
type errText struct{ h unique.Handle[string] }

func errTextOf(s string) errText {
	if s == "" {
		return errText{}
	}
	return errText{unique.Make(s)}
}

func (e errText) String() string {
	if e == (errText{}) {
		return ""
	}
	return e.h.Value()
}

const (
	rowWithdraw  = 1 << iota // WithdrawRequested
	rowFinal                 // State set and not Active
	rowAnnounced             // this site's status: announced
	rowAdopted               // the reconciler found its path in the RIB as wanted (source.adopted)
	rowSeen                  // its path was seen in the RIB with its Action (drift counts; see announce)
	rowShared                // its Match has other rows too (the store broke its own uniqueness)
	rowExtra                 // in source.extra, not in rows
	rowStale                 // replaced or gone: no longer in byID
)

// rowKept are the flags the reconciler keeps on a row read again with the
// same lifecycle (source.apply).
const rowKept = rowAdopted | rowSeen | rowShared

// rowOf compacts a stored rule.
func rowOf(r *store.Rule) row {
	c := row{ID: r.ID, Match: r.Rule.Match, Action: r.Rule.Action, lastErr: errTextOf(r.LastError)}
	if !r.ExpiresAt.IsZero() {
		c.expires = r.ExpiresAt.UnixNano()
	}
	if r.WithdrawRequested {
		c.flags |= rowWithdraw
	}
	if r.State != "" && r.State != store.Active {
		c.flags |= rowFinal
	}
	if r.Announced {
		c.flags |= rowAnnounced
	}
	return c
}

func (r *row) withdrawRequested() bool { return r.flags&rowWithdraw != 0 }
func (r *row) final() bool             { return r.flags&rowFinal != 0 }
func (r *row) announced() bool         { return r.flags&rowAnnounced != 0 }

// status returns the status the store holds for the row, as far as the
// reconciler knows: as read, or as last written by it since.
func (r *row) status() ruleStatus {
	return ruleStatus{announced: r.announced(), lastErr: r.lastErr.String()}
}

// setStatus records st as what the store holds for the row.
func (r *row) setStatus(st ruleStatus) {
	r.lastErr = errTextOf(st.lastErr)
	if st.announced {
		r.flags |= rowAnnounced
	} else {
		r.flags &^= rowAnnounced
	}
}

// expiresAt returns ExpiresAt, zero if never.
func (r *row) expiresAt() time.Time {
	if r.expires == 0 {
		return time.Time{}
	}
	return time.Unix(0, r.expires)
}

// matchIDs indexes rows by Match: the first row of each Match in one,
// the others (the store breaking its own uniqueness) in more, which stays
// nil until then. A Match's rows are one's followed by more[m]. Keeping
// the rare duplicates apart keeps one a table of a pointer per Match.
type matchIDs struct {
	one  rowIndex
	more map[flowspec.Match][]*row
}

func newMatchIDs(n int) matchIDs { return matchIDs{one: newRowIndex(n, true)} }

// has reports whether m has a row.
func (x *matchIDs) has(m flowspec.Match) bool { return x.one.getMatch(m) != nil }

// only returns m's row when m has exactly one.
func (x *matchIDs) only(m flowspec.Match) (*row, bool) {
	r := x.one.getMatch(m)
	return r, r != nil && len(x.more[m]) == 0
}

// shared reports whether m has several rows.
func (x *matchIDs) shared(m flowspec.Match) bool { return len(x.more[m]) > 0 }

// each calls fn with every row of m.
func (x *matchIDs) each(m flowspec.Match, fn func(*row)) {
	r := x.one.getMatch(m)
	if r == nil {
		return
	}
	fn(r)
	for _, r := range x.more[m] {
		fn(r)
	}
}

// all calls fn with every Match that has a row.
func (x *matchIDs) all(fn func(flowspec.Match)) {
	x.one.all(func(r *row) { fn(r.Match) })
}

// len returns the number of Matches with a row.
func (x *matchIDs) len() int { return x.one.len() }

// add adds r to its Match's rows and reports whether the Match has
// several now.
func (x *matchIDs) add(r *row) (shared bool) {
	if !x.one.match { // the zero matchIDs
		x.one = newRowIndex(0, true)
	}
	if x.one.getMatch(r.Match) == nil {
		x.one.put(r)
		return false
	}
	if x.more == nil {
		x.more = make(map[flowspec.Match][]*row)
	}
	x.more[r.Match] = append(x.more[r.Match], r)
	return true
}

// remove removes r from its Match's rows and reports whether the Match
// has any left.
func (x *matchIDs) remove(r *row) (left bool) {
	m := r.Match
	more := x.more[m]
	switch first := x.one.getMatch(m); {
	case first == nil:
		return false
	case first == r && len(more) == 0:
		x.one.del(r)
		return false
	case first == r:
		x.one.swap(r, more[len(more)-1])
		more = more[:len(more)-1]
	default:
		more = slices.DeleteFunc(more, func(o *row) bool { return o == r })
	}
	if len(more) == 0 {
		delete(x.more, m)
	} else {
		x.more[m] = more
	}
	return true
}

// moved points the index at to, a copy of from (compactRows).
func (x *matchIDs) moved(from, to *row) {
	if x.one.swap(from, to) {
		return
	}
	if more := x.more[from.Match]; more != nil {
		if i := slices.Index(more, from); i >= 0 {
			more[i] = to
		}
	}
}

// serverMoves is the store's count of moves to another database server
// (store.Store.ServerMoves), 0 for a store without one. The copy's
// revision means nothing on another server: a move makes the next read
// complete.
func serverMoves(d Desired) uint64 {
	if m, ok := d.(interface{ ServerMoves() uint64 }); ok {
		return m.ServerMoves()
	}
	return 0
}

// read refreshes the copy: every row when full is set or when there is no
// copy yet; otherwise only what changed since the copy's revision (the
// reads made ahead first, see prefetch). all reports a complete re-read;
// otherwise dirty is called with the Match of every row that changed
// (before and after the change). changed reports whether the rows may
// differ from the last call's. On an error the copy is left as it was, or
// as the reads made ahead left it.
//
// snap, when not nil, is a complete read made off the loop (readSnapshot):
// the copy is replaced by it and brought up to date with what changed
// since it was taken, which costs the loop no more than an incremental
// read. If that catching up fails, the copy stays as it was.
func (c *source) read(ctx context.Context, d Desired, now time.Time, full bool, snap *snapshot, dirty func(flowspec.Match)) (changed, all bool, err error) {
	if snap != nil || full || !c.ok || serverMoves(d) != c.moves {
		c.ahead = nil
	}
	if snap != nil && snap.sums != nil {
		if snap.err != nil {
			return false, false, snap.err
		}
		if !c.ok || serverMoves(d) != c.moves {
			// No copy to check, or its revision means nothing on
			// the server the store moved to: read every row.
			snap, full = nil, true
		} else {
			ok, err := c.verify(ctx, d, snap, dirty)
			if err != nil {
				return false, false, err
			}
			if ok {
				return true, true, nil
			}
			// The copy drifted from the store: read every row, here.
			snap, full = nil, true
			c.drifted++
		}
	}
	if snap != nil {
		// Also the first read, from a seed (Reconciler.Seed).
		if snap.err != nil {
			return false, false, snap.err
		}
		delta, err := c.changedSince(ctx, d, snap.rev)
		if err != nil {
			return false, false, err
		}
		old := c.byID
		c.byID, c.byMatch, c.expiry, c.adopted = snap.byID, snap.byMatch, snap.expiry, 0
		c.rows, c.extra, c.staleExtra, c.staleRows = snap.rows, nil, 0, 0
		c.rev = max(snap.rev, delta.next)
		// Status writes move no revision: the snapshot does not hold
		// those that returned after it started, and the catching up
		// below does not re-read them. What was written takes precedence.
		since := snap.at.UnixNano()
		for _, w := range c.writes {
			if w.at < since {
				continue
			}
			if o, n := old.get(w.id), c.byID.get(w.id); o != nil && n != nil {
				n.setStatus(o.status())
			}
		}
		c.writes = trimmed(c.writes)
		c.apply(delta, func(flowspec.Match) {})
		c.ok, c.fullAt = true, snap.at
		return true, true, nil
	}
	moves := serverMoves(d)
	if full || !c.ok || moves != c.moves {
		rev, err := d.Revision(ctx)
		if err != nil {
			return false, false, err
		}
		rows, err := readAll(ctx, d, c.byID.len())
		if err != nil {
			return false, false, err
		}
		c.rev, c.moves = rev, moves
		c.loadRows(rows)
		c.ok, c.fullAt = true, now
		return true, true, nil
	}
	ahead := c.catchUp(dirty)
	delta, err := c.changedSince(ctx, d, c.rev)
	if err != nil {
		return ahead, false, err
	}
	c.rev = max(c.rev, delta.next)
	if !c.apply(delta, dirty) && !ahead {
		return false, false, nil
	}
	return true, false, nil
}

// delta is what changed in the desired rows after a revision, compacted
// as it streamed from the store (source.changedSince).
type delta struct {
	active     []row
	gone       []int64
	from, next int64
}

// maxScratchRows bounds the rows changedSince keeps for the next read
// (~4.7 MB): a bulk load's deltas (a batch of 5,000 rules or more each)
// reuse one slice instead of growing a new one every pass.
const maxScratchRows = 1 << 16

// changedSince reads what changed after rev, compacting each rule as it
// arrives (a bulk load's million changes are never held as store.Rules).
// The rows go into the source's scratch, reused by the next read: the
// delta is good until then.
func (c *source) changedSince(ctx context.Context, d Desired, rev int64) (delta, error) {
	dl, err := readDelta(ctx, d, rev, c.scratch[:0])
	if cap(dl.active) > maxScratchRows {
		c.scratch = nil // a burst's rows are not kept until the next
	} else {
		c.scratch = dl.active[:0]
	}
	return dl, err
}

// readDelta reads what changed in d after rev into buf's array.
func readDelta(ctx context.Context, d Desired, rev int64, buf []row) (delta, error) {
	ch, err := d.EachChangedSince(ctx, rev, func(r *store.Rule) error {
		buf = append(buf, rowOf(r))
		return nil
	})
	if err != nil {
		return delta{active: buf[:0]}, err
	}
	return delta{active: buf, gone: ch.Gone, from: rev, next: ch.Next}, nil
}

// apply brings the copy up to date with delta and reports whether any
// row changed in what a pass looks at.
func (c *source) apply(delta delta, dirty func(flowspec.Match)) (changed bool) {
	return c.applyRead(delta, dirty, false)
}

// applyRead is apply; ahead says delta was read ahead of this pass
// (prefetch), before the status writes of the pass that read it: a row
// read again with the same lifecycle keeps the status the copy holds,
// which is at least as new (only this site's reconciler writes it).
func (c *source) applyRead(delta delta, dirty func(flowspec.Match), ahead bool) (changed bool) {
	for _, id := range delta.gone {
		if old := c.byID.get(id); old != nil {
			changed = true
			dirty(old.Match)
			c.unindex(old)
			c.byID.del(old)
			c.stale(old)
		}
	}
	for i := range delta.active {
		r := delta.active[i]
		old := c.byID.get(r.ID)
		ok := old != nil
		if ok && sameLifecycle(old, &r) {
			// Read again (PostgreSQL re-reads behind recent revisions
			// until they settle) or changed in nothing a pass looks at.
			r.flags |= old.flags & (rowKept | rowExtra)
			if ahead {
				r.setStatus(old.status())
			}
			*old = r
			continue
		}
		changed = true
		if ok {
			if old.Match == r.Match && old.Action == r.Action {
				r.flags |= old.flags & rowSeen // a new TTL: the same path
			}
			dirty(old.Match)
			c.unindex(old)
			c.byID.del(old)
			c.stale(old)
		}
		dirty(r.Match)
		r.flags |= rowExtra
		c.byID.put(&r)
		c.extra = append(c.extra, &r)
		c.index(&r)
	}
	if c.staleExtra > 1024 && c.staleExtra > len(c.extra)/2 {
		c.extra = slices.DeleteFunc(c.extra, func(r *row) bool { return r.flags&rowStale != 0 })
		c.staleExtra = 0
	}
	if changed && len(c.expiry) > 2*c.byID.len()+1024 {
		c.rebuildExpiry()
	}
	return changed
}

// snapshot is a complete read of the desired rows made off the loop
// goroutine: indexed and ready to swap in (a seed, Reconciler.Seed), or
// only a sum of each row (the periodic resync, readSums).
type snapshot struct {
	rev     int64
	at      time.Time // when the read started
	took    time.Duration
	err     error
	byID    rowIndex
	byMatch matchIDs
	expiry  expiryHeap
	rows    []row
	// sums, when not nil, is the read as rowSums in id order, and the
	// other fields are empty: source.verify compares it with the copy.
	sums []rowSum
}

// rowSum is a row of a complete read as its id and a hash of what the
// reconciler keeps of it (sumOf).
type rowSum struct {
	id  int64
	sum uint64
}

// sumKey is what a rowSum hashes: everything rowOf keeps of a stored
// rule, none of what the reconciler adds (rowKept and the bookkeeping
// flags).
type sumKey struct {
	match   flowspec.Match
	action  flowspec.Action
	expires int64
	lastErr errText
	flags   uint8
}

// sumSeed returns the seed of the copy's sums (readSums, verify), made
// on first use.
func (c *source) sumSeed() maphash.Seed {
	if c.seed == (maphash.Seed{}) {
		c.seed = maphash.MakeSeed()
	}
	return c.seed
}

// sumOf hashes what r says of its stored rule. seed is the process's
// (sums are compared within it only).
func sumOf(seed maphash.Seed, r *row) uint64 {
	return maphash.Comparable(seed, sumKey{r.Match, r.Action, r.expires, r.lastErr, r.flags & (rowWithdraw | rowFinal | rowAnnounced)})
}

// readSums reads every active row of d as sums, for the periodic resync:
// the safety net must catch a copy that drifted from the store (a change
// the revisions did not show), but a second copy of a million rows to
// find that out cost ~100 MB for the length of the read and its swap
// (170-250 MB before the copy's tables shrank); sums cost 16 bytes a row.
// sizeHint is the rows expected. It touches nothing of the reconciler.
func readSums(ctx context.Context, d Desired, seed maphash.Seed, now func() time.Time, sizeHint int) *snapshot {
	s := &snapshot{at: now()}
	if s.rev, s.err = d.Revision(ctx); s.err != nil {
		return s
	}
	sums := make([]rowSum, 0, sizeHint+sizeHint/16+16)
	if s.err = d.EachActive(ctx, func(r *store.Rule) error {
		rw := rowOf(r)
		sums = append(sums, rowSum{id: rw.ID, sum: sumOf(seed, &rw)})
		return nil
	}); s.err != nil {
		return s
	}
	// EachActive walks in id order; a store that did not is sorted here.
	if !slices.IsSortedFunc(sums, func(a, b rowSum) int { return cmp.Compare(a.id, b.id) }) {
		slices.SortFunc(sums, func(a, b rowSum) int { return cmp.Compare(a.id, b.id) })
	}
	s.sums = sums
	s.took = now().Sub(s.at)
	return s
}

// verify checks the copy against snap, a complete read as sums, and when
// they agree brings the copy up to date as an incremental read does, and
// reports true. Rows that changed since either was read are not compared
// (the changes since the older of the two revisions, and the rows whose
// status the reconciler wrote after the read started: status writes move
// no revision); every other row must be in both, with the same sum.
// On false the copy is left as it was: the caller reads every row.
func (c *source) verify(ctx context.Context, d Desired, snap *snapshot, dirty func(flowspec.Match)) (bool, error) {
	from := min(c.rev, snap.rev)
	c.ahead = nil
	delta, err := c.changedSince(ctx, d, from)
	if err != nil {
		return false, err
	}
	skip := make([]int64, 0, len(delta.active)+len(delta.gone)+len(c.writes))
	for i := range delta.active {
		skip = append(skip, delta.active[i].ID)
	}
	skip = append(skip, delta.gone...)
	since := snap.at.UnixNano()
	for _, w := range c.writes {
		if w.at >= since {
			skip = append(skip, w.id)
		}
	}
	slices.Sort(skip)
	skip = slices.Compact(skip)
	skipped := func(id int64) bool { _, ok := slices.BinarySearch(skip, id); return ok }
	compared := 0
	for _, e := range snap.sums {
		if skipped(e.id) {
			continue
		}
		r := c.byID.get(e.id)
		if r == nil || sumOf(c.sumSeed(), r) != e.sum {
			return false, nil
		}
		compared++
	}
	// Every row of the copy not skipped was compared: no row is only in
	// the copy.
	inCopy := c.byID.len()
	for _, id := range skip {
		if c.byID.get(id) != nil {
			inCopy--
		}
	}
	if inCopy != compared {
		return false, nil
	}
	c.writes = trimmed(c.writes)
	c.rev = max(c.rev, delta.next)
	c.apply(delta, dirty)
	c.fullAt = snap.at
	return true, nil
}

// readSnapshot reads every active row of d and indexes them; sizeHint is
// the rows expected (the copy's, read on the loop). It touches nothing of
// the reconciler: it runs on its own goroutine while the loop goes on.
func readSnapshot(ctx context.Context, d Desired, now func() time.Time, sizeHint int) *snapshot {
	s := &snapshot{at: now()}
	if s.rev, s.err = d.Revision(ctx); s.err != nil {
		return s
	}
	rows, err := readAll(ctx, d, sizeHint)
	if err != nil {
		s.err = err
		return s
	}
	s.index(rows)
	s.took = now().Sub(s.at)
	return s
}

// index indexes rows into s, pointing into them.
func (s *snapshot) index(rows []row) {
	var c source
	c.loadRows(rows)
	s.byID, s.byMatch, s.expiry, s.rows = c.byID, c.byMatch, c.expiry, c.rows
}

// Rows collects a complete read of the desired state compacted as it
// streams from the store, for Reconciler.Seed: Add is EachActive's
// callback (or called from it). The zero Rows is ready to use.
type Rows struct {
	rows []row
}

// Add compacts r (keeping none of it) into the read. The rows double
// when full (append grows a large slice by a quarter: a table of 100,000
// rows was copied about twenty times over while the start-up walk ran).
func (rs *Rows) Add(r *store.Rule) {
	if len(rs.rows) == cap(rs.rows) {
		rs.rows = slices.Grow(rs.rows, max(len(rs.rows), 256))
	}
	rs.rows = append(rs.rows, rowOf(r))
}

// Len returns the rules added so far.
func (rs *Rows) Len() int { return len(rs.rows) }

// take returns the rows and empties rs.
func (rs *Rows) take() []row {
	out := rs.rows
	rs.rows = nil
	return out
}

// readAll reads every active row of d, compacting each as it arrives: the
// read holds one store.Rule at a time, never the table. n is the expected
// count (the copy's size), to size the rows at once.
func readAll(ctx context.Context, d Desired, n int) ([]row, error) {
	rs := Rows{rows: make([]row, 0, n)}
	if err := d.EachActive(ctx, func(r *store.Rule) error {
		rs.Add(r)
		return nil
	}); err != nil {
		return nil, err
	}
	return rs.take(), nil
}

// sameLifecycle reports whether a and b, two readings of one rule, give
// the same view: what the reconciler derives from a row (lifecycle,
// validation, the path) depends on these fields only.
func sameLifecycle(a, b *row) bool {
	return a.Match == b.Match && a.Action == b.Action && a.expires == b.expires &&
		a.flags&(rowWithdraw|rowFinal) == b.flags&(rowWithdraw|rowFinal)
}

// loadRows replaces the copy with rows, pointing into them.
func (c *source) loadRows(rows []row) {
	// Fresh tables: a map keeps its largest size, and the old rows are
	// garbage once the tables no longer point into them.
	old := c.byID
	defer c.carry(old)
	c.rows, c.extra, c.staleExtra, c.staleRows = rows, nil, 0, 0
	c.byID = newRowIndex(len(rows), false)
	c.byMatch = newMatchIDs(len(rows))
	c.expiry = make(expiryHeap, 0, len(rows)/4)
	c.adopted = 0
	for i := range rows {
		r := &rows[i]
		r.Match = r.Match.Clone() // see compactRows
		if c.byID.get(r.ID) != nil {
			// Not from a store (ids are its keys): the first row of
			// an id stands.
			r.flags |= rowStale
			c.staleRows++
			continue
		}
		c.byID.put(r)
		if c.byMatch.add(r) {
			c.share(r.Match)
		}
		if expiring(r) {
			c.expiry = append(c.expiry, expiryEntry{at: r.expires, id: r.ID})
		}
	}
	c.expiry = slices.Clip(c.expiry)
	c.expiry.init()
}

// carry keeps rowSeen on the rows just read on the loop (load) that ask
// for the same path as in old, the copy they replace. A snapshot swapped
// in does not carry it (a lookup per row on the loop): the comparison
// that follows sets it again on every path it adopts, and a path found
// missing or changed by that very pass counts as added or updated, not
// as drift.
func (c *source) carry(old rowIndex) {
	if old.len() == 0 {
		return
	}
	c.byID.all(func(n *row) {
		if o := old.get(n.ID); o != nil && o.Match == n.Match && o.Action == n.Action {
			n.flags |= o.flags & rowSeen
		}
	})
}

// stale marks r, just taken out of byID, as no longer a row of the copy
// (see rows), and drops what it holds.
func (c *source) stale(r *row) {
	if r.flags&rowExtra != 0 {
		c.staleExtra++
	} else {
		c.staleRows++
	}
	*r = row{ID: r.ID, flags: rowStale}
}

// compactRows moves every live row into one new slice when the rows read
// since the last complete read (extra, each allocated on its own) outnumber
// the others: after a bulk load the copy then sits in one block instead of
// 100,000 small objects scattered among the burst's garbage (each keeps
// a heap span from going back to the OS: after a bulk load the heap held
// 276 MB of spans for 145 MB of objects), and the full comparison walks
// it in memory order. It doubles the rows each
// time, so its cost stays proportional to the rows added. Only between
// passes: it moves the rows byID points to.
//
// quiet says the burst is over (no pass ran for compactAfter: Run's
// settle timer): then every row goes into the one block however few came
// in since, so that the
// half of a bulk load that came after the last doubling is not left
// scattered until the next complete read (at a million routes, ~80 MB
// of small objects and the spans they pin).
func (c *source) compactRows(quiet bool) (moved bool) {
	if !c.scattered() || (len(c.extra)-c.staleExtra < len(c.rows) && !quiet) {
		return false
	}
	live := make([]row, 0, c.byID.len())
	for i := range c.rows {
		if c.rows[i].flags&rowStale == 0 {
			live = append(live, c.rows[i])
		}
	}
	for _, r := range c.extra {
		if r.flags&rowStale == 0 {
			live = append(live, *r)
		}
	}
	if len(live) != c.byID.len() {
		return false // not the invariant this relies on; leave the copy alone
	}
	for i := range live {
		live[i].flags &^= rowExtra
		// The old row still holds its key: the indexes find it by it.
		from := c.byID.get(live[i].ID)
		// The Matches too, one after the other: decoded amid a read's
		// garbage, each small one held a 16-byte block of its own (see
		// flowspec.Match.Clone); 8 MB at a million routes.
		live[i].Match = live[i].Match.Clone()
		c.byID.swap(from, &live[i])
		c.byMatch.moved(from, &live[i])
	}
	c.rows, c.extra, c.staleExtra, c.staleRows = live, nil, 0, 0
	return true
}

// compactAfter is how long the loop waits after a pass before compacting
// the rows it left scattered (Run's settle timer).
const compactAfter = time.Second

// scattered reports whether compactRows(true) would move rows: many
// rows came in since the last complete read, or most of those it read
// are gone (a mass withdrawal; the periodic resync keeps the copy, so
// nothing else gives their array back).
func (c *source) scattered() bool {
	return len(c.extra)-c.staleExtra >= bigScratch || (c.staleRows >= bigScratch && 2*c.staleRows > len(c.rows))
}

// share sets rowShared on the rows of m when it has several, clears it
// when it has one.
func (c *source) share(m flowspec.Match) {
	shared := c.byMatch.shared(m)
	c.byMatch.each(m, func(r *row) {
		if shared {
			r.flags |= rowShared
		} else {
			r.flags &^= rowShared
		}
	})
}

func (c *source) index(r *row) {
	if c.byMatch.add(r) {
		c.share(r.Match)
	}
	if expiring(r) {
		c.expiry.push(expiryEntry{at: r.expires, id: r.ID})
	}
}

// unindex removes r from byMatch; its expiry entry goes stale and is
// dropped lazily (see valid).
func (c *source) unindex(r *row) {
	c.unadopt(r)
	r.flags &^= rowShared
	if c.byMatch.remove(r) {
		c.share(r.Match)
	}
}

func (c *source) rebuildExpiry() {
	if cap(c.expiry) > 4*c.byID.len()+1024 {
		c.expiry = nil // most rows went: give the array back
	} else {
		c.expiry = c.expiry[:0]
	}
	c.byID.all(func(r *row) {
		if expiring(r) {
			c.expiry = append(c.expiry, expiryEntry{at: r.expires, id: r.ID})
		}
	})
	c.expiry.init()
}

// each calls fn with every row of the copy, in memory order.
func (c *source) each(fn func(*row) bool) bool {
	for i := range c.rows {
		if r := &c.rows[i]; r.flags&rowStale == 0 && !fn(r) {
			return false
		}
	}
	for _, r := range c.extra {
		if r.flags&rowStale == 0 && !fn(r) {
			return false
		}
	}
	return true
}

// rowsOf appends the rows of Match m to buf.
func (c *source) rowsOf(m flowspec.Match, buf []*row) []*row {
	c.byMatch.each(m, func(r *row) { buf = append(buf, r) })
	return buf
}

// expiring reports whether r will turn retiring by the clock alone: it
// is active, not already withdrawn, and has an ExpiresAt.
func expiring(r *row) bool {
	return r.expires != 0 && r.flags&(rowWithdraw|rowFinal) == 0
}

// valid reports whether e still describes a row of the copy.
func (c *source) valid(e expiryEntry) bool {
	r := c.byID.get(e.id)
	return r != nil && expiring(r) && r.expires == e.at
}

// due calls fn with the Match of every row whose ExpiresAt has come by now
// and forgets them: from now on they are retiring, which the view of
// their Match shows once it is refreshed.
func (c *source) due(now time.Time, fn func(flowspec.Match)) {
	t := now.UnixNano()
	for len(c.expiry) > 0 && c.expiry[0].at <= t {
		e := c.expiry.pop()
		if c.valid(e) {
			fn(c.byID.get(e.id).Match)
		}
	}
}

// nextExpiry returns the nearest ExpiresAt among the rows that are not
// retiring yet (after due), zero if none.
func (c *source) nextExpiry() time.Time {
	for len(c.expiry) > 0 {
		if e := c.expiry[0]; c.valid(e) {
			return c.byID.get(e.id).expiresAt()
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

// unadopt clears r's rowAdopted flag.
func (c *source) unadopt(r *row) {
	if r.flags&rowAdopted != 0 {
		r.flags &^= rowAdopted
		c.adopted--
	}
}
