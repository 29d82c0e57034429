package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// StartPrimary starts a server of t's own on the loopback address addr,
// ready to stream to standbys (replication connections from loopback are
// trusted) and with synchronous_commit on, so that once RequireSync names
// a standby, a commit returns only after that standby has it. It is
// stopped in t.Cleanup.
func StartPrimary(t testing.TB, addr string) *Server {
	t.Helper()
	s, err := newServer(addr)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(s.Stop)
	out, err := s.command("initdb", "-D", s.data(), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions").CombinedOutput()
	if err != nil {
		unavailable(t, fmt.Errorf("initdb: %v: %s", err, out))
	}
	// initdb trusts 127.0.0.1 only; the test may use other loopback
	// addresses, for clients and for the standby's replication connection.
	hba, err := os.OpenFile(filepath.Join(s.data(), "pg_hba.conf"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = hba.WriteString("host all all 127.0.0.0/8 trust\nhost replication all 127.0.0.0/8 trust\n")
	hba.Close()
	if err != nil {
		t.Fatal(err)
	}
	s.settings = []string{"synchronous_commit=on", "wal_level=replica", "max_wal_senders=4"}
	if err := s.startRetry(); err != nil {
		unavailable(t, err)
	}
	return s
}

// StartStandby makes a streaming standby of primary on the loopback
// address addr: a base backup taken with pg_basebackup -R (which writes
// standby.signal and primary_conninfo), started, connecting to primary as
// application name name. It is stopped in t.Cleanup.
func (p *Server) StartStandby(t testing.TB, addr, name string) *Server {
	t.Helper()
	s, err := newServer(addr)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(s.Stop)
	conninfo := fmt.Sprintf("host=%s port=%d user=postgres application_name=%s", p.Addr, p.Port, name)
	out, err := s.command("pg_basebackup", "-D", s.data(), "-R", "-X", "stream", "-c", "fast",
		"--no-sync", "-d", conninfo).CombinedOutput()
	if err != nil {
		t.Fatalf("pgtest: pg_basebackup from %s:%d: %v: %s", p.Addr, p.Port, err, out)
	}
	s.settings = append([]string{"cluster_name=" + name}, p.settings...)
	if err := s.startRetry(); err != nil {
		t.Fatalf("pgtest: start standby: %v", err)
	}
	return s
}

// RequireSync makes standby the primary's synchronous standby and waits
// until the primary reports it streaming as such.
func (s *Server) RequireSync(ctx context.Context, standby string) error {
	if err := s.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = "+pgx.Identifier{standby}.Sanitize()); err != nil {
		return err
	}
	if err := s.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	for {
		var state string
		err := s.queryRow(ctx, "SELECT sync_state FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'",
			[]any{standby}, &state)
		if err == nil && state == "sync" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgtest: standby %s not streaming synchronously (last: %q, %v): %w", standby, state, err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WALSender returns the pid of the WAL sender that streams to standby.
func (s *Server) WALSender(ctx context.Context, standby string) (int, error) {
	var pid int
	err := s.queryRow(ctx, "SELECT pid FROM pg_stat_replication WHERE application_name = $1", []any{standby}, &pid)
	return pid, err
}

// SyncRepWaiters is the number of backends whose commit waits for the
// synchronous standby.
func (s *Server) SyncRepWaiters(ctx context.Context) (int, error) {
	var n int
	err := s.queryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'", nil, &n)
	return n, err
}

// InRecovery reports whether the server is a standby.
func (s *Server) InRecovery(ctx context.Context) (bool, error) {
	var in bool
	err := s.queryRow(ctx, "SELECT pg_is_in_recovery()", nil, &in)
	return in, err
}

func (s *Server) queryRow(ctx context.Context, sql string, args []any, dest ...any) error {
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, sql, args...).Scan(dest...)
}

// Crash kills every process of the server with SIGKILL at once, as a
// machine that loses power would stop: no shutdown, no last WAL shipped.
// The data directory stays until Stop.
func (s *Server) Crash() {
	if s.cmd == nil {
		return
	}
	s.kill()
	s.cmd = nil
}

// Promote ends a standby's recovery (pg_ctl promote) and waits until it
// accepts writes.
func (s *Server) Promote() error {
	out, err := s.command("pg_ctl", "promote", "-w", "-t", "60", "-D", s.data()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: pg_ctl promote: %v: %s", err, out)
	}
	return nil
}
