package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// makeBuild runs `make build` in dir with the binary written to bin, the
// way an operator builds ribkeeper, and returns make's output.
func makeBuild(t *testing.T, dir, bin string, env ...string) string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("make is not installed")
		}
		t.Skip("make is not installed")
	}
	cmd := exec.Command("make", "-C", dir, "build", "BIN="+bin)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make build in %s: %v\n%s", dir, err, out)
	}
	return string(out)
}

// `make build` stamps the version and commit from git into the binary:
// `ribkeeper version` and `--version` print them with the build date, the
// Go and GoBGP versions; `go version -m` shows the stamping flags; the
// running daemon exports them as ribkeeper_build_info.
func TestVersionFromMakeBuild(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): TestVersionOutsideGit covers that build", err)
	}
	commit := strings.TrimSpace(string(head))
	describe, err := exec.Command("git", "-C", root, "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(describe))
	bin := filepath.Join(t.TempDir(), "ribkeeper")
	makeBuild(t, root, bin)

	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(bin, arg).CombinedOutput()
		if err != nil {
			t.Fatalf("ribkeeper %s: %v\n%s", arg, err, out)
		}
		for _, want := range []string{"ribkeeper " + version + "\n", "commit:  " + commit + "\n", "built:   20",
			"go:      go1.", "gobgp:   v4."} {
			if !strings.Contains(string(out), want) {
				t.Errorf("ribkeeper %s lacks %q:\n%s", arg, want, out)
			}
		}
		if strings.Contains(string(out), "not stamped") || strings.Contains(string(out), "unknown") {
			t.Errorf("ribkeeper %s from make build says it is unstamped:\n%s", arg, out)
		}
	}

	goVersion, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(goVersion), "buildinfo.commit="+commit) {
		t.Errorf("go version -m does not show the stamped commit:\n%s", goVersion)
	}

	// The daemon built so exports its build as a metric.
	dir := t.TempDir()
	sock := filepath.Join(dir, "rk.sock")
	conf := filepath.Join(dir, "rk.toml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`[bgp]
asn = 65000
router_id = "127.0.0.1"
listen_port = -1
[store]
path = %q
[api]
socket = %q
`, filepath.Join(dir, "rk.db"), sock)), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "rk.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", "--config", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		<-exited
	})
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	want := fmt.Sprintf(`ribkeeper_build_info{commit=%q,gobgp="v4.`, commit)
	var body string
	waitFor(t, 30*time.Second, "ribkeeper_build_info on /metrics", func() bool {
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "rk.log"))
			t.Fatalf("ribkeeper exited: %v\n%s", err, log)
		default:
		}
		resp, err := hc.Get("http://rk/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return strings.Contains(body, "ribkeeper_build_info")
	})
	if !strings.Contains(body, want) || !strings.Contains(body, fmt.Sprintf(`version=%q} 1`, version)) {
		lines := ""
		for _, l := range strings.Split(body, "\n") {
			if strings.Contains(l, "build_info") {
				lines += l + "\n"
			}
		}
		t.Errorf("ribkeeper_build_info does not name commit %s and version %s:\n%s", commit, version, lines)
	}
}

// `make build` from a source tree without git (an unpacked archive) still
// builds, and the binary says it was built outside a git checkout.
func TestVersionOutsideGit(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	if out, err := exec.Command("git", "-C", root, "ls-files", "-co", "--exclude-standard").Output(); err == nil {
		files = strings.Fields(string(out))
	} else {
		t.Skipf("cannot list the source files without git (%v)", err)
	}
	src := filepath.Join(t.TempDir(), "ribkeeper-src")
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the working tree
			}
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(t.TempDir(), "ribkeeper")
	out := makeBuild(t, src, bin, "GIT_CEILING_DIRECTORIES="+filepath.Dir(src))
	if !strings.Contains(out, "not a git checkout") {
		t.Errorf("make build outside git does not say so:\n%s", out)
	}
	v, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("ribkeeper version: %v\n%s", err, v)
	}
	for _, want := range []string{"ribkeeper unknown\n", "built outside a git checkout", "commit:  none\n", "gobgp:   v4."} {
		if !strings.Contains(string(v), want) {
			t.Errorf("ribkeeper version lacks %q:\n%s", want, v)
		}
	}
}
