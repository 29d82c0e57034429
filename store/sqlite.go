package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mattn/go-sqlite3"
)

// sqliteEngine is the embedded single-appliance engine: one database file
// in WAL mode, so readers never block the writer.
type sqliteEngine struct {
	db   *sql.DB
	path string
	// wmu serializes this process's writers, so they queue in Go instead
	// of sleeping in SQLite's busy handler. busy_timeout still covers
	// writers in other processes.
	wmu sync.Mutex
	// ident is the file opened (noteIdentity), lost set once the path
	// names another file (identity.go): reads fail from then on.
	ident atomic.Pointer[fileIdent]
	lost  atomic.Pointer[RefusedError]
	// connector opens db's connections; the integrity check opens one
	// of its own with it.
	connector *liteConnector
}

// liteConnector opens the engine's connections: once the file's identity
// is noted, a new connection must reach that very file, and never
// creates one (a deleted file stays deleted, not replaced by an empty
// database).
type liteConnector struct {
	drv           *sqlite3.SQLiteDriver
	dsn, noCreate string
	e             *sqliteEngine
	// opening holds the one open in progress. Opening a connection
	// takes no context and blocks in SQLite while the disk hangs (a
	// frozen file system): Connect waits for it only until its caller's
	// deadline, and a hung disk holds one thread, not one per request.
	opening chan struct{}
}

// Connect opens a connection, or gives up when ctx ends: a read that
// needs a new connection while the disk hangs is answered by its
// deadline, like every other store call (found by TestHungDisk: a write's
// check waited for the thaw).
func (c *liteConnector) Connect(ctx context.Context) (driver.Conn, error) {
	select {
	case c.opening <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	type opened struct {
		conn driver.Conn
		err  error
	}
	done := make(chan opened, 1)
	go func() {
		conn, err := c.open()
		<-c.opening
		done <- opened{conn, err}
	}()
	select {
	case o := <-done:
		return o.conn, o.err
	case <-ctx.Done():
		go func() {
			if o := <-done; o.conn != nil {
				o.conn.Close() // nobody waits for it any more
			}
		}()
		return nil, ctx.Err()
	}
}

func (c *liteConnector) open() (driver.Conn, error) {
	if r := c.e.lost.Load(); r != nil {
		return nil, r
	}
	dsn := c.dsn
	if c.e.ident.Load() != nil {
		dsn = c.noCreate
	}
	conn, err := c.drv.Open(dsn)
	if err != nil {
		return nil, err
	}
	if what := c.e.verify(false); what != "" {
		conn.Close()
		return nil, fmt.Errorf("open sqlite database %s: it %s since ribkeeper opened it", c.e.path, what)
	}
	return conn, nil
}

func (c *liteConnector) Driver() driver.Driver { return c.drv }

func openSQLite(ctx context.Context, path string) (*sqliteEngine, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, invalid("path", "sqlite path %q contains '?' or '#': choose a plain file name", path)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("create data directory %s: %w: check that its parent exists and is writable by this user", dir, err)
		}
	}
	// synchronous=FULL: a commit is on disk before Upsert returns, so an
	// acknowledged rule survives a power loss, not only a process crash.
	// _stmt_cache_size: each connection keeps its 32 most recent prepared
	// statements, so the reads that run after every write (the
	// reconciler's ChangedSince, a withdrawal's read of its rule) are not
	// compiled again each time: a withdrawal's read before its UPDATE
	// leaves took 44-56 µs instead of 84-87 µs (BenchmarkEarlyWithdrawRead),
	// and preparing was a sixth of the daemon's CPU while single rules
	// came one at a time.
	dsn := "file:" + path + "?_busy_timeout=5000&_foreign_keys=on&_journal_mode=WAL&_synchronous=FULL&_txlock=immediate&_stmt_cache_size=32"
	e := &sqliteEngine{path: path}
	e.connector = &liteConnector{drv: &sqlite3.SQLiteDriver{}, dsn: dsn, noCreate: dsn + "&mode=rw", e: e, opening: make(chan struct{}, 1)}
	db := sql.OpenDB(e.connector)
	e.db = db
	db.SetMaxIdleConns(8)
	var (
		mode string
		err  error
	)
	// The first statement of a connection runs the DSN's pragmas. Turning
	// a new database to WAL takes an exclusive lock, and SQLite answers
	// "database is locked" at once, without its busy handler, to the
	// others that try at the same moment (several processes starting on
	// a fresh file): retry those for as long as the busy timeout.
	err = db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
	for deadline := time.Now().Add(5 * time.Second); isBusy(err) && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(20 * time.Millisecond)
		err = db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
	}
	if err != nil {
		db.Close()
		err = fmt.Errorf("open sqlite database %s: %w", path, err)
		if e.unavailable(err) {
			return nil, &unavailableError{op: "open", err: err, hint: e.hint()}
		}
		return nil, fmt.Errorf("%w: check that it is a ribkeeper database", err)
	}
	if mode != "wal" {
		db.Close()
		return nil, fmt.Errorf("open sqlite database %s: journal mode is %q, not wal: put the database on a local file system", path, mode)
	}
	return e, nil
}

