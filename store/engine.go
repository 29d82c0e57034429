package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// engine is what *Store needs of a database: SQLite or PostgreSQL. The SQL
// is shared and written with "?" placeholders; each engine adapts
// placeholders, value types and the few dialect differences below.
type engine interface {
	// begin starts a read-write transaction. SQLite serializes writers.
	begin(ctx context.Context) (tx, error)
	// reader runs queries outside a transaction.
	reader() querier
	// timeArg converts t to a query argument; the zero time becomes NULL.
	timeArg(t time.Time) any
	// forUpdate is appended to a SELECT of rules r that is followed by an
	// update in the same transaction.
	forUpdate() string
	// siteFilter is a condition on rules r that is true when r targets the
	// site given as its one "?" argument.
	siteFilter() string
	// insertRule is insertRuleSQL as this engine runs it without taking
	// an id for a Match that is already active.
	insertRule() string
	// lookupFirst reports whether writers look a Match up before
	// inserting it (SQLite: one writer holds the lock, the lookup is in
	// process); otherwise the insert comes first and inserts nothing for
	// an active Match.
	lookupFirst() bool
	// indexedBy names the index a query of table rules must use, where
	// the engine's planner is known to choose a worse one: SQLite, with
	// no statistics, prefers rules_state (state, id) for "state =
	// 'active' AND family = ? AND nlri IN (500 values)" and scans every
	// active rule per lookup, so a batch's lookups grew with the table.
	// PostgreSQL's planner keeps statistics; it gets "".
	indexedBy(index string) string
	// notifyChanges, in a transaction that records history, wakes the
	// change feeds of the other instances when t commits (PostgreSQL:
	// NOTIFY, sent at commit, once however often it is asked); SQLite's
	// feeds poll data_version instead.
	notifyChanges(ctx context.Context, t tx) error
	// lockMigrations serializes concurrent migrations in t.
	lockMigrations(ctx context.Context, t tx) error
	// lockHistory is taken in t right before history entries are inserted
	// and held until t ends, so that history ids become visible in id
	// order (see Revision).
	lockHistory(ctx context.Context, t tx) error
	// migrations names the directory of embedded migrations.
	migrations() string
	// unavailable reports whether err means the database is unreachable.
	unavailable(err error) bool
	// hint tells the operator what to check when the database is unavailable.
	hint() string
	close() error
}

type querier interface {
	exec(ctx context.Context, q string, args ...any) (int64, error)
	query(ctx context.Context, q string, args ...any) (rows, error)
	// queryRow returns errNoRows from Scan when there is no row.
	queryRow(ctx context.Context, q string, args ...any) row
}

type tx interface {
	querier
	// insertID runs an INSERT into a table with an id column that may
	// insert nothing (ON CONFLICT DO NOTHING, a WHERE) and returns the new
	// id, or inserted=false when it inserted no row.
	insertID(ctx context.Context, q string, args ...any) (id int64, inserted bool, err error)
	// insertIDs runs insertID once per argument list (PostgreSQL: pipelined).
	insertIDs(ctx context.Context, q string, args [][]any) (ids []int64, inserted []bool, err error)
	commit(ctx context.Context) error
	// rollback is a no-op after commit.
	rollback(ctx context.Context) error
}

type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

type row interface {
	Scan(dest ...any) error
}

var errNoRows = errors.New("no rows")

// dbTime scans a timestamp: unix microseconds (SQLite INTEGER) or a
// time.Time (PostgreSQL timestamptz); NULL is the zero time.
type dbTime struct{ t time.Time }

func (d *dbTime) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		d.t = time.Time{}
	case int64:
		d.t = time.UnixMicro(v).UTC()
	case time.Time:
		d.t = v.UTC()
	default:
		return fmt.Errorf("timestamp: unsupported type %T", src)
	}
	return nil
}

// dbText scans TEXT, BLOB, json or jsonb as a string; NULL is "".
type dbText struct{ s string }

func (d *dbText) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		d.s = ""
	case string:
		d.s = v
	case []byte:
		d.s = string(v)
	default:
		return fmt.Errorf("text: unsupported type %T", src)
	}
	return nil
}

// dbTimeNow returns the current time as stored: UTC, whole microseconds
// (the precision of both engines).
func dbTimeNow() time.Time { return asStored(time.Now()) }

// asStored returns t as stored: UTC, whole microseconds.
func asStored(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// now returns the store's clock reading as stored.
func (s *Store) now() time.Time { return asStored(s.clock.Now()) }

func normTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}
