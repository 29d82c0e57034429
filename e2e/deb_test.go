package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// unit is what the test reads of the installed systemd unit: how systemd
// would start the daemon.
type unit struct {
	execStartPre, execStart          []string
	user, group, workDir, runtimeDir string
}

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var u unit
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok || strings.HasPrefix(key, "#") {
			continue
		}
		switch key {
		case "ExecStartPre":
			u.execStartPre = strings.Fields(val)
		case "ExecStart":
			u.execStart = strings.Fields(val)
		case "User":
			u.user = val
		case "Group":
			u.group = val
		case "WorkingDirectory":
			u.workDir = val
		case "RuntimeDirectory":
			u.runtimeDir = "/run/" + val
		case "DynamicUser":
			t.Errorf("%s: DynamicUser=%s: the package runs the daemon as its ribkeeper user", path, val)
		}
	}
	if len(u.execStart) == 0 || u.user == "" || u.workDir == "" || u.runtimeDir == "" {
		t.Fatalf("%s: ExecStart %q, User %q, WorkingDirectory %q, RuntimeDirectory %q: want all", path, u.execStart, u.user, u.workDir, u.runtimeDir)
	}
	return u
}

// mustRun runs a command and fails the test with its output if it fails.
func mustRun(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// `make deb` builds a package that installs with dpkg -i: the binary, the
// unit, the example configuration as a conffile that passes check-config
// where it is installed, the ribkeeper system user and its data directory,
// the bash completion and the FastNetMon hook; the daemon starts as that
// user with the unit's command line and answers `ribkeeper status`. The
// package is purged at the end and no daemon is left running.
func TestDebianPackage(t *testing.T) {
	need := func(why string) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	if os.Geteuid() != 0 {
		need("installing a .deb needs root")
	}
	for _, tool := range []string{"dpkg", "dpkg-query", "make", "adduser"} {
		if _, err := exec.LookPath(tool); err != nil {
			need(tool + " is needed to build and install the .deb")
		}
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", "ribkeeper").Output(); err == nil && strings.Contains(string(out), "installed") {
		need("a ribkeeper package is installed on this machine; the test would replace and purge it")
	}
	_, userErr := user.Lookup("ribkeeper")
	hadUser := userErr == nil

	out := t.TempDir()
	mustRun(t, "..", []string{"DEB_OUT=" + out, "BIN=" + filepath.Join(out, "ribkeeper")}, "make", "--no-print-directory", "deb")
	debs, _ := filepath.Glob(filepath.Join(out, "ribkeeper_*.deb"))
	if len(debs) != 1 {
		t.Fatalf("make deb made %q in %s", debs, out)
	}

	var (
		daemon      *exec.Cmd
		exited      = make(chan error, 1)
		stopped     bool
		madeRuntime string
	)
	t.Cleanup(func() {
		if daemon != nil && !stopped {
			daemon.Process.Kill()
			<-exited
		}
		if madeRuntime != "" {
			os.RemoveAll(madeRuntime)
		}
		if out, err := exec.Command("dpkg", "--purge", "ribkeeper").CombinedOutput(); err != nil {
			t.Errorf("dpkg --purge ribkeeper: %v\n%s", err, out)
		}
		if !hadUser {
			if out, err := exec.Command("deluser", "--system", "ribkeeper").CombinedOutput(); err != nil {
				t.Errorf("deluser ribkeeper: %v\n%s", err, out)
			}
		}
	})
	mustRun(t, "", []string{"DEBIAN_FRONTEND=noninteractive"}, "dpkg", "-i", debs[0])

	// What the package holds, where.
	for path, mode := range map[string]os.FileMode{
		"/usr/bin/ribkeeper": 0o755, "/usr/lib/systemd/system/ribkeeper.service": 0o644, "/etc/ribkeeper/ribkeeper.toml": 0o644,
		"/usr/share/bash-completion/completions/ribkeeper": 0o644, "/usr/lib/ribkeeper/fastnetmon/ribkeeper-notify.sh": 0o755,
	} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v, want mode %v", path, err, mode)
		}
	}
	if conf := mustRun(t, "", nil, "dpkg-query", "-W", "-f=${Conffiles}", "ribkeeper"); !strings.Contains(conf, "/etc/ribkeeper/ribkeeper.toml ") {
		t.Errorf("conffiles %q: want /etc/ribkeeper/ribkeeper.toml", conf)
	}
	completion, _ := os.ReadFile("/usr/share/bash-completion/completions/ribkeeper")
	if want := mustRun(t, "", nil, "/usr/bin/ribkeeper", "completion", "bash"); string(completion) != want {
		t.Errorf("the installed completion is not what the installed binary prints")
	}
	u, err := user.Lookup("ribkeeper")
	if err != nil {
		t.Fatalf("no ribkeeper user after the install: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid == 0 || uid >= 1000 {
		t.Errorf("ribkeeper user has uid %d: want a system user", uid)
	}
	var st syscall.Stat_t
	if err := syscall.Stat("/var/lib/ribkeeper", &st); err != nil || int(st.Uid) != uid {
		t.Errorf("/var/lib/ribkeeper: %v, owner %d, want the ribkeeper user %d", err, st.Uid, uid)
	}

	if got := mustRun(t, "", nil, "/usr/bin/ribkeeper", "check-config", "--config", "/etc/ribkeeper/ribkeeper.toml"); !strings.Contains(got, ": ok") {
		t.Errorf("check-config of the installed configuration: %s", got)
	}

	// Start the daemon as systemd would: the unit's user and group, its
	// working and runtime directories, ExecStartPre, then ExecStart.
	un := readUnit(t, "/usr/lib/systemd/system/ribkeeper.service")
	if un.user != "ribkeeper" || (un.group != "" && un.group != "ribkeeper") {
		t.Errorf("the unit runs as %s:%s, want ribkeeper", un.user, un.group)
	}
	if _, err := os.Stat(un.runtimeDir); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(un.runtimeDir, 0o755); err != nil {
			t.Fatal(err)
		}
		madeRuntime = un.runtimeDir
	}
	if err := os.Chown(un.runtimeDir, uid, gid); err != nil {
		t.Fatal(err)
	}
	asUser := func(argv []string) *exec.Cmd {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = un.workDir
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + un.workDir}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		return cmd
	}
	if len(un.execStartPre) > 0 {
		if out, err := asUser(un.execStartPre).CombinedOutput(); err != nil {
			t.Fatalf("ExecStartPre %q as ribkeeper: %v\n%s", un.execStartPre, err, out)
		}
	}
	var logs bytes.Buffer
	daemon = asUser(un.execStart)
	daemon.Stdout, daemon.Stderr = &logs, &logs
	if err := daemon.Start(); err != nil {
		t.Fatalf("ExecStart %q: %v", un.execStart, err)
	}
	go func() { exited <- daemon.Wait() }()

	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		status, err := exec.CommandContext(ctx, "/usr/bin/ribkeeper", "status", "--config", "/etc/ribkeeper/ribkeeper.toml").CombinedOutput()
		cancel()
		if err == nil {
			t.Logf("ribkeeper status:\n%s", status)
			break
		}
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("the daemon exited (%v) before it answered status:\n%s", err, logs.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer to `ribkeeper status` within 60 s (%s):\n%s", status, logs.String())
		}
	}
	if _, err := os.Stat("/var/lib/ribkeeper/ribkeeper.db"); err != nil {
		t.Errorf("the store is not under /var/lib/ribkeeper: %v", err)
	}
	daemon.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("the daemon stopped with %v after SIGTERM, want status 0:\n%s", err, logs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the daemon did not stop within 60 s of SIGTERM:\n%s", logs.String())
	}

	// Purge takes everything but the user.
	mustRun(t, "", nil, "dpkg", "--purge", "ribkeeper")
	for _, p := range []string{"/usr/bin/ribkeeper", "/etc/ribkeeper/ribkeeper.toml", "/var/lib/ribkeeper"} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there after dpkg --purge: %v", p, err)
		}
	}
}
