package store

import (
	"context"
	"database/sql/driver"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
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
		return false, s.statusTx(ctx, t, ids, announced, lastErr, s.now())
	})
}

// statusTx is SetStatus inside t, at now.
func (s *Store) statusTx(ctx context.Context, t *wtx, ids []int64, announced bool, lastErr string, now time.Time) error {
	// The statuses are read a chunk of rules at a time, and only the
	// changes written: a reconciler reports a million rules after a
	// bulk load, and one read per rule cost as much as its insert.
	// A report sets one status for many rules: its history fields
	// are encoded once, and the few statuses they had before once
	// each.
	newJS := statusFields(announced, lastErr)
	olds := map[was]any{}
	t.events = slices.Grow(t.events, len(ids)) // a history entry a rule, mostly
	// Every row shares these: each is an argument once.
	at, site, ann, le := s.eng.timeArg(now), any(s.site), any(announced), any(lastErr)
	rows := make([]any, 0, statusCols*statusChunk)
	for lo := 0; lo < len(ids); lo += lookupChunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		chunk := ids[lo:min(lo+lookupChunk, len(ids))]
		args := make([]any, 0, 1+len(chunk))
		args = append(args, site)
		for _, id := range chunk {
			args = append(args, id)
		}
		found := make(map[int64]was, len(chunk))
		q := `SELECT r.id, COALESCE(s.announced, FALSE), COALESCE(s.last_error, '')
			FROM rules r` + statusJoin + `
			WHERE r.id IN (` + strings.TrimSuffix(strings.Repeat("?,", len(chunk)), ",") + `)`
		if err := eachStatus(ctx, t, q, args, func(id int64, w was) { found[id] = w }); err != nil {
			return err
		}
		// In the order asked, once per rule (unknown ids skipped).
		for _, id := range chunk {
			w, ok := found[id]
			if !ok || (w.announced == announced && w.lastErr == lastErr) {
				continue
			}
			delete(found, id)
			rows = append(rows, id, site, ann, le, at)
			oldJS, ok := olds[w]
			if !ok {
				oldJS = statusFields(w.announced, w.lastErr)
				olds[w] = oldJS
			}
			t.eventJSON(id, now, EventStatus, "reconciler", s.site, oldJS, newJS)
		}
		// Many rows per statement: one statement per rule cost as
		// much as the rule's insert.
		for off := 0; off < len(rows); {
			n := chunkSize((len(rows)-off)/statusCols, statusChunk)
			if err := execRows(context.WithoutCancel(ctx), t, setStatusSQL(n), rows[off:off+n*statusCols]); err != nil {
				return err
			}
			off += n * statusCols
		}
		clear(rows)
		rows = rows[:0]
	}
	return nil
}

// was is a rule's status as SetStatus found it.
type was struct {
	announced bool
	lastErr   string
}

// eachStatus calls fn with each row of q, a read of (id, announced,
// last_error). On SQLite the rows come from the driver as they are
// (sqliteTx.queryEach): database/sql's conversion of each value was a
// third of the read.
func eachStatus(ctx context.Context, t *wtx, q string, args []any, fn func(id int64, w was)) error {
	if lt, ok := t.tx.(*sqliteTx); ok {
		return lt.queryEach(ctx, q, args, 3, func(v []driver.Value) error {
			id, ok1 := v[0].(int64)
			ann, ok2 := v[1].(int64)
			var le string
			switch x := v[2].(type) {
			case string:
				le = x
			case []byte:
				le = string(x)
			default:
				ok2 = false
			}
			if !ok1 || !ok2 {
				return fmt.Errorf("read rule status: unexpected row %v: the database may be damaged; check it (sqlite3 FILE 'PRAGMA integrity_check') or restore it from a backup", v)
			}
			fn(id, was{announced: ann != 0, lastErr: le})
			return nil
		})
	}
	rs, err := t.query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		var (
			id     int64
			w      was
			wasErr dbText
		)
		if err := rs.Scan(&id, &w.announced, &wasErr); err != nil {
			return err
		}
		w.lastErr = wasErr.s
		fn(id, w)
	}
	return rs.Err()
}

// execRows runs q, a statement of many rows that returns none: on SQLite
// on the driver's connection (sqliteTx.execMany).
func execRows(ctx context.Context, t *wtx, q string, args []any) error {
	if lt, ok := t.tx.(*sqliteTx); ok {
		return lt.execMany(ctx, q, args)
	}
	_, err := t.exec(ctx, q, args...)
	return err
}

// statusCols is the parameters of one row of setStatusSQL; statusChunk
// its rows at most (a power of two).
const (
	statusCols  = 5
	statusChunk = 64
)

// setStatusSQL writes n statuses (rule_id, site, announced, last_error,
// updated_at).
func setStatusSQL(n int) string {
	return multiRowSQL(`INSERT INTO rule_status (rule_id, site, announced, last_error, updated_at) VALUES `, "(?, ?, ?, ?, ?)", n,
		` ON CONFLICT (rule_id, site) DO UPDATE SET announced = excluded.announced,
			last_error = excluded.last_error, updated_at = excluded.updated_at`)
}

// statusFields is the history of a status (encodeFields).
func statusFields(announced bool, lastErr string) any {
	return encodeFields(map[string]string{"announced": strconv.FormatBool(announced), "last_error": lastErr})
}
