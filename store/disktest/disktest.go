// Package disktest gives tests a small file system of their own that they
// can fill up or turn read-only: a tmpfs mounted under the test's
// temporary directory, so that "disk full" and "read-only disk" are the
// kernel's real answers, not simulated ones.
//
// Mounting needs root. Without it the test is skipped, or fails when the
// CI environment variable is set (CI runs as root).
package disktest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size (mount's syntax: "2m", "512k") on a new
// directory under t.TempDir() and returns the directory. It is unmounted
// when the test and its cleanups registered after Mount are done (close
// files on it before then).
func Mount(t testing.TB, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		skipOrFail(t, "mounting a tmpfs needs root")
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0755", "tmpfs", dir).CombinedOutput(); err != nil {
		skipOrFail(t, fmt.Sprintf("mount -t tmpfs -o size=%s tmpfs %s: %v: %s", size, dir, err, strings.TrimSpace(string(out))))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			// Something still holds a file open: detach it anyway so
			// that the temporary directory can be removed.
			t.Errorf("umount %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
			exec.Command("umount", "-l", dir).Run()
		}
	})
	return dir
}

func skipOrFail(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s, and CI is set: CI must run as root with mount allowed", why)
	}
	t.Skip(why + " (run as root to include this test)")
}

// Fill writes the file dir/name until the file system holding dir is
// full and returns its path; removing the file frees the space again.
func Fill(t testing.TB, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return path
			}
			t.Fatalf("fill %s: %v", dir, err)
		}
	}
}

// ReadOnly remounts the tmpfs dir (from Mount) read-only, or read-write
// again when ro is false.
func ReadOnly(t testing.TB, dir string, ro bool) {
	t.Helper()
	opt := "remount,rw"
	if ro {
		opt = "remount,ro"
	}
	if out, err := exec.Command("mount", "-o", opt, dir).CombinedOutput(); err != nil {
		t.Fatalf("mount -o %s %s: %v: %s", opt, dir, err, strings.TrimSpace(string(out)))
	}
}