// isBusy reports SQLite's "database is locked" / busy errors.
func isBusy(err error) bool {
	var se sqlite3.Error
	if errors.As(err, &se) {
		return se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked
	}
	return err != nil && strings.Contains(err.Error(), "database is locked")
}

func (e *sqliteEngine) begin(ctx context.Context) (tx, error) {
	e.wmu.Lock()
	t, err := e.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (_txlock)
	if err != nil {
		e.wmu.Unlock()
		return nil, fmt.Errorf("begin transaction: %w", err)
	}
	return &sqliteTx{tx: t, unlock: e.wmu.Unlock}, nil
}

func (e *sqliteEngine) reader() querier {
	if r := e.lost.Load(); r != nil {
		return lostDB{r}
	}
	return sqliteDB{e.db}
}

// lostDB answers every read of a lost database with its refusal: its
// file is not the store any more (identity.go).
type lostDB struct{ err error }

func (d lostDB) exec(context.Context, string, ...any) (int64, error) { return 0, d.err }
func (d lostDB) query(context.Context, string, ...any) (rows, error) { return nil, d.err }
func (d lostDB) queryRow(context.Context, string, ...any) row        { return errRow{d.err} }

func (e *sqliteEngine) timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func (e *sqliteEngine) forUpdate() string { return "" } // the transaction holds the write lock

func (e *sqliteEngine) indexedBy(index string) string { return " INDEXED BY " + index }

func (e *sqliteEngine) notifyChanges(context.Context, tx) error { return nil }

func (e *sqliteEngine) siteFilter() string {
	return `(r.sites = '[]' OR EXISTS (SELECT 1 FROM json_each(r.sites) j WHERE j.value = ?))`
}

// insertRule: an insert that conflicts takes an AUTOINCREMENT id too,
// but the writer looked the Match up first (lookupFirst) under the write
// lock, so it conflicts only for a Match inserted earlier in the same
// batch, which UpsertMany does not insert twice. (INSERT ... SELECT ...
// WHERE NOT EXISTS, as on PostgreSQL, builds an ephemeral table per row
// here: UpsertMany fell from 50,000 to 10,000 rules/s.)
func (e *sqliteEngine) insertRule() string { return insertRuleSQL }
func (e *sqliteEngine) lookupFirst() bool  { return true }

func (e *sqliteEngine) lockMigrations(context.Context, tx) error { return nil } // BEGIN IMMEDIATE
func (e *sqliteEngine) lockHistory(context.Context, tx) error    { return nil } // one writer at a time

func (e *sqliteEngine) migrations() string { return "migrations/sqlite" }

