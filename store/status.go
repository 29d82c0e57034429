package store

import (
	"context"
	"errors"
	"strconv"
)

// SetStatus records this site's announce status for the given rules, in one
// transaction. Unknown ids are skipped. Only real changes are written and
// recorded in history, so a reconciler may report the same status on every
// pass. Status writes do not wake the change feed.
func (s *Store) SetStatus(ctx context.Context, ids []int64, announced bool, lastErr string) error {
	if len(ids) == 0 {
		return nil
	}
	return s.write(ctx, "set rule status", len(ids), func(ctx context.Context, t *wtx) (bool, error) {
		now := s.now()
		for _, id := range ids {
			var (
				found  int64
				wasAnn bool
				wasErr dbText
			)
			err := t.queryRow(ctx, `SELECT r.id, COALESCE(s.announced, FALSE), COALESCE(s.last_error, '')
				FROM rules r LEFT JOIN rule_status s ON s.rule_id = r.id AND s.site = ?
				WHERE r.id = ?`, s.site, id).Scan(&found, &wasAnn, &wasErr)
			if errors.Is(err, errNoRows) {
				continue
			}
			if err != nil {
				return false, err
			}
			if wasAnn == announced && wasErr.s == lastErr {
				continue
			}
			_, err = t.exec(ctx, `INSERT INTO rule_status (rule_id, site, announced, last_error, updated_at)
				VALUES (?, ?, ?, ?, ?)
				ON CONFLICT (rule_id, site) DO UPDATE SET announced = excluded.announced,
					last_error = excluded.last_error, updated_at = excluded.updated_at`,
				id, s.site, announced, lastErr, s.eng.timeArg(now))
			if err != nil {
				return false, err
			}
			was := map[string]string{"announced": strconv.FormatBool(wasAnn), "last_error": wasErr.s}
			is := map[string]string{"announced": strconv.FormatBool(announced), "last_error": lastErr}
			t.event(id, now, EventStatus, "reconciler", s.site, was, is)
		}
		return false, nil
	})
}
