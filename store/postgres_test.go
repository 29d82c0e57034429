package store

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/store/pgtest"
)

// waitListening waits until s's change feed holds a LISTEN connection and
// returns its backend pid.
func waitListening(t *testing.T, s *Store) uint32 {
	t.Helper()
	pg := s.eng.(*pgEngine)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if pid := pg.listenPID.Load(); pid != 0 {
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("change feed not listening after 10s")
	return 0
}

func TestPostgresFeedAcrossInstances(t *testing.T) {
	ctx := ctxT(t)
	cfg := postgresFresh(t)
	a, b := open(t, cfg, "a"), open(t, cfg, "b")
	waitListening(t, b)
	drain(b)
	r, _, err := a.Upsert(ctx, Input{Rule: rule(t, 1, "discard")})
	if err != nil {
		t.Fatal(err)
	}
	waitChange(t, b, "another instance's Upsert")
	drain(b)
	a.Withdraw(ctx, r.ID, "x")
	waitChange(t, b, "another instance's Withdraw")
	drain(b)
	a.Finish(ctx, r.ID, Withdrawn)
	waitChange(t, b, "another instance's Finish")
}

func TestPostgresFeedReconnects(t *testing.T) {
	ctx := ctxT(t)
	cfg := postgresFresh(t)
	a, b := open(t, cfg, "a"), open(t, cfg, "b")
	pid := waitListening(t, b)
	drain(b)
	if _, err := a.eng.reader().exec(ctx, "SELECT pg_terminate_backend(?::int)", int64(pid)); err != nil {
		t.Fatal(err)
	}
	// The reconnect itself wakes the reconciler: notifications sent while
	// the feed was down are lost, so it must resync.
	waitChange(t, b, "the LISTEN connection was terminated")
	pid2 := waitListening(t, b)
	if pid2 == pid {
		t.Fatalf("still listening on terminated backend %d", pid)
	}
	drain(b)
	if _, _, err := a.Upsert(ctx, Input{Rule: rule(t, 1, "discard")}); err != nil {
		t.Fatal(err)
	}
	waitChange(t, b, "Upsert after reconnect")
}

func TestPostgresUnavailable(t *testing.T) {
	srv := pgtest.StartServer(t)
	cfg := Config{Driver: "postgres", DSN: srv.NewDatabase(t), Timeout: 2 * time.Second}
	s := open(t, cfg, "a")
	ctx := ctxT(t)
	r, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard")})
	if err != nil {
		t.Fatal(err)
	}
	srv.Halt()
	if _, err := s.ActiveRules(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("ActiveRules with PostgreSQL stopped = %v, want ErrUnavailable", err)
	}
	if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, 2, "discard")}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Upsert with PostgreSQL stopped = %v, want ErrUnavailable", err)
	} else if !strings.Contains(err.Error(), "check that PostgreSQL") {
		t.Errorf("error does not tell the operator what to do: %v", err)
	}
	if _, err := Open(ctx, cfg); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open with PostgreSQL stopped = %v, want ErrUnavailable", err)
	}
	// A caller that gives up is not an outage.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Get(cctx, r.ID); errors.Is(err, ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with cancelled context = %v", err)
	}
	drain(s) // the feed signals only once it is connected again
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, r.ID); err != nil {
		t.Fatalf("Get after PostgreSQL came back: %v", err)
	}
	waitChange(t, s, "the change feed reconnected")
}

// syncBuffer is a log output safe for the store's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// With a multi-host DSN whose first host is down, the log and the
// messages name the server actually in use, and every host of the DSN.
func TestPostgresNamesServerInUse(t *testing.T) {
	dsn := postgresFresh(t).DSN
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close() // nothing listens there now: connections are refused
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	live := u.Host
	u.Host = dead + "," + live
	q := u.Query()
	q.Set("target_session_attrs", "read-write")
	u.RawQuery = q.Encode()
	var logs syncBuffer
	s := open(t, Config{Driver: "postgres", DSN: u.String(),
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})}, "a")
	waitListening(t, s)
	for _, want := range []string{"connected to PostgreSQL: server=" + live, "change feed listening: server=" + live} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "server="+dead) {
		t.Errorf("log names %s, where nothing listens, as the server:\n%s", dead, logs.String())
	}
	hint := s.eng.hint()
	if !strings.Contains(hint, dead+","+live) || !strings.Contains(hint, "last connected to "+live) {
		t.Errorf("the unavailable hint does not name both hosts and the last server (%s): %q", live, hint)
	}
}

