package api

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// maxSocketPath is the longest unix socket path Linux accepts (sun_path
// holds 108 bytes including the terminating NUL).
const maxSocketPath = 107

// listenUnix listens on a unix socket at path with mode 0600.
//
// The socket is bound under a temporary name, chmod'ed, then renamed into
// place, so it is never reachable with the umask's looser mode. cleanup
// closes the listener and removes the socket file if it is still ours.
func listenUnix(path string) (ln net.Listener, cleanup func(), err error) {
	if path == "" {
		return nil, nil, errors.New("no socket path")
	}
	tmp := path + ".new"
	if len(tmp) > maxSocketPath {
		return nil, nil, fmt.Errorf("socket path %s is too long (%d bytes; at most %d)",
			path, len(path), maxSocketPath-len(".new"))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, nil, err
	}
	if err := removeStale(path); err != nil {
		return nil, nil, err
	}
	// A leftover temporary socket can only be from a crashed start.
	if fi, err := os.Lstat(tmp); err == nil && fi.Mode()&fs.ModeSocket != 0 {
		os.Remove(tmp)
	}

	l, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, nil, err
	}
	ul := l.(*net.UnixListener)
	ul.SetUnlinkOnClose(false) // the file is renamed; cleanup removes it
	if err := os.Chmod(tmp, 0o600); err != nil {
		ul.Close()
		os.Remove(tmp)
		return nil, nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		ul.Close()
		os.Remove(tmp)
		return nil, nil, err
	}
	ours, err := os.Lstat(path)
	if err != nil {
		ul.Close()
		return nil, nil, err
	}
	cleanup = func() {
		ul.Close()
		if fi, err := os.Lstat(path); err == nil && os.SameFile(fi, ours) {
			os.Remove(path)
		}
	}
	return ul, cleanup, nil
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
