// Package porttest hands out TCP ports to tests, one test at a time per
// port number across every test process on the machine.
//
// Tests run BGP daemons side by side on loopback addresses (ribkeeper on
// 127.0.0.1, BIRD on 127.0.0.2, ...). A port that was merely free on one
// address a moment ago can still collide: a daemon that listens on the
// wildcard address takes the number on every address (BIRD does without
// "strict bind"), and two tests, in one binary or in two packages run in
// parallel, can pick the same number at random. So a port is reserved by
// an exclusive lock on a file named after it, held until the test ends
// (and released by the kernel if the process dies), and checked free on
// every address, not just the one asked for: a number handed out here is
// in no other running test's hands, whatever address either binds.
package porttest

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Range of the ports handed out: below Linux's ephemeral range
// (32768-60999), where the kernel never hands a port to an outgoing
// connection (a BGP dial, a database client) between the choice and the
// test's bind.
const (
	First = 20000
	Last  = 32767
)

// Free returns a port reserved for t until it ends, free on every address
// (so free on addr) when it returns.
func Free(t testing.TB, addr string) int {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "ribkeeper-test-ports")
	if err := os.MkdirAll(dir, 0o1777); err != nil {
		t.Fatalf("port reservations: %v", err)
	}
	for range 200 {
		port := First + rand.IntN(Last-First+1)
		f, ok := reserve(dir, port)
		if !ok {
			continue
		}
		if !free(addr, port) {
			f.Close()
			continue
		}
		t.Cleanup(func() { f.Close() })
		return port
	}
	t.Fatalf("no free port in %d-%d on %s after 200 tries", First, Last, addr)
	return 0
}

// Take reserves the given port number for t until it ends (a lab setup's
// fixed port), and reports whether it could: false when another test holds
// it or something listens on it, on any address.
func Take(t testing.TB, port int) bool {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "ribkeeper-test-ports")
	if err := os.MkdirAll(dir, 0o1777); err != nil {
		t.Fatalf("port reservations: %v", err)
	}
	f, ok := reserve(dir, port)
	if !ok {
		return false
	}
	if !free("127.0.0.1", port) {
		f.Close()
		return false
	}
	t.Cleanup(func() { f.Close() })
	return true
}

// reserve takes the lock of port; ok is false when another test holds it.
func reserve(dir string, port int) (*os.File, bool) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)+".lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
}

// free reports whether port can be bound on addr and on the wildcard
// addresses (a listener on any address of either family holds it there).
func free(addr string, port int) bool {
	for _, a := range []string{addr, "0.0.0.0", "::"} {
		l, err := net.Listen("tcp", net.JoinHostPort(a, strconv.Itoa(port)))
		if err != nil {
			var se *os.SyscallError
			if a == "::" && errors.As(err, &se) && errors.Is(se.Err, syscall.EADDRNOTAVAIL) {
				continue // no IPv6 on this machine
			}
			return false
		}
		l.Close()
	}
	return true
}
