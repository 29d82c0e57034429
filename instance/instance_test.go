package instance

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A second claim on the same store is refused while the first holds it,
// naming the holder's pid; after Release it succeeds.
func TestClaimStore(t *testing.T) {
	db := filepath.Join(t.TempDir(), "data", "rk.db")
	first, err := Claim(Config{StoreFile: db})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(LockPath(db))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file holds %q (%v), want this pid %d", b, err, os.Getpid())
	}
	_, err = Claim(Config{StoreFile: db})
	if err == nil {
		t.Fatal("a second claim on the same store succeeded")
	}
	for _, want := range []string{"another ribkeeper is already running on the store " + db, "pid " + strconv.Itoa(os.Getpid()) + " (", "[store] path"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	first.Release()
	again, err := Claim(Config{StoreFile: db})
	if err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	again.Release()
}

// A process listening on the control socket is named; a socket file
// nobody listens on is no obstacle.
func TestClaimSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "rk.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Claim(Config{Socket: sock})
	if err == nil {
		t.Fatal("claim succeeded though a process listens on the socket")
	}
	for _, want := range []string{"pid " + strconv.Itoa(os.Getpid()) + " (", "serves the control socket " + sock, "ribkeeper shutdown --socket " + sock} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Lstat(sock); err != nil {
		t.Fatalf("the stale socket file is gone: %v", err)
	}
	l, err := Claim(Config{Socket: sock})
	if err != nil {
		t.Fatalf("a stale socket file refused the claim: %v", err)
	}
	l.Release()
}
