package api_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/api"
)

// A control socket file removed while the server runs is recreated at the
// same path with mode 0600, and the API answers on it again; a path that
// then holds a regular file is left alone. On shutdown the socket file
// is removed as before.
func TestSocketRecreated(t *testing.T) {
	ts := startServerOver(t, newFakeRules(), api.WithSocketCheck(10*time.Millisecond))
	if code, _ := ts.do(t, "GET", "/v1/rules", ""); code != 200 {
		t.Fatalf("GET /v1/rules: %d", code)
	}
	before, err := os.Lstat(ts.sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(ts.sock); err != nil {
		t.Fatal(err)
	}
	ts.hc.CloseIdleConnections()
	waitLog(t, ts.logs, "recreated it")
	fi, err := os.Lstat(ts.sock)
	if err != nil || os.SameFile(fi, before) || fi.Mode()&fs.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("recreated socket: %v, %v; want a new socket with mode 0600", fi, err)
	}
	if code, _ := ts.do(t, "GET", "/v1/rules", ""); code != 200 {
		t.Fatalf("GET /v1/rules on the recreated socket: %d", code)
	}

	// Twice: the new socket is watched like the first.
	if err := os.Remove(ts.sock); err != nil {
		t.Fatal(err)
	}
	ts.hc.CloseIdleConnections()
	waitLog(t, ts.logs, "recreated it")
	if code, _ := ts.do(t, "GET", "/v1/rules", ""); code != 200 {
		t.Fatalf("GET /v1/rules on the socket recreated twice: %d", code)
	}

	if err := ts.stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := os.Lstat(ts.sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket file left after shutdown: %v", err)
	}
}

// A socket path taken over by a regular file is not clobbered: the
// watcher logs that it cannot recreate the socket, and leaves the file.
func TestSocketReplacedByFileKept(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "rk.sock")
	logged := make(chan string, 16)
	log := hclog.New(&hclog.LoggerOptions{Output: chanWriter(logged), Level: hclog.Info})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- newAPI(log, newFakeRules(), newFakeRIB(), api.WithSocketCheck(10*time.Millisecond)).Serve(ctx, sock)
	}()
	waitListening(t, sock, errc)
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sock, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitLog(t, logged, "cannot be recreated")
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if b, _ := os.ReadFile(sock); string(b) != "keep me" {
		t.Errorf("the regular file at the socket path was replaced or removed: %q", b)
	}
}

// chanWriter sends each log line to a channel, dropping lines when full.
type chanWriter chan string

func (w chanWriter) Write(b []byte) (int, error) {
	select {
	case w <- string(b):
	default:
	}
	return len(b), nil
}

// waitLog waits for a log line containing want, failing the test after
// 30 s without one.
func waitLog(t *testing.T, logs <-chan string, want string) {
	t.Helper()
	limit := time.NewTimer(30 * time.Second)
	defer limit.Stop()
	for {
		select {
		case l := <-logs:
			if strings.Contains(l, want) {
				return
			}
		case <-limit.C:
			t.Fatalf("no log line saying %q within 30 s", want)
		}
	}
}
