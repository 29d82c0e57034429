package store

import (
	"context"
	"strconv"
	"strings"
)

// SetStatus records this site's announce status for the given rules, in one
// transaction. Unknown ids are skipped. Only real changes are written and
// recorded in history, so a reconciler may report the same status on every
// pass. Status writes do not wake the change feed.
func (s *Store) SetStatus(ctx context.Context, ids []int64, announced bool, lastErr string) error {
	if len(ids) == 0 {
		return nil
	}
	return s.writeAs(ctx, "set rule status", len(ids), true, func(ctx context.Context, t *wtx) (bool, error) {
		now := s.now()
		// The statuses are read a chunk of rules at a time, and only the
		// changes written: a reconciler reports a million rules after a
		// bulk load, and one read per rule cost as much as its insert.
		type was struct {
			announced bool
			lastErr   string
		}
		for lo := 0; lo < len(ids); lo += lookupChunk {
			if err := ctx.Err(); err != nil {
				return false, err
			}
			chunk := ids[lo:min(lo+lookupChunk, len(ids))]
			args := make([]any, 0, 1+len(chunk))
			args = append(args, s.site)
			for _, id := range chunk {
				args = append(args, id)
			}
			rs, err := t.query(ctx, `SELECT r.id, COALESCE(s.announced, FALSE), COALESCE(s.last_error, '')
				FROM rules r LEFT JOIN rule_status s ON s.rule_id = r.id AND s.site = ?
				WHERE r.id IN (`+strings.TrimSuffix(strings.Repeat("?,", len(chunk)), ",")+`)`, args...)
			if err != nil {
				return false, err
			}
			found := make(map[int64]was, len(chunk))
			for rs.Next() {
				var (
					id     int64
					w      was
					wasErr dbText
				)
				if err := rs.Scan(&id, &w.announced, &wasErr); err != nil {
					rs.Close()
					return false, err
				}
				w.lastErr = wasErr.s
				found[id] = w
			}
			rs.Close()
			if err := rs.Err(); err != nil {
				return false, err
			}
			// In the order asked, once per rule (unknown ids skipped).
			for _, id := range chunk {
				w, ok := found[id]
				if !ok || (w.announced == announced && w.lastErr == lastErr) {
					continue
				}
				delete(found, id)
				_, err = t.exec(context.WithoutCancel(ctx), `INSERT INTO rule_status (rule_id, site, announced, last_error, updated_at)
					VALUES (?, ?, ?, ?, ?)
					ON CONFLICT (rule_id, site) DO UPDATE SET announced = excluded.announced,
						last_error = excluded.last_error, updated_at = excluded.updated_at`,
					id, s.site, announced, lastErr, s.eng.timeArg(now))
				if err != nil {
					return false, err
				}
				old := map[string]string{"announced": strconv.FormatBool(w.announced), "last_error": w.lastErr}
				is := map[string]string{"announced": strconv.FormatBool(announced), "last_error": lastErr}
				t.event(id, now, EventStatus, "reconciler", s.site, old, is)
			}
		}
		return false, nil
	})
}
