// Package instance keeps a second ribkeeper from starting on what a
// running one owns. Claim runs before the daemon opens its store or
// starts its speaker: it refuses when a process answers on the control
// socket or holds the lock of the SQLite store, and names that process
// (its pid, from the socket's peer credentials or the lock file, and its
// command line), so that the second instance exits before it announces,
// withdraws or reconciles anything.
//
// The store lock is an exclusive flock(2) on a file next to the database
// (STORE.lock) that holds the owner's pid. The kernel drops it when the
// owner exits, however it exits, so a crash never leaves a stale lock;
// the file itself stays.
package instance

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Config names what one instance owns.
type Config struct {
	Socket    string // the control socket ([api] socket)
	StoreFile string // the SQLite database ([store] path); "" for PostgreSQL
}

// Lock is a claimed instance; Release gives it up.
type Lock struct {
	f *os.File
}

// LockPath is the lock file of the SQLite database at store.
func LockPath(store string) string { return store + ".lock" }

// Claim checks that no other process serves cfg.Socket or holds the lock
// of cfg.StoreFile, and takes that lock. The error says which process
// holds what and what to do.
func Claim(cfg Config) (*Lock, error) {
	if cfg.Socket != "" {
		if err := checkSocket(cfg.Socket); err != nil {
			return nil, err
		}
	}
	l := &Lock{}
	if cfg.StoreFile != "" {
		f, err := lockStore(cfg.StoreFile)
		if err != nil {
			return nil, err
		}
		l.f = f
	}
	return l, nil
}

// Release drops the store lock (the process exiting drops it too).
func (l *Lock) Release() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// checkSocket refuses when a process accepts connections on path.
func checkSocket(path string) error {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&fs.ModeSocket == 0 {
		return nil // absent, or not a socket: the API says what is wrong with it
	}
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return nil // stale: nobody listens; the API replaces it
	}
	defer c.Close()
	pid := peerPID(c.(*net.UnixConn))
	return fmt.Errorf("another ribkeeper is already running: %s serves the control socket %s; "+
		"stop it first (`ribkeeper shutdown --socket %s`, or `systemctl stop ribkeeper`), "+
		"or give this instance its own [api] socket and [store]", describe(pid), path, path)
}

// peerPID is the pid of the process that listens on the socket c is
// connected to (SO_PEERCRED), or 0.
func peerPID(c *net.UnixConn) int {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	pid := 0
	rc.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}

// lockStore takes the lock of the database at store and writes this
// process's pid into it.
func lockStore(store string) (*os.File, error) {
	path := LockPath(store)
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("store lock %s: %w (create the [store] path's directory, writable by this user)", path, err)
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("store lock %s: %w (the [store] path's directory must be writable by this user)", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			return nil, fmt.Errorf("another ribkeeper is already running on the store %s: %s holds its lock %s; "+
				"stop it first, or give this instance its own [store] path", store, describe(pid), path)
		}
		return nil, fmt.Errorf("store lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// describe names process pid: "pid 1234 (ribkeeper serve --config
// /etc/ribkeeper/ribkeeper.toml)", or "a process whose pid is unknown".
func describe(pid int) string {
	if pid <= 0 {
		return "a process (its pid could not be read)"
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	cmd := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	if err != nil || cmd == "" {
		return "pid " + strconv.Itoa(pid)
	}
	if len(cmd) > 200 {
		cmd = cmd[:200] + "..."
	}
	return fmt.Sprintf("pid %d (%s)", pid, cmd)
}