// A server that refuses writes (a standby, a primary being demoted: SQLSTATE
// 25006) is unavailable, a 503 to retry, not an internal error.
func TestPostgresReadOnlyIsUnavailable(t *testing.T) {
	ctx := ctxT(t)
	cfg := postgresFresh(t)
	s := open(t, cfg, "a")
	var db string
	if err := s.eng.reader().queryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	if _, err := s.eng.reader().exec(ctx, "ALTER DATABASE "+db+" SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	// Sessions take the setting when they start: end the pool's.
	if _, err := s.eng.reader().exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ? AND pid <> pg_backend_pid()", db); err != nil {
		t.Fatal(err)
	}
	s.eng.(*pgEngine).pool.Reset()
	_, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard")})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Upsert on a read-only server = %v, want ErrUnavailable", err)
	}
}

// A batch's lookups and its insert probe the index of active Matches
// once per rule, on a table loaded since its last ANALYZE too: with the
// IN list or the NOT EXISTS as a join, the planner, which took the table
// for nearly empty, read every active rule for each statement instead,
// so batch writes slowed as the table grew.
func TestPostgresBatchProbesTheIndex(t *testing.T) {
	ctx := ctxT(t)
	s := open(t, postgresFresh(t), "a")
	var ins []Input
	for i := range 3000 {
		ins = append(ins, Input{Rule: rule(t, i, "discard"), Actor: "t"})
	}
	if _, err := s.UpsertMany(ctx, ins); err != nil {
		t.Fatal(err)
	}
	pe := s.eng.(*pgEngine)
	tx, err := pe.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// read is the most rows one node of q's plan read: in the probes'
	// plan, the loops of one row each.
	read := func(q string, args ...any) (most int) {
		t.Helper()
		var plan []byte
		if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+q, args...).Scan(&plan); err != nil {
			t.Fatalf("explain %s: %v", q, err)
		}
		var nodes []struct{ Plan json.RawMessage }
		if err := json.Unmarshal(plan, &nodes); err != nil || len(nodes) != 1 {
			t.Fatalf("explain: %s: %v", plan, err)
		}
		var walk func(raw json.RawMessage)
		walk = func(raw json.RawMessage) {
			var n struct {
				Rows    int               `json:"Actual Rows"`
				Removed int               `json:"Rows Removed by Filter"`
				Type    string            `json:"Node Type"`
				Plans   []json.RawMessage `json:"Plans"`
			}
			json.Unmarshal(raw, &n)
			if n.Type != "ModifyTable" && n.Type != "Function Scan" && n.Type != "Values Scan" &&
				n.Type != "Subquery Scan" && n.Type != "Nested Loop" && n.Type != "Sort" {
				most = max(most, n.Rows+n.Removed)
			}
			for _, p := range n.Plans {
				walk(p)
			}
		}
		walk(nodes[0].Plan)
		return most
	}
	// Ten Matches, five of them active.
	var (
		args, rows = []any{nil}, [][]any{}
		at         []int
		now        = s.now()
	)
	for i := 2995; i < 3005; i++ {
		e, err := encode(Input{Rule: rule(t, i, "discard"), Actor: "t"}, 0, now)
		if err != nil {
			t.Fatal(err)
		}
		e.at(now)
		args[0] = e.family
		args = append(args, e.nlri)
		at, rows = append(at, len(rows)), append(rows, s.insertArgs(&e, now))
	}
	if n := read(pe.sql(s.matchLookup("nlri", "", 10)), args...); n > 10 {
		t.Errorf("a lookup of 10 Matches read %d rows in one step, want the index probed per Match", n)
	}
	cols, err := pgRuleColumns(rows, at)
	if err != nil {
		t.Fatal(err)
	}
	if n := read(pgInsertRulesSQL, cols...); n > 10 {
		t.Errorf("an insert of 10 rules read %d rows in one step, want the index probed per rule", n)
	}
}
