package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"github.com/ribkeeper/ribkeeper/store/pgtest"
)

// runSecond starts another ribkeeper on conf and waits for it to exit; it
// must exit by itself, with code 1.
func runSecond(t *testing.T, conf string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "serve", "--config", conf).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("second ribkeeper: %v, want exit code 1; output:\n%s", err, out)
	}
	return string(out)
}

// rewrite copies the running daemon's configuration with the given
// lines' values replaced (key = value, matched at line start).
func rewrite(t *testing.T, d *daemon, name string, set map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(d.conf)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for k, v := range set {
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(k) + ` = .*$`)
		if !re.MatchString(text) {
			t.Fatalf("no %s in %s", k, d.conf)
		}
		text = re.ReplaceAllLiteralString(text, k+" = "+v)
	}
	conf := filepath.Join(d.dir, name)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf
}

// A second ribkeeper on the store and control socket of a running one
// exits before it starts anything, naming the running one's pid: its
// speaker never starts and the router's session with the first stays as
// it was. With its own socket but the same store, the store lock stops
// it the same way; with its own socket and store but the same BGP
// address and port, it says which address:port and what to change.
func TestSecondInstanceRefused(t *testing.T) {
	d, bird := setup(t)
	before, err := bird.Since(0)
	if err != nil {
		t.Fatal(err)
	}
	pid := "pid " + strconv.Itoa(d.cmd.Process.Pid) + " ("
	port := birdtest.FreePort(t, "127.0.0.1")

	// Same store and socket, its own BGP port: the socket names the first.
	out := runSecond(t, rewrite(t, d, "same.toml", map[string]string{"listen_port": strconv.Itoa(port)}))
	for _, want := range []string{"another ribkeeper is already running", pid, "serves the control socket " + d.socket} {
		if !strings.Contains(out, want) {
			t.Errorf("second instance on the same socket: output lacks %q:\n%s", want, out)
		}
	}
	for _, never := range []string{"speaker started", "reconcile", "rule announced"} {
		if strings.Contains(out, never) {
			t.Errorf("second instance got as far as %q:\n%s", never, out)
		}
	}

	// Its own socket, the same store: the store lock names the first.
	out = runSecond(t, rewrite(t, d, "store.toml", map[string]string{
		"listen_port": strconv.Itoa(port), "socket": strconv.Quote(filepath.Join(d.dir, "second.sock"))}))
	for _, want := range []string{"another ribkeeper is already running on the store " + filepath.Join(d.dir, "rk.db"), pid, "rk.db.lock"} {
		if !strings.Contains(out, want) {
			t.Errorf("second instance on the same store: output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "speaker started") {
		t.Errorf("second instance on the same store started its speaker:\n%s", out)
	}

	// Its own socket and store, the same BGP address and port.
	b, err := os.ReadFile(d.conf)
	if err != nil {
		t.Fatal(err)
	}
	rkPort := regexp.MustCompile(`(?m)^listen_port = (\d+)$`).FindStringSubmatch(string(b))[1]
	out = runSecond(t, rewrite(t, d, "port.toml", map[string]string{
		"socket": strconv.Quote(filepath.Join(d.dir, "third.sock")),
		"path":   strconv.Quote(filepath.Join(d.dir, "third.db"))}))
	for _, want := range []string{"cannot listen on 127.0.0.1:" + rkPort, "[bgp] listen_port (now " + rkPort + ")"} {
		if !strings.Contains(out, want) {
			t.Errorf("second instance on the same BGP port: output lacks %q:\n%s", want, out)
		}
	}

	// The first is untouched: its session never reset, its CLI answers.
	after, err := bird.Since(0)
	if err != nil || !bird.Established(0) || !birdtest.SameSince(before, after) {
		t.Errorf("BIRD's session with the first ribkeeper changed: established since %q, now %q (%v)", before, after, err)
	}
	d.mustCLI("status")
}

// On a shared PostgreSQL, a second instance of a running site (its own
// socket, no BGP listener) exits before its speaker starts, naming the
// running one's host and pid; an instance of another site starts.
func TestSecondInstanceSamePostgresSite(t *testing.T) {
	srv := pgtest.StartServer(t)
	dsn := srv.NewDatabase(t)
	dir := t.TempDir()
	conf := func(name, site string) string {
		p := filepath.Join(dir, name+".toml")
		text := fmt.Sprintf("site = %q\n[bgp]\nasn = 65000\nrouter_id = \"127.0.0.1\"\nlisten_port = -1\n"+
			"[store]\ndriver = \"postgres\"\ndsn = %q\n[api]\nsocket = %q\n", site, dsn, filepath.Join(dir, name+".sock"))
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := &daemon{t: t, dir: dir, conf: conf("first", "fra"), socket: filepath.Join(dir, "first.sock")}
	t.Cleanup(first.stop)
	first.start()

	out := runSecond(t, conf("second", "fra"))
	host, _ := os.Hostname()
	for _, want := range []string{`another ribkeeper already serves site "fra"`,
		fmt.Sprintf("host=%s pid=%d", host, first.cmd.Process.Pid), "own site"} {
		if !strings.Contains(out, want) {
			t.Errorf("second instance of site fra: output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "speaker started") {
		t.Errorf("second instance of site fra started its speaker:\n%s", out)
	}

	other := &daemon{t: t, dir: t.TempDir(), conf: conf("other", "ams"), socket: filepath.Join(dir, "other.sock")}
	t.Cleanup(other.stop)
	other.start()
}
