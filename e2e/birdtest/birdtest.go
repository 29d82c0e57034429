// Package birdtest runs a real BIRD 2 as the upstream router in tests.
//
// Each Router is its own bird process with a generated configuration, a
// control socket and a log in a temporary directory, peering over loopback
// addresses only. FlowSpec routes are read back through birdc, so a test
// checks what a real router received, not what ribkeeper believes it sent.
//
// When the bird binary is missing the test fails if the CI environment
// variable is set (CI must install bird2) and is skipped otherwise.
package birdtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/porttest"
)

// Peer is one BGP neighbor of the BIRD router.
type Peer struct {
	Address string // neighbor IP (loopback)
	Port    int
	ASN     uint32
}

// Options configures a Router.
type Options struct {
	RouterID string // default: Address
	Address  string // local address BIRD listens on, e.g. 127.0.0.2
	Port     int    // local BGP port; 0 picks a free one
	ASN      uint32
	Peers    []Peer
	// Password, when set, enables TCP MD5 on every session.
	Password string
	// GracefulRestart makes BIRD a graceful-restart helper for every
	// session (RFC 4724): "graceful restart on;". When the session drops
	// without a NOTIFICATION and the peer had advertised GR, BIRD keeps its
	// routes as stale for the peer's restart time and, once the session is
	// back, sweeps the stale routes the peer did not re-announce before its
	// End-of-RIB. Without it BIRD is only GR-aware and flushes the routes
	// the moment the session drops.
	GracefulRestart bool
}

// Router is a running BIRD.
type Router struct {
	Options
	Dir  string
	sock string
	cmd  *exec.Cmd
}

// Pid is the BIRD process's id.
func (r *Router) Pid() int { return r.cmd.Process.Pid }

// Binary returns the path of bird, or fails/skips the test when missing.
func Binary(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"bird", "birdc"} {
		if _, err := exec.LookPath(name); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s not found but CI is set: .ci/run must install Debian's bird2 package", name)
			}
			t.Skipf("%s not found (apt-get install bird2 to run this test)", name)
		}
	}
	p, _ := exec.LookPath("bird")
	return p
}

// FreePort returns a port reserved for t until it ends and free on every
// address (see package porttest): no other running test gets the same
// number, on any address.
func FreePort(t testing.TB, addr string) int {
	t.Helper()
	return porttest.Free(t, addr)
}

// Start writes the configuration and starts bird; it is stopped at cleanup.
func Start(t testing.TB, o Options) *Router {
	t.Helper()
	if o.RouterID == "" {
		o.RouterID = o.Address
	}
	if o.Port == 0 {
		o.Port = FreePort(t, o.Address)
	}
	dir := t.TempDir()
	r := &Router{Options: o, Dir: dir, sock: filepath.Join(dir, "bird.ctl")}
	conf := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(conf, []byte(r.config()), 0o644); err != nil {
		t.Fatal(err)
	}
	r.run(t, conf)
	return r
}

// StartConfig starts bird on the configuration file conf as it is (a
// shipped example): o says only what the test knows of it (Address for
// the log). Its control socket, PID file and log are in a temporary
// directory; it is stopped at cleanup.
func StartConfig(t testing.TB, conf string, o Options) *Router {
	t.Helper()
	dir := t.TempDir()
	r := &Router{Options: o, Dir: dir, sock: filepath.Join(dir, "bird.ctl")}
	r.run(t, conf)
	return r
}

