package store

import (
	"context"
	"slices"
)

// Revisions let a reader keep a copy of desired state and refresh only what
// changed. A revision is the id of a history entry: every change to desired
// state writes one in the same transaction (status writes too, with kind
// "status", which ChangedSince ignores).
//
// History ids become visible in id order on both engines, so "everything
// after rev" is exact: SQLite allocates them under its single write lock;
// on PostgreSQL, where a sequence would let a transaction commit after one
// with a higher id, every transaction takes an advisory lock right before it
// inserts history entries and holds it until it ends (lockHistory). That
// serializes only the last moments of writes that change something, and
// saves every reader from re-reading a window of recent changes on every
// pass.

// Delta is what changed in desired state after a revision.
type Delta struct {
	// Active holds the changed rules that are active for this site now,
	// with this site's status, in id order; brief, as ActiveRules's.
	Active []Rule
	// Gone holds the ids of changed rules that are no longer active for
	// this site (final, or no longer targeting it).
	Gone []int64
	// Next is the newest revision the delta covers.
	Next int64
}

// ServerMoves counts the times the store moved to another database
// server (a PostgreSQL failover; always 0 on SQLite). Revisions read
// from one server do not compare with another's: the new primary may
// lack the last events a reader saw on the old one (committed there,
// not yet on the standby) and then number its own events with the same
// ids. A reader whose count changed reads every row again instead of
// asking ChangedSince.
func (s *Store) ServerMoves() uint64 {
	if pg, ok := s.eng.(*pgEngine); ok {
		return pg.moves.Load()
	}
	return 0
}

// Revision returns the newest revision: one indexed lookup. A reader that
// reads it before a full read (EachActive) and then asks ChangedSince(rev)
// misses nothing.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	if err := s.untrusted(); err != nil {
		return 0, err // and so ChangedSince (integrity.go)
	}
	cctx, cancel := s.call(ctx, 1)
	defer cancel()
	var rev int64
	err := s.eng.reader().queryRow(cctx, "SELECT COALESCE(MAX(id), 0) FROM rule_events").Scan(&rev)
	return rev, s.wrap(ctx, "read revision", err)
}

// ChangedSince returns the rules changed by history entries after rev. When
// nothing changed it costs one indexed lookup. Rules changed again while it
// runs may show their newer state; they show again in the next delta. It
// holds every changed rule at once; EachChangedSince streams them.
func (s *Store) ChangedSince(ctx context.Context, rev int64) (Delta, error) {
	var d Delta
	ch, err := s.EachChangedSince(ctx, rev, func(r *Rule) error {
		d.Active = append(d.Active, *r)
		return nil
	})
	if err != nil {
		return Delta{}, err
	}
	d.Gone, d.Next = ch.Gone, ch.Next
	return d, nil
}

// Changes is what EachChangedSince returns besides the rules it streams.
type Changes struct {
	// Gone holds the ids of changed rules that are no longer active for
	// this site (final, no longer targeting it, or deleted), in id order.
	Gone []int64
	// Next is the newest revision the changes cover.
	Next int64
}

// EachChangedSince calls fn with every rule changed by history entries
// after rev that is active for this site now, brief and with this site's
// status, in id order, one at a time as EachActive does (the same *Rule
// each time: copy values out, never keep it), and returns the changed
// rules that are no longer active. A reader that follows a million
// changes (a bulk load) holds one rule at a time, not a million. An
// error from fn ends the read and is returned as it is. The read is
// bounded by its progress, as EachActive's.
func (s *Store) EachChangedSince(ctx context.Context, rev int64, fn func(*Rule) error) (Changes, error) {
	const op = "read changed rules"
	next, err := s.Revision(ctx)
	if err != nil {
		return Changes{}, err
	}
	if next <= rev {
		return Changes{Next: rev}, nil
	}
	cctx, w := s.progressCall(ctx)
	defer w.stop()
	// In history order, sorted and deduplicated here: SQLite's DISTINCT
	// ... ORDER BY built a temporary B-tree of every id first.
	const changed = `SELECT rule_id FROM rule_events WHERE id > ? AND id <= ? AND kind <> 'status'`
	rs, err := s.eng.reader().query(cctx, changed, rev, next)
	if err != nil {
		return Changes{}, s.wrap(ctx, op, w.why(err))
	}
	var ids []int64
	for rs.Next() {
		w.row()
		var id int64
		if err := rs.Scan(&id); err != nil {
			rs.Close()
			return Changes{}, s.wrap(ctx, op, w.why(err))
		}
		ids = append(ids, id)
	}
	err = rs.Err()
	rs.Close()
	if err != nil {
		return Changes{}, s.wrap(ctx, op, w.why(err))
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	ch := Changes{Next: next}
	if len(ids) == 0 {
		return ch, nil
	}
	which, lo, hi := " WHERE r.id IN (SELECT rule_id FROM rule_events WHERE id > ? AND id <= ? AND kind <> 'status')", rev, next
	if n := len(ids); ids[n-1]-ids[0] == int64(n-1) {
		// The changed ids are one run (a bulk load's rules): a range of
		// the primary key, not a lookup of each id in the history again.
		which, lo, hi = " WHERE r.id BETWEEN ? AND ?", ids[0], ids[n-1]
	}
	rs, err = s.eng.reader().query(cctx, "SELECT "+briefCols+ruleFrom+which+
		" AND r.state = 'active' AND "+s.eng.siteFilter()+" ORDER BY r.id", s.site, lo, hi, s.site)
	if err != nil {
		return Changes{}, s.wrap(ctx, op, w.why(err))
	}
	defer rs.Close()
	// Both reads are in id order: the changed ids the active rows skip
	// are the gone ones.
	i := 0
	var r Rule
	b := newBriefScan(&r)
	for rs.Next() {
		if w.row() {
			if err := cctx.Err(); err != nil {
				return Changes{}, s.wrap(ctx, op, w.why(err))
			}
		}
		if err := b.scan(rs); err != nil {
			return Changes{}, s.wrap(ctx, op, w.why(err))
		}
		for i < len(ids) && ids[i] < r.ID {
			ch.Gone = append(ch.Gone, ids[i])
			i++
		}
		if i < len(ids) && ids[i] == r.ID {
			i++
		}
		w.handing()
		err := fn(&r)
		w.handed()
		if err != nil {
			return Changes{}, err
		}
	}
	if err := rs.Err(); err != nil {
		return Changes{}, s.wrap(ctx, op, w.why(err))
	}
	if err := cctx.Err(); err != nil {
		return Changes{}, s.wrap(ctx, op, w.why(err))
	}
	ch.Gone = append(ch.Gone, ids[i:]...)
	return ch, nil
}
