package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
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
	pool *pgxpool.Pool
	// where names every host of the DSN and the database
	// ("a:5432,b:5432/rk"), for messages (no password).
	where string
	log   hclog.Logger
	// server is the address of the server the newest connection reached
	// ("" before the first): with a multi-host DSN, the one in use.
	server atomic.Value // string
	// moves counts the pool's moves to another server (a failover).
	moves atomic.Uint64
	// connects wakes the change feed's reconnect when the pool reached a
	// server while the feed is down (the server is back, or a failover
	// moved the appliance to another): the feed follows at once instead
	// of after its backoff, which grows to seconds during an outage.
	connects chan struct{}
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

func openPostgres(ctx context.Context, dsn string, log hclog.Logger) (*pgEngine, error) {
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
	e := &pgEngine{where: pgWhere(cfg.ConnConfig), log: log, connects: make(chan struct{}, 1)}
	e.server.Store("")
	cfg.AfterConnect = e.connected
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

// pgWhere names the DSN's hosts, in the order they are tried, and its
// database: "a:5432,b:5433/rk".
func pgWhere(c *pgx.ConnConfig) string {
	hosts := []string{pgHost(c.Host, c.Port)}
	for _, f := range c.Fallbacks { // also holds sslmode=prefer's retries
		if h := pgHost(f.Host, f.Port); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return strings.Join(hosts, ",") + "/" + c.Database
}

func pgHost(host string, port uint16) string {
	if strings.HasPrefix(host, "/") { // a unix socket directory
		return host
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// connected runs for every new connection of the pool. It logs the
// server when it differs from the one before: at the first connection
// and, with a multi-host DSN, when a failover moved the appliance to
// another server. If the change feed is down, it wakes its reconnect.
func (e *pgEngine) connected(_ context.Context, c *pgx.Conn) error {
	addr := pgServer(c)
	switch prev := e.server.Swap(addr).(string); {
	case prev == "":
		e.log.Info("connected to PostgreSQL", "server", addr, "dsn_hosts", e.where)
	case prev != addr:
		e.moves.Add(1)
		e.log.Warn("reconnected to another PostgreSQL server", "server", addr, "previous", prev, "dsn_hosts", e.where)
	}
	if e.listenPID.Load() == 0 {
		select {
		case e.connects <- struct{}{}:
		default:
		}
	}
	return nil
}

// pgServer is the address of the server c is connected to: its TCP peer,
// or the socket path.
func pgServer(c *pgx.Conn) string {
	if nc := c.PgConn().Conn(); nc != nil && nc.RemoteAddr() != nil {
		if a := nc.RemoteAddr().String(); a != "" {
			return a
		}
	}
	return pgHost(c.Config().Host, c.Config().Port)
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

func (e *pgEngine) indexedBy(string) string { return "" }

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
			pe.Code == "25006",                     // read-only transaction: a standby, or a primary being demoted
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
	last := ""
	if s, _ := e.server.Load().(string); s != "" {
		last = "; last connected to " + s
	}
	if strings.Contains(e.where, ",") {
		return fmt.Sprintf("check that one PostgreSQL server of %s is running, accepts writes (a primary; during a failover, once the standby is promoted) and is reachable from this host (DSN from the config or RIBKEEPER_STORE_DSN)%s; retry when it is back", e.where, last)
	}
	return fmt.Sprintf("check that PostgreSQL at %s is running and reachable from this host (DSN from the config or RIBKEEPER_STORE_DSN)%s; retry when it is back", e.where, last)
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
//
// While the database is away it retries at least once a second (a failed
// attempt costs the database nothing), and at once when the pool reaches a
// server: until the feed is back, changes made through other appliances do
// not reach this one. It logs the disconnect and the first failed attempt;
// later ones go to the debug level.
func (e *pgEngine) listen(ctx context.Context, signal func(), log hclog.Logger) {
	const minBackoff, maxBackoff = 100 * time.Millisecond, time.Second
	backoff := minBackoff
	fails := 0
	for {
		listened, stable, err := e.listenOnce(ctx, signal, log)
		if ctx.Err() != nil {
			return
		}
		if stable {
			backoff = minBackoff
		}
		switch {
		case listened:
			fails = 0
			log.Warn("change feed disconnected; reconnecting", "error", err)
		case fails == 0:
			fails++
			log.Warn("change feed cannot reconnect; retrying at least once a second until it can", "error", err)
		default:
			fails++
			log.Debug("change feed still cannot reconnect", "error", err, "attempts", fails, "backoff", backoff)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		case <-e.connects:
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// listenOnce connects, listens, signals, and forwards notifications until
// the connection fails; listened reports that it got as far as listening,
// stable that it was up for a while.
func (e *pgEngine) listenOnce(ctx context.Context, signal func(), log hclog.Logger) (listened, stable bool, err error) {
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
		return false, false, fmt.Errorf("listen for changes: %w", err)
	}
	// The connection is taken out of the pool: it must never serve
	// queries, and it is closed, not returned, when we are done.
	pc := conn.Hijack()
	defer pc.Close(context.Background())
	e.listenPID.Store(pc.PgConn().PID())
	defer e.listenPID.Store(0)
	log.Info("change feed listening", "server", pgServer(pc))
	signal()
	start := time.Now()
	for {
		if _, err := pc.WaitForNotification(ctx); err != nil {
			return true, time.Since(start) > time.Minute, err
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
