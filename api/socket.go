package api

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// maxSocketPath is the longest unix socket path Linux accepts (sun_path
// holds 108 bytes including the terminating NUL).
const maxSocketPath = 107

// listenUnix listens on a unix socket at path with mode 0600, and
// returns the socket file it made (to tell later whether the file at path
// is still that one).
//
// The socket is bound under a temporary name, chmod'ed, then renamed into
// place, so it is never reachable with the umask's looser mode. cleanup
// closes the listener and removes the socket file if it is still ours.
func listenUnix(path string) (ln net.Listener, ours fs.FileInfo, cleanup func(), err error) {
	if path == "" {
		return nil, nil, nil, errors.New("no socket path")
	}
	tmp := path + ".new"
	if len(tmp) > maxSocketPath {
		return nil, nil, nil, fmt.Errorf("socket path %s is too long (%d bytes; at most %d)",
			path, len(path), maxSocketPath-len(".new"))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, nil, nil, err
	}
	if err := removeStale(path); err != nil {
		return nil, nil, nil, err
	}
	// A leftover temporary socket can only be from a crashed start.
	if fi, err := os.Lstat(tmp); err == nil && fi.Mode()&fs.ModeSocket != 0 {
		os.Remove(tmp)
	}

	l, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, nil, nil, err
	}
	ul := l.(*net.UnixListener)
	ul.SetUnlinkOnClose(false) // the file is renamed; cleanup removes it
	if err := os.Chmod(tmp, 0o600); err != nil {
		ul.Close()
		os.Remove(tmp)
		return nil, nil, nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		ul.Close()
		os.Remove(tmp)
		return nil, nil, nil, err
	}
	ours, err = os.Lstat(path)
	if err != nil {
		ul.Close()
		return nil, nil, nil, err
	}
	cleanup = func() {
		ul.Close()
		if fi, err := os.Lstat(path); err == nil && os.SameFile(fi, ours) {
			os.Remove(path)
		}
	}
	return ul, ours, cleanup, nil
}

// DefaultSocketCheck is how often the control socket's file is checked.
const DefaultSocketCheck = 2 * time.Second

// socketListener is the control socket's listener, kept reachable: when
// its file is removed (a cleanup of /run, an operator's rm), watch binds
// a new one at the same path and Accept goes on with it. The CLI,
// `shutdown --withdraw` and the profiles stay reachable without a
// restart.
type socketListener struct {
	path string
	log  hclog.Logger

	mu      sync.Mutex
	cur     net.Listener
	ours    fs.FileInfo
	cleanup func()
	closed  bool
	lastErr string // the last failure to recreate, logged once
}

func newSocketListener(path string, log hclog.Logger) (*socketListener, error) {
	ln, ours, cleanup, err := listenUnix(path)
	if err != nil {
		return nil, err
	}
	return &socketListener{path: path, log: log, cur: ln, ours: ours, cleanup: cleanup}, nil
}

// Accept waits on the current socket; when watch replaced it, on the new
// one.
func (l *socketListener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		ln := l.cur
		l.mu.Unlock()
		c, err := ln.Accept()
		if err == nil {
			return c, nil
		}
		l.mu.Lock()
		replaced := l.cur != ln && !l.closed
		l.mu.Unlock()
		if !replaced {
			return nil, err
		}
	}
}

// Close closes the socket and removes its file if it is still ours.
func (l *socketListener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		l.cleanup()
	}
	return nil
}

func (l *socketListener) Addr() net.Addr {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur.Addr()
}

// watch checks the socket file every interval until ctx is done, and
// recreates it when it is gone. A path that now holds something else (a
// file, another process's socket) is left alone and logged.
func (l *socketListener) watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l.check()
		}
	}
}

func (l *socketListener) check() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	fi, err := os.Lstat(l.path)
	if err == nil && os.SameFile(fi, l.ours) {
		l.lastErr = ""
		return
	}
	ln, ours, cleanup, err := listenUnix(l.path)
	if err != nil {
		if msg := err.Error(); msg != l.lastErr {
			l.lastErr = msg
			l.log.Error("the control socket's file was removed or replaced and cannot be recreated; the CLI cannot reach this daemon until it is (fix the path, or restart)",
				"socket", l.path, "error", err)
		}
		return
	}
	oldCleanup := l.cleanup
	l.cur, l.ours, l.cleanup, l.lastErr = ln, ours, cleanup, ""
	oldCleanup() // closes the old listener: Accept moves on to ln
	l.log.Warn("control socket file was removed; recreated it", "socket", l.path)
}

// removeStale removes a socket file nobody listens on. It refuses to touch
// anything that is not a socket, and a socket that accepts connections.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket; refusing to replace it", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("another process is listening on %s (is ribkeeper already running?)", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("cannot tell whether %s is in use: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing stale socket: %w", err)
	}
	return nil
}