// run starts bird on conf and waits for its control socket.
func (r *Router) run(t testing.TB, conf string) {
	t.Helper()
	bin := Binary(t)
	dir := r.Dir
	logf, err := os.Create(filepath.Join(dir, "bird.log"))
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(bin, "-f", "-c", conf, "-s", r.sock, "-P", filepath.Join(dir, "bird.pid"))
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start bird: %v", err)
	}
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		r.cmd.Wait()
		logf.Close()
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "bird.log")); err == nil {
				t.Logf("bird log (%s):\n%s", r.Address, tail(string(b), 40))
			}
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := r.Birdc("show", "status"); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("bird on %s did not open its control socket within 10s", r.Address)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *Router) config() string {
	var b strings.Builder
	fmt.Fprintf(&b, "log stderr all;\nrouter id %s;\nprotocol device {}\nflow4 table ft4;\nflow6 table ft6;\n", r.RouterID)
	// Date and milliseconds in "show protocols" (Since); date and
	// microseconds in the "[up0 time]" of each route (Ctl.RouteTime,
	// RouteTimeLayout): a benchmark compares route times a millisecond
	// apart.
	b.WriteString("timeformat protocol iso long ms;\ntimeformat route iso long us;\n")
	fmt.Fprintf(&b, "ipv4 table up4;\nipv6 table up6;\n")
	for i, p := range r.Peers {
		fmt.Fprintf(&b, "protocol bgp up%d {\n  local %s port %d as %d;\n  neighbor %s port %d as %d;\n",
			i, r.Address, r.Port, r.ASN, p.Address, p.Port, p.ASN)
		// Listen on its own address only: without it BIRD listens on the
		// wildcard address and takes its port on every loopback address,
		// and its own dial to a peer on that port lands on itself.
		b.WriteString("  strict bind yes;\n")
		// Loopback neighbors are not on a directly connected network.
		b.WriteString("  multihop;\n  connect retry time 1;\n  error wait time 1, 2;\n")
		if r.Password != "" {
			fmt.Fprintf(&b, "  password %q;\n", r.Password)
		}
		if r.GracefulRestart {
			b.WriteString("  graceful restart on;\n")
		}
		b.WriteString("  flow4 { table ft4; import all; export none; };\n")
		b.WriteString("  flow6 { table ft6; import all; export none; };\n")
		b.WriteString("  ipv4 { table up4; import all; export none; };\n")
		b.WriteString("  ipv6 { table up6; import all; export none; };\n")
		b.WriteString("}\n")
	}
	return b.String()
}

// Birdc runs one birdc command and returns its output.
func (r *Router) Birdc(args ...string) (string, error) {
	out, err := exec.Command("birdc", append([]string{"-s", r.sock}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("birdc %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Established reports whether the session with peer i is up.
func (r *Router) Established(i int) bool {
	out, err := r.Birdc("show", "protocols", fmt.Sprintf("up%d", i))
	return err == nil && strings.Contains(out, "Established")
}

// SameSince reports whether two Since readings name the same moment. BIRD
// keeps the time on its monotonic clock and converts it to wall time each
// time it prints it, so one moment reads a millisecond apart from call to
// call (seen: .539 then .540 then .539); a session that reset moves it by
// at least the reconnection, a second or more here.
func SameSince(a, b string) bool {
	const layout = "2006-01-02 15:04:05.000"
	ta, err1 := time.Parse(layout, a)
	tb, err2 := time.Parse(layout, b)
	if err1 != nil || err2 != nil {
		return a == b
	}
	d := ta.Sub(tb)
	return d > -50*time.Millisecond && d < 50*time.Millisecond
}

// Since returns the "since" column of "show protocols" for the session
// with peer i: BIRD updates it whenever the protocol changes state, so an
// unchanged value (SameSince) means the session was never reset in
// between.
func (r *Router) Since(i int) (string, error) {
	name := fmt.Sprintf("up%d", i)
	out, err := r.Birdc("show", "protocols", name)
	if err != nil {
		return "", err
	}
	// "up0  BGP  ---  up  2026-11-23 19:22:51.123  Established"
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 6 && f[0] == name {
			return f[4] + " " + f[5], nil
		}
	}
	return "", fmt.Errorf("birdc show protocols %s: no line for the protocol in %q", name, out)
}

// Route is one route as BIRD shows it.
type Route struct {
	// Net is BIRD's text of the network, e.g.
	// "flow4 { dst 203.0.113.7/32; proto 17; sport 53; }" or "203.0.113.7/32".
	Net string
	// Attrs maps attribute names (BGP.ext_community, BGP.community,
	// BGP.next_hop, BGP.as_path, ...) to their text.
	Attrs map[string]string
}

// Routes returns the routes of table (ft4, ft6, up4, up6) keyed by Net.
func (r *Router) Routes(table string) (map[string]Route, error) {
	out, err := r.Birdc("show", "route", "table", table, "all")
	if err != nil {
		return nil, err
	}
	routes := map[string]Route{}
	var cur *Route
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "BIRD ") || strings.HasPrefix(line, "Table ") || strings.TrimSpace(line) == "":
			continue
		case strings.HasPrefix(line, "\t") || strings.HasPrefix(line, " "):
			if cur == nil {
				continue
			}
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if ok {
				cur.Attrs[k] = strings.TrimSpace(v)
			}
		default:
			net := line
			if strings.HasPrefix(line, "flow") {
				if i := strings.Index(line, "}"); i > 0 {
					net = line[:i+1]
				}
			} else if i := strings.IndexAny(line, " \t"); i > 0 {
				net = line[:i]
			}
			routes[net] = Route{Net: net, Attrs: map[string]string{}}
			rt := routes[net]
			cur = &rt
		}
	}
	return routes, sc.Err()
}

