// Package pgtest starts throwaway PostgreSQL servers for tests: real
// servers from the installed binaries, in a temporary directory, listening
// only on loopback (127.0.0.1 unless a test picks another address), with
// fsync off. StartPrimary and StartStandby build a primary with a
// synchronous streaming standby for failover tests.
//
// Start gives each test its own fresh database. With Run in the package's
// TestMain, one server serves the whole test binary; without it, each test
// gets its own server, stopped in t.Cleanup.
//
// When no PostgreSQL binaries are installed or the server cannot start, the
// test is skipped with the reason, or fails if the CI environment variable
// is set.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// shared is the per-binary server of Run. A package variable is the point:
// it outlives every test so the binary starts one server, not one per test.
var shared struct {
	enabled bool
	once    sync.Once
	srv     *Server
	err     error
}

// Run runs the tests of m with one shared server, started on first use and
// stopped when the tests are done. Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }
func Run(m *testing.M) int {
	shared.enabled = true
	code := m.Run()
	if shared.srv != nil {
		shared.srv.Stop()
	}
	return code
}

// Start returns the DSN of a new, empty database on a running server.
func Start(t testing.TB) string {
	t.Helper()
	var srv *Server
	if shared.enabled {
		shared.once.Do(func() { shared.srv, shared.err = NewServer() })
		if shared.err != nil {
			unavailable(t, shared.err)
		}
		srv = shared.srv
	} else {
		srv = StartServer(t)
	}
	return srv.NewDatabase(t)
}

// StartServer starts a server of t's own, stopped in t.Cleanup; use it for
// tests that stop or break the server.
func StartServer(t testing.TB) *Server {
	t.Helper()
	srv, err := NewServer()
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("pgtest: PostgreSQL is required in CI: %v", err)
	}
	t.Skipf("pgtest: skipping, no PostgreSQL: %v", err)
}

// Server is one running PostgreSQL server.
type Server struct {
	Dir  string // temporary directory: data/, postgres.log
	Addr string // the loopback address it listens on, 127.0.0.1 unless set
	Port int

	// settings are more -c name=value arguments to postgres, after the
	// defaults (so they override them).
	settings []string

	bin     string
	cred    *syscall.Credential
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped atomic.Bool
	dbs     atomic.Int64
}

// NewServer initializes a cluster in a new temporary directory and starts
// it. When running as root, it runs as the postgres user, since PostgreSQL
// refuses to run as root. The caller must Stop it.
func NewServer() (*Server, error) {
	s, err := newServer("127.0.0.1")
	if err != nil {
		return nil, err
	}
	out, err := s.command("initdb", "-D", s.data(), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions").CombinedOutput()
	if err != nil {
		os.RemoveAll(s.Dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	if err := s.startRetry(); err != nil {
		os.RemoveAll(s.Dir)
		return nil, err
	}
	return s, nil
}

// newServer prepares a Server on addr: the binaries, the user to run as,
// and a temporary directory it owns.
func newServer(addr string) (*Server, error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, Addr: addr}
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root and no postgres user to run the server as: %w", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	s.Dir, err = os.MkdirTemp("", "ribkeeper-pgtest-")
	if err != nil {
		return nil, err
	}
	if s.cred != nil {
		if err := os.Chown(s.Dir, uid, gid); err != nil {
			os.RemoveAll(s.Dir)
			return nil, err
		}
	}
	return s, nil
}

// startRetry starts the server on a free port, trying another port if the
// one it picked was taken meanwhile.
func (s *Server) startRetry() error {
	for attempt := 0; ; attempt++ {
		err := s.start(0)
		if err == nil || attempt == 2 {
			return err
		}
	}
}

func (s *Server) data() string { return filepath.Join(s.Dir, "data") }

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true}
	return cmd
}

// start runs postgres on port (0: a free one) and waits until it accepts
// connections.
func (s *Server) start(port int) error {
	if port == 0 {
		var err error
		if port, err = freePort(s.Addr); err != nil {
			return err
		}
	}
	log, err := os.OpenFile(filepath.Join(s.Dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	args := []string{"-D", s.data(), "-p", strconv.Itoa(port),
		"-c", "listen_addresses=" + s.Addr, "-c", "unix_socket_directories=" + s.Dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=300", "-c", "shared_buffers=64MB"}
	for _, kv := range s.settings {
		args = append(args, "-c", kv)
	}
	cmd := s.command("postgres", args...)
	cmd.Stdout, cmd.Stderr = log, log
	// If the test binary dies without stopping us, so does the server.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.cmd, s.exited, s.Port = cmd, exited, port
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("postgres exited: %s", s.logTail())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("postgres did not accept connections within 30s: %v: %s", err, s.logTail())
		}
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "postgres.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// DSN returns the URL of database db as the superuser postgres.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@%s:%d/%s?sslmode=disable", s.Addr, s.Port, db)
}

// NewDatabase creates an empty database and returns its DSN.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("test_%d", s.dbs.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	return s.DSN(name)
}

// Exec runs sql in database postgres as the superuser, e.g. to
// pg_terminate_backend a connection.
func (s *Server) Exec(ctx context.Context, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// Stop shuts the server down (fast shutdown, then kill) and removes its
// directory. Stop is idempotent.
func (s *Server) Stop() {
	if s.stopped.Swap(true) {
		return
	}
	s.Halt()
	os.RemoveAll(s.Dir)
}

// Halt stops the server but keeps its data, for tests of an unreachable
// database; Resume starts it again on the same port.
func (s *Server) Halt() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.kill()
	}
	s.cmd = nil
}

func (s *Server) kill() {
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
}

// Resume restarts a halted server on its port.
func (s *Server) Resume() error {
	if s.cmd != nil {
		return errors.New("pgtest: server is running")
	}
	return s.start(s.Port)
}

// findBin returns the bin directory of the newest installed PostgreSQL.
func findBin() (string, error) {
	if dir := os.Getenv("PGTEST_BIN"); dir != "" {
		return dir, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var ok []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			ok = append(ok, d)
		}
	}
	if len(ok) == 0 {
		if p, err := exec.LookPath("postgres"); err == nil {
			return filepath.Dir(p), nil
		}
		return "", errors.New("no PostgreSQL binaries in /usr/lib/postgresql/*/bin or PATH (apt-get install postgresql, or set PGTEST_BIN)")
	}
	ver := func(d string) int {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		return v
	}
	slices.SortFunc(ok, func(a, b string) int { return ver(a) - ver(b) })
	return ok[len(ok)-1], nil
}

func freePort(addr string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
