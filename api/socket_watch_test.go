package api_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		fi, err := os.Lstat(ts.sock)
		if err == nil && !os.SameFile(fi, before) {
			if fi.Mode()&fs.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
				t.Errorf("recreated socket has mode %v, want a socket with 0600", fi.Mode())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the removed socket was not recreated within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code, _ := ts.do(t, "GET", "/v1/rules", ""); code != 200 {
		t.Fatalf("GET /v1/rules on the recreated socket: %d", code)
	}

	// Twice: the new socket is watched like the first.
	if err := os.Remove(ts.sock); err != nil {
		t.Fatal(err)
	}
	ts.hc.CloseIdleConnections()
	waitDial(t, ts.sock)
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
	timeout := time.After(30 * time.Second)
	for waiting := true; waiting; {
		select {
		case l := <-logged:
			waiting = !strings.Contains(l, "cannot be recreated")
		case <-timeout:
			t.Fatal("no log line within 30s saying the socket cannot be recreated")
		}
	}
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

func waitDial(t *testing.T, sock string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s after 30s", sock)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