// Count returns the number of routes in table, cheaply.
func (r *Router) Count(table string) (int, error) {
	out, err := r.Birdc("show", "route", "table", table, "count")
	if err != nil {
		return 0, err
	}
	// "N of N routes for N networks in table ft4"
	for _, line := range strings.Split(out, "\n") {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(line), "%d of", &n); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("birdc count: unexpected output %q", out)
}

// WaitRoutes polls table until cond holds or timeout passes, and returns
// the last routes seen.
func (r *Router) WaitRoutes(t testing.TB, table string, timeout time.Duration, what string, cond func(map[string]Route) bool) map[string]Route {
	t.Helper()
	// timeout is when to give up, never less than 30 s: BIRD on a loaded
	// machine is slow, not wrong.
	timeout = max(timeout, 30*time.Second)
	deadline := time.Now().Add(timeout)
	for {
		routes, err := r.Routes(table)
		if err == nil && cond(routes) {
			return routes
		}
		if time.Now().After(deadline) {
			t.Fatalf("BIRD table %s: %s not reached within %v; table holds %d routes: %v (err %v)", table, what, timeout, len(routes), keys(routes), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func keys(m map[string]Route) []string {
	var s []string
	for k := range m {
		s = append(s, k)
		if len(s) == 10 {
			s = append(s, "...")
			break
		}
	}
	return s
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ImportStats returns, for channel (flow4, flow6, ipv4, ipv6) of the
// session with peer i, how many route updates and withdrawals BIRD
// received from the peer ("Import updates"/"Import withdraws", column
// "received", of "show protocols all"). BIRD keeps counting across a
// graceful restart and starts again from zero on a new session.
func (r *Router) ImportStats(i int, channel string) (updates, withdraws int, err error) {
	out, err := r.Birdc("show", "protocols", "all", fmt.Sprintf("up%d", i))
	if err != nil {
		return 0, 0, err
	}
	in := false
	found := 0
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "Channel":
			in = f[1] == channel
		case in && len(f) >= 3 && f[0] == "Import" && f[1] == "updates:":
			_, err = fmt.Sscan(f[2], &updates)
			found++
		case in && len(f) >= 3 && f[0] == "Import" && f[1] == "withdraws:":
			_, err = fmt.Sscan(f[2], &withdraws)
			found++
		}
		if err != nil {
			return 0, 0, fmt.Errorf("show protocols all: %q: %w", l, err)
		}
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("show protocols all up%d: no import statistics for channel %s in %q", i, channel, out)
	}
	return updates, withdraws, nil
}

// Notifications returns the lines of BIRD's log that record a NOTIFICATION
// received from a peer ("<RMT> up0: Received: Administrative shutdown").
func (r *Router) Notifications() ([]string, error) {
	b, err := os.ReadFile(filepath.Join(r.Dir, "bird.log"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "<RMT>") && strings.Contains(l, "Received:") {
			out = append(out, l)
		}
	}
	return out, nil
}
