package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// binary is the ribkeeper executable built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ribkeeper-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "ribkeeper")
	build := exec.Command("go", "build", "-o", binary, "..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build ribkeeper:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// daemon is one ribkeeper process under test, restartable on the same
// configuration and database.
type daemon struct {
	t      testing.TB
	dir    string
	conf   string
	socket string
	cmd    *exec.Cmd
	log    *os.File
	exited <-chan error // receives once when the process ends; nil when not running
	// wrap, if set, is a command that runs ribkeeper (e.g. prlimit with
	// its arguments); it must exec it, so that cmd's pid is ribkeeper's.
	wrap []string
	// args are more arguments of serve (e.g. --accept-new-store).
	args []string
	// ready is the client command whose success says the daemon is up
	// (default: rule list).
	ready []string
}

// setup starts a BIRD on 127.0.0.2 and a ribkeeper on 127.0.0.1 peering
// with it over SQLite, and waits until the session is established.
func setup(t *testing.T) (*daemon, *birdtest.Router) {
	t.Helper()
	dir := t.TempDir()
	return startPair(t, pair{
		rkAddr: "127.0.0.1", birdAddr: "127.0.0.2", site: "e2e", dir: dir,
		store: fmt.Sprintf("[store]\npath = %q\n", filepath.Join(dir, "rk.db")),
	})
}

// pair describes one appliance under test: a ribkeeper and its upstream BIRD.
type pair struct {
	rkAddr, birdAddr string // loopback addresses
	site             string
	dir              string
	store            string // the [store] section of the config
}

func startPair(t *testing.T, p pair) (*daemon, *birdtest.Router) {
	t.Helper()
	birdtest.Binary(t)
	rkPort := birdtest.FreePort(t, p.rkAddr)
	birdPort := birdtest.FreePort(t, p.birdAddr)
	bird := birdtest.Start(t, birdtest.Options{
		Address: p.birdAddr, Port: birdPort, ASN: 65001,
		Peers: []birdtest.Peer{{Address: p.rkAddr, Port: rkPort, ASN: 65000}},
	})
	d := &daemon{t: t, dir: p.dir, conf: filepath.Join(p.dir, "ribkeeper.toml"), socket: filepath.Join(p.dir, "rk.sock")}
	conf := fmt.Sprintf(`site = %q
[log]
level = "debug"
[bgp]
asn = 65000
router_id = %q
listen_addresses = [%q]
listen_port = %d
[[neighbor]]
address = %q
asn = 65001
port = %d
local_address = %q
families = ["ipv4-flowspec", "ipv6-flowspec"]
[api]
socket = %q
%s`, p.site, p.rkAddr, p.rkAddr, rkPort, p.birdAddr, birdPort, p.rkAddr, d.socket, p.store)
	if err := os.WriteFile(d.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	d.start()
	waitFor(t, 30*time.Second, "BGP session with BIRD on "+p.birdAddr+" established", func() bool { return bird.Established(0) })
	return d, bird
}

func (d *daemon) start() {
	d.t.Helper()
	var err error
	d.log, err = os.OpenFile(filepath.Join(d.dir, "ribkeeper.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		d.t.Fatal(err)
	}
	args := append(append(append([]string{}, d.wrap...), binary, "serve", "--config", d.conf), d.args...)
	d.cmd = exec.Command(args[0], args[1:]...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		d.t.Fatalf("start ribkeeper: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- d.cmd.Wait() }()
	d.exited = exited
	deadline := time.Now().Add(30 * time.Second)
	for {
		ready := d.ready
		if len(ready) == 0 {
			ready = []string{"rule", "list"}
		}
		if _, _, code := d.cli(ready...); code == 0 {
			return
		}
		select {
		case err := <-exited:
			d.exited = nil
			d.t.Fatalf("ribkeeper exited at start (%v); log:\n%s", err, d.logTail(40))
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("ribkeeper's control socket did not answer within 30s; log:\n%s", d.logTail(40))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (d *daemon) logTail(n int) string {
	b, err := os.ReadFile(filepath.Join(d.dir, "ribkeeper.log"))
	if err != nil {
		return err.Error()
	}
	var lines []string
	for l := range strings.SplitSeq(strings.TrimRight(string(b), "\n"), "\n") {
		// A waitFor polls /v1/status every 20 ms: its request lines
		// would fill the tail and hide what the daemon did.
		if strings.Contains(l, "request: method=GET") && strings.Contains(l, "status=200") {
			continue
		}
		lines = append(lines, l)
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// kill stops the daemon with SIGKILL: no clean shutdown, no withdrawals.
func (d *daemon) kill() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
	d.exited = nil
	d.log.Close()
}

func (d *daemon) stop() {
	if d.exited != nil && d.t.Failed() {
		d.t.Logf("ribkeeper's goroutines in its own code when the test failed:\n%s", d.goroutines())
	}
	if d.exited != nil {
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(10 * time.Second):
			d.t.Errorf("ribkeeper did not stop within 10s of SIGTERM")
			d.cmd.Process.Kill()
			<-d.exited
		}
		d.exited = nil
		d.log.Close()
	}
	if d.t.Failed() {
		d.t.Logf("ribkeeper log (successful GETs left out):\n%s", d.logTail(150))
	}
}

// goroutines returns the running daemon's goroutine profile (pprof on the
// control socket, stacks grouped), keeping the groups with a frame of
// ribkeeper's own code: a failed test shows where the daemon waited.
func (d *daemon) goroutines() string {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", d.socket)
		},
	}}
	resp, err := hc.Get("http://ribkeeper/debug/pprof/goroutine?debug=1")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err.Error()
	}
	var keep []string
	for g := range strings.SplitSeq(string(b), "\n\n") {
		if strings.Contains(g, "ribkeeper/ribkeeper/") {
			keep = append(keep, g)
		}
	}
	return strings.Join(keep, "\n\n")
}

// cli runs a ribkeeper client command against this daemon.
func (d *daemon) cli(args ...string) (stdout, stderr string, code int) {
	cmd := exec.Command(binary, append([]string{args[0], "--socket", d.socket}, args[1:]...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	return o.String(), e.String(), code
}

// mustCLI runs a client command that must succeed and returns its stdout.
func (d *daemon) mustCLI(args ...string) string {
	d.t.Helper()
	out, errOut, code := d.cli(args...)
	if code != 0 {
		d.t.Fatalf("ribkeeper %s: exit %d: %s%s", strings.Join(args, " "), code, errOut, out)
	}
	return out
}

// addRule adds a rule through the CLI and returns its id.
func (d *daemon) addRule(args ...string) string {
	d.t.Helper()
	id := strings.TrimSpace(d.mustCLI(append([]string{"rule", "add"}, args...)...))
	if id == "" {
		d.t.Fatalf("rule add %v printed no id", args)
	}
	return id
}

// show returns a rule as the API's JSON object.
func (d *daemon) show(id string) map[string]any {
	d.t.Helper()
	var m map[string]any
	out := d.mustCLI("rule", "show", id, "--json")
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		d.t.Fatalf("rule show %s --json: %v: %s", id, err, out)
	}
	return m
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	waitEvery(t, 20*time.Millisecond, timeout, what, cond)
}

// waitEvery is waitFor asking cond once per every: a cond that costs
// the daemon or BIRD real work (a count of a million routes) is asked
// less often.
func waitEvery(t testing.TB, every, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for: %s", timeout, what)
		}
		<-tick.C
	}
}
