package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgEngine is the shared engine: several appliances use one PostgreSQL
// database, each with its own site name.
type pgEngine struct {
	pool  *pgxpool.Pool
	where string // host:port/database, for messages (no password)
	// queries caches "?" → "$n" rewrites.
	queries sync.Map
	// listenPID is the backend pid of the LISTEN connection (0: none).
	listenPID atomic.Uint32
	// claim holds the site's advisory lock (ClaimSite); nil until then.
	claim *pgx.Conn
}

// changesChannel is the NOTIFY channel; a trigger on rules notifies it.
const changesChannel = "ribkeeper_changes"

// migrationLockKey is the pg_advisory_xact_lock key that serializes schema
// migrations of concurrently starting instances ("ribkeepr" in ASCII).
const migrationLockKey int64 = 0x7269626b65657072

func openPostgres(ctx context.Context, dsn string) (*pgEngine, error) {
	if dsn == "" {
		return nil, invalid("dsn", "empty PostgreSQL DSN: set it in the config or RIBKEEPER_STORE_DSN")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors can echo the DSN; don't wrap it verbatim.
		return nil, invalid("dsn", "cannot parse PostgreSQL DSN: use a URL (postgres://user@host/db) or key=value pairs")
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "ribkeeper"
	}
	e := &pgEngine{where: fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)}
	e.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres database %s: %w", e.where, err)
	}
	if err := e.pool.Ping(ctx); err != nil {
		e.pool.Close()
		err = fmt.Errorf("connect to postgres database %s: %w", e.where, err)
		if e.unavailable(err) || errors.Is(err, context.DeadlineExceeded) {
			return nil, &unavailableError{op: "open", err: err, hint: e.hint()}
		}
		return nil, fmt.Errorf("%w: check the DSN's user, password and database name", err)
	}
	return e, nil
}

// sql rewrites "?" placeholders to "$1", "$2", ... (the shared SQL has no
// "?" inside literals).
func (e *pgEngine) sql(q string) string {
	if v, ok := e.queries.Load(q); ok {
		return v.(string)
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	e.queries.Store(q, b.String())
	return b.String()
}

func (e *pgEngine) begin(ctx context.Context) (tx, error) {
	t, err := e.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin transaction: %w", err)
	}
	return &pgTx{e: e, tx: t}, nil
}

func (e *pgEngine) reader() querier { return pgDB{e} }

func (e *pgEngine) timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func (e *pgEngine) forUpdate() string { return " FOR UPDATE OF r" }

func (e *pgEngine) siteFilter() string {
	return `(r.sites = '[]'::jsonb OR r.sites @> jsonb_build_array(?::text))`
}

// historyLockKey is the pg_advisory_xact_lock key that serializes the
// insertion of history entries up to commit ("ribkhist" in ASCII).
const historyLockKey int64 = 0x7269626b68697374

func (e *pgEngine) lockHistory(ctx context.Context, t tx) error {
	_, err := t.exec(ctx, "SELECT pg_advisory_xact_lock(?)", historyLockKey)
	return err
}

// insertRule filters the row out before the identity default is
// evaluated when the Match is active, so an update takes no id (an
// INSERT ... VALUES ... ON CONFLICT DO NOTHING draws it first: every
// update through rule add burned one). ON CONFLICT stays for two
// instances inserting the same new Match at once.
func (e *pgEngine) insertRule() string { return pgInsertRuleSQL }
func (e *pgEngine) lookupFirst() bool  { return false }

const pgInsertRuleSQL = `INSERT INTO rules
	(family, nlri, communities, text, reason, actor, sites, created_at, updated_at, expires_at, origin, destination, set_name, state, withdraw_requested)
	SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 'active', FALSE
	WHERE NOT EXISTS (SELECT 1 FROM rules WHERE family = $1 AND nlri = $2 AND state = 'active')
	ON CONFLICT (family, nlri) WHERE state = 'active' DO NOTHING`

func (e *pgEngine) lockMigrations(ctx context.Context, t tx) error {
	_, err := t.exec(ctx, "SELECT pg_advisory_xact_lock(?)", migrationLockKey)
	return err
}

func (e *pgEngine) migrations() string { return "migrations/postgres" }

func (e *pgEngine) unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			strings.HasPrefix(pe.Code, "53"),                           // insufficient resources
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", // shutdown, cannot connect now
			pe.Code == "40001", pe.Code == "40P01": // serialization failure, deadlock: retry
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, pgx.ErrTxClosed) || strings.Contains(err.Error(), "conn closed")
}

func (e *pgEngine) hint() string {
	return fmt.Sprintf("check that PostgreSQL at %s is running and reachable from this host (DSN from the config or RIBKEEPER_STORE_DSN); retry when it is back", e.where)
}

