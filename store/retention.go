package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// DefaultPurgeBatch is how many rows PurgeHistory deletes per transaction:
// small, so that a purge never holds the write lock (SQLite) or many row
// locks (PostgreSQL) for long.
const DefaultPurgeBatch = 500

// Purged counts what PurgeHistory deleted.
type Purged struct {
	Events int // history entries
	Rules  int // withdrawn or expired rules, with their status and history
}

// PurgeHistory deletes what is older than before, batch rows per
// transaction (DefaultPurgeBatch when batch <= 0), until nothing is left:
// history entries recorded before it (in id order: those before the
// first entry recorded at or after it), and withdrawn or expired rules last
// changed before it, with their status and history. Active rules stay,
// whatever their age (their old history entries go). The newest history
// entry always stays, so the revision never goes back. Safe to run from
// several instances at once; a caller runs it off the hot path, on a timer.
func (s *Store) PurgeHistory(ctx context.Context, before time.Time, batch int) (Purged, error) {
	if batch <= 0 {
		batch = DefaultPurgeBatch
	}
	var total Purged
	cut := s.eng.timeArg(normTime(before))
	// History goes by id order only: every entry before the first one
	// recorded at or after the cut (and never the newest). A rule's
	// created entry, rebuilt from the entries after it (rebuildCreated),
	// is then never kept without them, even where the clock stepped back.
	var bound int64
	cctx, cancel := s.call(ctx, 1)
	err := s.eng.reader().queryRow(cctx, `SELECT COALESCE(
		(SELECT id FROM rule_events WHERE at >= ? ORDER BY id LIMIT 1),
		(SELECT MAX(id) FROM rule_events), 0)`, cut).Scan(&bound)
	cancel()
	if err != nil {
		return total, s.wrap(ctx, "purge history", err)
	}
	for {
		var n int64
		err := s.write(ctx, "purge history", batch, func(ctx context.Context, t *wtx) (bool, error) {
			var err error
			n, err = t.exec(ctx, `DELETE FROM rule_events WHERE id IN (SELECT id FROM rule_events
				WHERE id < ? AND id < (SELECT MAX(id) FROM rule_events) ORDER BY id LIMIT ?)`, bound, batch)
			return false, err
		})
		if err != nil {
			return total, err
		}
		total.Events += int(n)
		if n < int64(batch) {
			break
		}
	}
	for {
		var (
			ids     []any
			deleted int
		)
		err := s.write(ctx, "purge finished rules", batch, func(ctx context.Context, t *wtx) (bool, error) {
			ids = ids[:0]
			rs, err := t.query(ctx, `SELECT id FROM rules WHERE state <> 'active' AND updated_at < ? ORDER BY id LIMIT ?`, cut, batch)
			if err != nil {
				return false, err
			}
			for rs.Next() {
				var id int64
				if err := rs.Scan(&id); err != nil {
					rs.Close()
					return false, err
				}
				ids = append(ids, id)
			}
			rs.Close()
			if err := rs.Err(); err != nil || len(ids) == 0 {
				return false, err
			}
			in := "(" + strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",") + ")"
			var keep int64
			if err := t.queryRow(ctx, `SELECT COALESCE(MAX(id), 0) FROM rule_events`).Scan(&keep); err != nil {
				return false, err
			}
			n, err := t.exec(ctx, `DELETE FROM rule_events WHERE id <> ? AND rule_id IN `+in, append([]any{keep}, ids...)...)
			if err != nil {
				return false, fmt.Errorf("delete history of finished rules: %w", err)
			}
			total.Events += int(n)
			if _, err := t.exec(ctx, `DELETE FROM rule_status WHERE rule_id IN `+in, ids...); err != nil {
				return false, fmt.Errorf("delete status of finished rules: %w", err)
			}
			// A rule whose entry is the newest of all stays until a newer
			// one exists (the foreign key holds it).
			n, err = t.exec(ctx, `DELETE FROM rules WHERE id IN `+in+
				` AND NOT EXISTS (SELECT 1 FROM rule_events e WHERE e.rule_id = rules.id)`, ids...)
			if err != nil {
				return false, fmt.Errorf("delete finished rules: %w", err)
			}
			deleted = int(n)
			return false, nil
		})
		if err != nil {
			return total, err
		}
		total.Rules += deleted
		if len(ids) < batch || deleted == 0 {
			break
		}
	}
	return total, nil
}