func (e *sqliteEngine) unavailable(err error) bool {
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code {
		case sqlite3.ErrBusy, sqlite3.ErrLocked, sqlite3.ErrCantOpen, sqlite3.ErrIoErr,
			sqlite3.ErrFull, sqlite3.ErrReadonly, sqlite3.ErrProtocol, sqlite3.ErrNoLFS:
			return true
		}
	}
	return errors.Is(err, sql.ErrConnDone)
}

func (e *sqliteEngine) hint() string {
	return fmt.Sprintf("check that %s is on a writable local disk with free space and not locked by another program", e.path)
}

func (e *sqliteEngine) close() error { return e.db.Close() }

// sqliteDB runs reads outside a transaction; WAL lets them run beside the
// writer.
type sqliteDB struct{ db *sql.DB }

func (d sqliteDB) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := d.db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (d sqliteDB) query(ctx context.Context, q string, args ...any) (rows, error) {
	rs, err := d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rs}, nil
}

func (d sqliteDB) queryRow(ctx context.Context, q string, args ...any) row {
	return sqlRow{d.db.QueryRowContext(ctx, q, args...)}
}

// sqliteTx prepares each distinct statement once per transaction, which is
// what makes batch upserts fast. A transaction of the committer's session
// (sess set) runs on the session's connection without a *sql.Tx, and
// takes its statements from the session, where they stay prepared from
// one transaction to the next.
type sqliteTx struct {
	tx     *sql.Tx        // nil in a session's transaction
	sess   *sqliteSession // the committer's session, or nil
	stmts  map[string]*sql.Stmt
	unlock func()
	done   bool
}

// on is what the transaction's statements run on: its *sql.Tx, or the
// session's connection, inside the BEGIN the session sent.
func (t *sqliteTx) on() sqlRunner {
	if t.sess != nil {
		return t.sess.conn
	}
	return t.tx
}

// sqlRunner is a *sql.Tx or a *sql.Conn.
type sqlRunner interface {
	rowQuerier
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	PrepareContext(ctx context.Context, q string) (*sql.Stmt, error)
}

func (t *sqliteTx) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if t.sess != nil {
		return t.sess.stmt(ctx, q)
	}
	if st, ok := t.stmts[q]; ok {
		return st, nil
	}
	st, err := t.tx.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if t.stmts == nil {
		t.stmts = make(map[string]*sql.Stmt)
	}
	t.stmts[q] = st
	return st, nil
}