func (e *pgEngine) close() error {
	if e.claim != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		e.claim.Close(ctx) // releases the site's lock
		cancel()
	}
	e.pool.Close()
	return nil
}

// listen keeps a LISTEN connection open until ctx ends and calls signal for
// every notification and after every (re)connect, since notifications sent
// while it was down are lost: the receiver then re-reads everything.
func (e *pgEngine) listen(ctx context.Context, signal func(), log hclog.Logger) {
	const minBackoff, maxBackoff = 100 * time.Millisecond, 5 * time.Second
	backoff := minBackoff
	for {
		stable, err := e.listenOnce(ctx, signal)
		if ctx.Err() != nil {
			return
		}
		if stable {
			backoff = minBackoff
		}
		log.Warn("change feed disconnected; reconnecting", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// listenOnce connects, listens, signals, and forwards notifications until
// the connection fails; stable reports that it was up for a while.
func (e *pgEngine) listenOnce(ctx context.Context, signal func()) (stable bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := e.pool.Acquire(cctx)
	if err == nil {
		_, err = conn.Exec(cctx, "LISTEN "+changesChannel)
		if err != nil {
			conn.Release()
		}
	}
	cancel()
	if err != nil {
		return false, fmt.Errorf("listen for changes: %w", err)
	}
	// The connection is taken out of the pool: it must never serve
	// queries, and it is closed, not returned, when we are done.
	pc := conn.Hijack()
	defer pc.Close(context.Background())
	e.listenPID.Store(pc.PgConn().PID())
	defer e.listenPID.Store(0)
	signal()
	start := time.Now()
	for {
		if _, err := pc.WaitForNotification(ctx); err != nil {
			return time.Since(start) > time.Minute, err
		}
		signal()
	}
}

// pgDB runs reads outside a transaction.
type pgDB struct{ e *pgEngine }

func (d pgDB) exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := d.e.pool.Exec(ctx, d.e.sql(q), args...)
	return tag.RowsAffected(), err
}

func (d pgDB) query(ctx context.Context, q string, args ...any) (rows, error) {
	rs, err := d.e.pool.Query(ctx, d.e.sql(q), args...)
	if err != nil {
		return nil, err
	}
	return rs, nil
}

func (d pgDB) queryRow(ctx context.Context, q string, args ...any) row {
	return pgRow{d.e.pool.QueryRow(ctx, d.e.sql(q), args...)}
}

type pgTx struct {
	e  *pgEngine
	tx pgx.Tx
}

func (t *pgTx) exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, t.e.sql(q), args...)
	return tag.RowsAffected(), err
}

func (t *pgTx) insertID(ctx context.Context, q string, args ...any) (int64, bool, error) {
	var id int64
	err := t.tx.QueryRow(ctx, t.e.sql(q+" RETURNING id"), args...).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return id, err == nil, err
}

// insertIDs pipelines the inserts, 1000 per round trip.
func (t *pgTx) insertIDs(ctx context.Context, q string, args [][]any) ([]int64, []bool, error) {
	const chunk = 1000
	q = t.e.sql(q + " RETURNING id")
	ids, ok := make([]int64, len(args)), make([]bool, len(args))
	for start := 0; start < len(args); start += chunk {
		end := min(start+chunk, len(args))
		b := &pgx.Batch{}
		for _, a := range args[start:end] {
			b.Queue(q, a...)
		}
		br := t.tx.SendBatch(ctx, b)
		for i := start; i < end; i++ {
			err := br.QueryRow().Scan(&ids[i])
			switch {
			case err == nil:
				ok[i] = true
			case !errors.Is(err, pgx.ErrNoRows):
				br.Close()
				return nil, nil, err
			}
		}
		if err := br.Close(); err != nil {
			return nil, nil, err
		}
	}
	return ids, ok, nil
}

func (t *pgTx) query(ctx context.Context, q string, args ...any) (rows, error) {
	rs, err := t.tx.Query(ctx, t.e.sql(q), args...)
	if err != nil {
		return nil, err
	}
	return rs, nil
}

func (t *pgTx) queryRow(ctx context.Context, q string, args ...any) row {
	return pgRow{t.tx.QueryRow(ctx, t.e.sql(q), args...)}
}

func (t *pgTx) commit(ctx context.Context) error { return t.tx.Commit(ctx) }

func (t *pgTx) rollback(ctx context.Context) error {
	err := t.tx.Rollback(ctx)
	if errors.Is(err, pgx.ErrTxClosed) {
		return nil
	}
	return err
}

type pgRow struct{ r pgx.Row }

func (r pgRow) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return errNoRows
	}
	return err
}
