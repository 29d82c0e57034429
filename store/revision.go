package store

import (
	"context"
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
// runs may show their newer state; they show again in the next delta.
func (s *Store) ChangedSince(ctx context.Context, rev int64) (Delta, error) {
	next, err := s.Revision(ctx)
	if err != nil {
		return Delta{}, err
	}
	d := Delta{Next: next}
	if next <= rev {
		d.Next = rev
		return d, nil
	}
	cctx, cancel := s.call(ctx, 1+int(min(next-rev, 1<<20)/1000))
	defer cancel()
	const changed = `SELECT DISTINCT rule_id FROM rule_events WHERE id > ? AND id <= ? AND kind <> 'status'`
	rs, err := s.eng.reader().query(cctx, changed, rev, next)
	if err != nil {
		return Delta{}, s.wrap(ctx, "read changed rules", err)
	}
	ids := make(map[int64]bool)
	for rs.Next() {
		var id int64
		if err := rs.Scan(&id); err != nil {
			rs.Close()
			return Delta{}, s.wrap(ctx, "read changed rules", err)
		}
		ids[id] = false
	}
	err = rs.Err()
	rs.Close()
	if err != nil {
		return Delta{}, s.wrap(ctx, "read changed rules", err)
	}
	if len(ids) == 0 {
		return d, nil
	}
	d.Active, err = s.listWith(ctx, "read changed rules", scanBrief, "SELECT "+briefCols+ruleFrom+
		" WHERE r.id IN (SELECT rule_id FROM rule_events WHERE id > ? AND id <= ? AND kind <> 'status')"+
		" AND r.state = 'active' AND "+s.eng.siteFilter()+" ORDER BY r.id", s.site, rev, next, s.site)
	if err != nil {
		return Delta{}, err
	}
	for _, r := range d.Active {
		ids[r.ID] = true
	}
	for id, active := range ids {
		if !active {
			d.Gone = append(d.Gone, id)
		}
	}
	return d, nil
}