func (t *sqliteTx) exec(ctx context.Context, q string, args ...any) (int64, error) {
	if len(args) == 0 {
		// Unprepared: a script of several statements (migrations) runs
		// whole; a prepared statement would run only the first.
		res, err := t.on().ExecContext(ctx, q)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
	st, err := t.stmt(ctx, q)
	if err != nil {
		return 0, err
	}
	res, err := st.ExecContext(ctx, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// execPrepared runs q, which takes no arguments, as a statement prepared
// once per transaction (exec would parse it on every call).
func (t *sqliteTx) execPrepared(ctx context.Context, q string) error {
	st, err := t.stmt(ctx, q)
	if err == nil {
		_, err = st.ExecContext(ctx)
	}
	return err
}

func (t *sqliteTx) insertID(ctx context.Context, q string, args ...any) (int64, bool, error) {
	st, err := t.stmt(ctx, q)
	if err != nil {
		return 0, false, err
	}
	res, err := st.ExecContext(ctx, args...)
	if err != nil {
		return 0, false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return 0, false, err
	}
	id, err := res.LastInsertId()
	return id, err == nil, err
}

func (t *sqliteTx) insertIDs(ctx context.Context, q string, args [][]any) ([]int64, []bool, error) {
	if q == insertRuleSQL {
		return t.insertRules(ctx, args)
	}
	ids, ok := make([]int64, len(args)), make([]bool, len(args))
	// One row's insert is short: the driver would start a goroutine per
	// statement to watch a cancellable context, which cost as much as
	// the insert. The deadline is checked between rows instead.
	rowCtx := context.WithoutCancel(ctx)
	for i, a := range args {
		if i%insertCheck == 0 {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
		}
		var err error
		if ids[i], ok[i], err = t.insertID(rowCtx, q, a...); err != nil {
			return nil, nil, err
		}
	}
	return ids, ok, nil
}

// insertRules runs insertRuleSQL for each argument list as statements of
// many rows (chunkSize, insertRulesRows at most): one statement per rule
// cost as much in the driver as the insert did in SQLite. A row whose
// Match is active inserts nothing, as in insertRuleSQL.
//
// The statements return nothing: RETURNING made SQLite keep each row's
// result in a table of its own before handing it back, a sixth of the
// insert's cost. The ids come from the rules' AUTOINCREMENT sequence
// instead: every id SQLite hands out is above the sequence's value
// before the statement and at most its value after it, so when a
// statement of n rows inserted all n and moved the sequence by n, its
// rows got those n ids in the order they were listed. Otherwise (a row
// skipped as already active) the rows above the old value are read back
// and matched to the arguments by their Match.
func (t *sqliteTx) insertRules(ctx context.Context, args [][]any) ([]int64, []bool, error) {
	ids, ok := make([]int64, len(args)), make([]bool, len(args))
	rowCtx := context.WithoutCancel(ctx) // as in insertIDs
	seq, err := t.ruleSeq(rowCtx)
	if err != nil {
		return nil, nil, fmt.Errorf("read the rules' id sequence: %w", err)
	}
	flat := make([]any, 0, insertRuleCols*min(len(args), insertRulesRows))
	for lo := 0; lo < len(args); {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		n := chunkSize(len(args)-lo, insertRulesRows)
		part := args[lo : lo+n]
		for _, a := range part {
			if len(a) != insertRuleCols {
				return nil, nil, fmt.Errorf("insert rules: %d arguments for %d columns: this is a bug", len(a), insertRuleCols)
			}
		}
		q, flat := t.insertRulesStmt(part, flat[:0])
		if seq, err = t.insertRulesChunk(rowCtx, q, part, flat, seq, ids[lo:lo+n], ok[lo:lo+n]); err != nil {
			return nil, nil, err
		}
		lo += n
	}
	return ids, ok, nil
}

// insertRulesStmt returns the statement that inserts the rows part and
// its arguments, appended to flat. The rows of a batch mostly share
// their reason, actor, sites, times, origin and set: when all of part's
// do, the statement names those once (insertRulesShared), and each row
// sends only its own five values instead of thirteen, each of which
// costs its copy and bind.
func (t *sqliteTx) insertRulesStmt(part [][]any, flat []any) (string, []any) {
	shared := true
	for _, a := range part[1:] {
		for _, c := range insertRulesSharedCols {
			if !sameArg(a[c], part[0][c]) {
				shared = false
				break
			}
		}
		if !shared {
			break
		}
	}
	if !shared {
		for _, a := range part {
			flat = append(flat, a...)
		}
		return multiRowSQL(insertRulesHead, insertRulesRow, len(part), insertRulesTail), flat
	}
	for _, c := range insertRulesSharedCols {
		flat = append(flat, part[0][c])
	}
	for _, a := range part {
		for _, c := range insertRulesOwnCols {
			flat = append(flat, a[c])
		}
	}
	return insertRulesShared(len(part)), flat
}

// sameArg reports whether two arguments of insertRulesSharedCols are
// equal (strings, integers or NULL; anything else is taken as not).
func sameArg(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case int64:
		y, ok := b.(int64)
		return ok && x == y
	}
	return false
}

// The columns (indexes into a row's arguments) insertRulesShared names
// once, in the order of its first parameters, and those of each row.
var (
	insertRulesSharedCols = [...]int{4, 5, 6, 7, 8, 9, 10, 12} // reason, actor, sites, created_at, updated_at, expires_at, origin, set_name
	insertRulesOwnCols    = [...]int{0, 1, 2, 3, 11}           // family, nlri, communities, text, destination
)

// insertRulesShared is the statement of n rows that share the values of
// insertRulesSharedCols: ?1 to ?8 are those, and each row's own five
// follow.
func insertRulesShared(n int) string {
	key := multiRowKey{insertRulesHead, "shared", n, insertRulesTail}
	if q, ok := multiRowTexts.Load(key); ok {
		return q.(string)
	}
	var b strings.Builder
	b.WriteString(insertRulesHead)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		p := len(insertRulesSharedCols) + 1 + i*len(insertRulesOwnCols)
		// (family, nlri, communities, text, reason, actor, sites,
		// created_at, updated_at, expires_at, origin, destination,
		// set_name, state, withdraw_requested)
		fmt.Fprintf(&b, "(?%d, ?%d, ?%d, ?%d, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?%d, ?8, 'active', FALSE)", p, p+1, p+2, p+3, p+4)
	}
	b.WriteString(insertRulesTail)
	q, _ := multiRowTexts.LoadOrStore(key, b.String())
	return q.(string)
}

// ruleSeq is the rules' AUTOINCREMENT sequence: the highest id ever
// handed out, 0 before the first.
func (t *sqliteTx) ruleSeq(ctx context.Context) (int64, error) {
	var seq int64
	err := t.queryEach(ctx, `SELECT COALESCE(MAX(seq), 0) FROM sqlite_sequence WHERE name = 'rules'`, nil, 1, func(v []driver.Value) error {
		var ok bool
		if seq, ok = v[0].(int64); !ok {
			return fmt.Errorf("SQLite returned %T for the rules' id sequence: this is a bug", v[0])
		}
		return nil
	})
	return seq, err
}

// insertRulesChunk inserts the rows part (flattened in flat), seq being
// the rules' id sequence before it (ruleSeq), sets the id and ok of each
// row inserted and returns the sequence after it.
func (t *sqliteTx) insertRulesChunk(ctx context.Context, q string, part [][]any, flat []any, seq int64, ids []int64, ok []bool) (int64, error) {
	if err := t.execMany(ctx, q, flat); err != nil {
		return 0, err
	}
	var changes, last int64
	err := t.queryEach(ctx, `SELECT changes(), last_insert_rowid()`, nil, 2, func(v []driver.Value) error {
		var ok1, ok2 bool
		changes, ok1 = v[0].(int64)
		last, ok2 = v[1].(int64)
		if !ok1 || !ok2 {
			return fmt.Errorf("SQLite returned %T, %T for changes(), last_insert_rowid(): this is a bug", v[0], v[1])
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if changes == int64(len(part)) && last-seq == changes {
		for i := range part {
			ids[i], ok[i] = seq+1+int64(i), true
		}
		return last, nil
	}
	// Some rows were skipped: read back the ones inserted, which are
	// all the rows above seq (this transaction holds the write lock).
	byKey := make(map[string]int, len(part))
	for j := len(part) - 1; j >= 0; j-- { // the first of equal Matches wins: SQLite inserts in order
		f, _ := part[j][0].(int64)
		b, _ := part[j][1].([]byte)
		byKey[matchKey(f, b)] = j
	}
	top := seq
	err = t.queryEach(ctx, `SELECT id, family, nlri FROM rules WHERE id > ? ORDER BY id`, []any{seq}, 3, func(v []driver.Value) error {
		id, ok1 := v[0].(int64)
		family, ok2 := v[1].(int64)
		nlri, ok3 := v[2].([]byte)
		if !ok1 || !ok2 || !ok3 {
			return fmt.Errorf("insert rules: SQLite returned %T, %T, %T for id, family, nlri: this is a bug", v[0], v[1], v[2])
		}
		j, found := byKey[matchKey(family, nlri)]
		if !found || ok[j] {
			return fmt.Errorf("insert rules: rule %d is not one this insert sent (family %d): this is a bug", id, family)
		}
		ids[j], ok[j], top = id, true, id
		return nil
	})
	if err != nil {
		return 0, err
	}
	// The sequence moved past the last id inserted: ids of skipped rows
	// are taken too.
	if seq, err = t.ruleSeq(ctx); err != nil {
		return 0, err
	}
	return max(seq, top), nil
}

// The multi-row form of insertRuleSQL (insertRules).
const (
	insertRuleCols  = 13
	insertRulesRows = 64
	insertRulesHead = `INSERT INTO rules
	(family, nlri, communities, text, reason, actor, sites, created_at, updated_at, expires_at, origin, destination, set_name, state, withdraw_requested)
	VALUES `
	insertRulesRow  = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', FALSE)`
	insertRulesTail = ` ON CONFLICT (family, nlri) WHERE state = 'active' DO NOTHING`
)

// insertCheck is how many rows insertIDs inserts between looks at its
// deadline.
const insertCheck = 64

// queryEach runs q with args and calls row with the values of each
// row it returns (cols of them: int64, float64, []byte, string or nil),
// which row must not keep. In the committer's session the statement runs
// on the driver's connection (driverRun): no conversion of each argument
// by database/sql, a kilobyte a rule in a batch.
func (t *sqliteTx) queryEach(ctx context.Context, q string, args []any, cols int, row func([]driver.Value) error) error {
	if t.sess != nil && driverValues(args) {
		return t.sess.driverRun(ctx, q, args, func(ctx context.Context, st driver.Stmt, nv []driver.NamedValue) error {
			rs, err := st.(driver.StmtQueryContext).QueryContext(ctx, nv)
			if err != nil {
				return err
			}
			defer rs.Close()
			vals := make([]driver.Value, cols)
			for {
				if err := rs.Next(vals); err == io.EOF {
					return nil
				} else if err != nil {
					return err
				}
				if err := row(vals); err != nil {
					return err
				}
			}
		})
	}
	rs, err := t.query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rs.Close()
	vals, ptrs := make([]driver.Value, cols), make([]any, cols)
	for i := range ptrs {
		ptrs[i] = &vals[i]
	}
	for rs.Next() {
		if err := rs.Scan(ptrs...); err != nil {
			return err
		}
		if err := row(vals); err != nil {
			return err
		}
	}
	return rs.Err()
}

// execMany runs q, a statement of many rows that returns none, with
// args: in the committer's session on the driver's connection, as
// queryEach, whose one call into SQLite binds every argument and steps
// (the driver's exec binds each argument with a call of its own).
func (t *sqliteTx) execMany(ctx context.Context, q string, args []any) error {
	if t.sess == nil || !driverValues(args) {
		_, err := t.exec(ctx, q, args...)
		return err
	}
	return t.queryEach(ctx, q, args, 0, func([]driver.Value) error { return nil })
}

// driverValues reports whether every one of args is a value the driver
// takes as it is (database/sql would pass it through unchanged).
func driverValues(args []any) bool {
	for _, a := range args {
		switch a.(type) {
		case nil, int64, float64, bool, []byte, string, time.Time:
		default:
			return false
		}
	}
	return true
}

func (t *sqliteTx) query(ctx context.Context, q string, args ...any) (rows, error) {
	st, err := t.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	rs, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rs}, nil
}

func (t *sqliteTx) queryRow(ctx context.Context, q string, args ...any) row {
	st, err := t.stmt(ctx, q)
	if err != nil {
		return errRow{err}
	}
	return sqlRow{st.QueryRowContext(ctx, args...)}
}

func (t *sqliteTx) commit(context.Context) error {
	if t.done {
		return sql.ErrTxDone
	}
	t.done = true
	defer t.unlock()
	if t.sess != nil {
		// As Tx.Commit: not interrupted by a context (a COMMIT cut short
		// mid-fsync could not be told from one that landed).
		return t.sess.end("COMMIT")
	}
	return t.tx.Commit()
}

func (t *sqliteTx) rollback(context.Context) error {
	if t.done {
		return nil
	}
	t.done = true
	defer t.unlock()
	if t.sess != nil {
		return t.sess.end("ROLLBACK")
	}
	return t.tx.Rollback()
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }

type sqlRow struct{ r *sql.Row }

func (r sqlRow) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return errNoRows
	}
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// sqliteSession is the group committer's own connection: every write of
// this process runs on it, and it polls PRAGMA data_version, which moves
// only when another connection commits, i.e. (all writes of this process
// being on this one) when another process wrote to the file.
type sqliteSession struct {
	e    *sqliteEngine
	conn *sql.Conn
	// stmts are the statements prepared on conn, kept from one
	// transaction to the next (at most maxSessionStmts): a batch's
	// statements of many rows cost a millisecond each to prepare.
	stmts    map[string]*sql.Stmt
	prepares int // statements prepared on conn so far
	// driverStmts are statements prepared on conn's driver connection
	// (driverRun), at most maxSessionStmts; nv is their arguments'
	// buffer, reused from one statement to the next.
	driverStmts map[string]driver.Stmt
	nv          []driver.NamedValue
	// version is the last data_version read; event the id of the newest
	// history entry that changed desired state (kind other than status).
	version, event int64
}

func (e *sqliteEngine) session(ctx context.Context) (*sqliteSession, error) {
	ss := &sqliteSession{e: e}
	if err := ss.connect(ctx); err != nil {
		return nil, err
	}
	return ss, nil
}

// connect (re)acquires the connection and reads the change markers from
// it, so only commits from now on count as external changes.
func (ss *sqliteSession) connect(ctx context.Context) error {
	ss.dropConn()
	conn, err := ss.e.db.Conn(ctx)
	if err != nil {
		return err
	}
	ss.conn = conn
	if ss.version, err = dataVersion(ctx, conn); err == nil {
		ss.event, err = lastEvent(ctx, conn)
	}
	return err
}

func (ss *sqliteSession) begin(ctx context.Context) (tx, error) {
	if ss.conn == nil {
		if err := ss.connect(ctx); err != nil {
			return nil, fmt.Errorf("connect: %w", err)
		}
	}
	ss.e.wmu.Lock()
	if _, err := ss.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		ss.e.wmu.Unlock()
		if errors.Is(err, sql.ErrConnDone) {
			ss.dropConn() // reconnect on the next call
		} else {
			// A BEGIN cut short may have begun: make sure none is open.
			ss.conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
		return nil, fmt.Errorf("begin transaction: %w", err)
	}
	return &sqliteTx{sess: ss, unlock: ss.e.wmu.Unlock}, nil
}

// end sends COMMIT or ROLLBACK for the session's open transaction.
func (ss *sqliteSession) end(q string) error {
	if ss.conn == nil {
		return sql.ErrConnDone
	}
	_, err := ss.conn.ExecContext(context.Background(), q)
	if q == "COMMIT" && err != nil {
		// A failed COMMIT may leave the transaction open (SQLITE_BUSY):
		// roll it back, so the next BEGIN does not fail.
		ss.conn.ExecContext(context.Background(), "ROLLBACK")
	}
	return err
}

// maxSessionStmts bounds the statements a session keeps prepared: past
// it, an arbitrary one is closed for each new one.
const maxSessionStmts = 128

// stmt returns q prepared on the session's connection.
func (ss *sqliteSession) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if st, ok := ss.stmts[q]; ok {
		return st, nil
	}
	if ss.conn == nil {
		return nil, sql.ErrConnDone
	}
	st, err := ss.conn.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	ss.prepares++
	if ss.stmts == nil {
		ss.stmts = make(map[string]*sql.Stmt)
	}
	makeRoom(ss.stmts)
	ss.stmts[q] = st
	return st, nil
}

// makeRoom closes and drops statements of a session's cache until it has
// room for one more (maxSessionStmts).
func makeRoom[S interface{ Close() error }](stmts map[string]S) {
	for k, old := range stmts {
		if len(stmts) < maxSessionStmts {
			break
		}
		old.Close()
		delete(stmts, k)
	}
}

// driverRun runs f with q prepared on the session's driver connection
// (database/sql's Conn.Raw) and args as its arguments. The statement is
// run without a context that can end (ctx is checked before): the
// driver would watch one in a goroutine of its own for every statement.
func (ss *sqliteSession) driverRun(ctx context.Context, q string, args []any, f func(ctx context.Context, st driver.Stmt, nv []driver.NamedValue) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if ss.conn == nil {
		return sql.ErrConnDone
	}
	return ss.conn.Raw(func(dc any) error {
		st, ok := ss.driverStmts[q]
		if !ok {
			c, isLite := dc.(*sqlite3.SQLiteConn)
			if !isLite {
				return fmt.Errorf("the sqlite connection is a %T: this is a bug", dc)
			}
			var err error
			if st, err = c.Prepare(q); err != nil {
				return err
			}
			ss.prepares++
			if ss.driverStmts == nil {
				ss.driverStmts = make(map[string]driver.Stmt)
			}
			makeRoom(ss.driverStmts)
			ss.driverStmts[q] = st
		}
		nv := ss.nv[:0]
		for i, a := range args {
			nv = append(nv, driver.NamedValue{Ordinal: i + 1, Value: a})
		}
		ss.nv = nv
		err := f(context.WithoutCancel(ctx), st, nv)
		clear(nv) // keep no rule's bytes alive
		return err
	})
}

// dropConn closes the session's statements and connection.
func (ss *sqliteSession) dropConn() {
	for _, st := range ss.stmts {
		st.Close()
	}
	ss.stmts = nil
	if ss.conn != nil && len(ss.driverStmts) > 0 {
		ss.conn.Raw(func(any) error {
			for _, st := range ss.driverStmts {
				st.Close()
			}
			return nil
		})
	}
	ss.driverStmts = nil
	if ss.conn != nil {
		ss.conn.Close()
		ss.conn = nil
	}
}

// rowQuerier is a *sql.Conn or a *sql.Tx.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// externalChange reports whether another process changed desired state
// since the last call. A commit that only wrote status (history kind
// "status") moves data_version but is not a change. With t it reads inside
// that transaction of the session, which holds the write lock.
func (ss *sqliteSession) externalChange(ctx context.Context, t tx) (bool, error) {
	var q rowQuerier = ss.conn
	if st, ok := t.(*sqliteTx); ok {
		q = st.on()
	} else if ss.conn == nil {
		// Commits made while disconnected are unknown: report a change.
		err := ss.connect(ctx)
		return err == nil, err
	}
	v, err := dataVersion(ctx, q)
	if err != nil || v == ss.version {
		return false, err
	}
	ev, err := lastEvent(ctx, q)
	if err != nil {
		return false, err
	}
	ss.version = v
	changed := ev != ss.event
	ss.event = ev
	return changed, nil
}

// ownChanges reads, inside t, the newest history entry that t itself wrote
// and returns a func that adopts it once t committed, so that this
// process's own changes never count as external.
func (ss *sqliteSession) ownChanges(ctx context.Context, t tx) (adopt func(), err error) {
	ev, err := lastEvent(ctx, t.(*sqliteTx).on())
	if err != nil {
		return nil, err
	}
	return func() { ss.event = ev }, nil
}

func dataVersion(ctx context.Context, q rowQuerier) (int64, error) {
	var v int64
	err := q.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v)
	return v, err
}

// lastEvent reads backwards along the primary key to the first history
// entry that is not a status change: usually the last row.
func lastEvent(ctx context.Context, q rowQuerier) (int64, error) {
	var id int64
	err := q.QueryRowContext(ctx, `SELECT id FROM rule_events WHERE kind <> 'status' ORDER BY id DESC LIMIT 1`).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return id, err
}

func (ss *sqliteSession) close() { ss.dropConn() }
