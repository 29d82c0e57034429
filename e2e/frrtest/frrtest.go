// Package frrtest runs FRR's bgpd as a FlowSpec receiver in tests.
//
// Each Router is its own bgpd process, standalone (--no_zebra: nothing is
// installed in the kernel, no zebra, no watchfrr), with a generated
// configuration, its own vty socket directory, pid file and log in a
// temporary directory, listening on one loopback address only. Routes are
// read back through vtysh, so a test checks FRR's own decoding of what it
// received ("show bgp ipv4 flowspec detail"), not what ribkeeper believes
// it sent.
//
// When bgpd or vtysh is missing the test fails if the CI environment
// variable is set (CI must install Debian's frr package) and is skipped
// otherwise. Debian's frr package runs no bgpd by default (bgpd=no in
// /etc/frr/daemons), and a system bgpd would use port 179 and the vty
// sockets in /var/run/frr: these routers use their own port and directory.
package frrtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/porttest"
)

// Peer is one BGP neighbor of the FRR router.
type Peer struct {
	Address string // neighbor IP (loopback)
	Port    int    // neighbor's BGP port, dialled unless Passive
	ASN     uint32
	Passive bool // wait for the neighbor to connect
}

// Options configures a Router.
type Options struct {
	RouterID string // default: Address
	Address  string // local address bgpd listens on, e.g. 127.0.0.3
	Port     int    // local BGP port; 0 picks a free one
	ASN      uint32
	Peers    []Peer
}

// Router is a running bgpd.
type Router struct {
	Options
	Dir    string
	vtysh  string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Binary returns the path of bgpd, or fails/skips the test when bgpd or
// vtysh is missing. Debian installs bgpd in /usr/lib/frr, outside PATH.
func Binary(t testing.TB) string {
	t.Helper()
	bgpd, err := exec.LookPath("bgpd")
	if err != nil {
		if _, err2 := os.Stat("/usr/lib/frr/bgpd"); err2 == nil {
			bgpd, err = "/usr/lib/frr/bgpd", nil
		}
	}
	_, errV := exec.LookPath("vtysh")
	if err != nil || errV != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("FRR's bgpd or vtysh not found but CI is set: .ci/run must install Debian's frr package")
		}
		t.Skipf("FRR's bgpd or vtysh not found (apt-get install frr to run this test)")
	}
	return bgpd
}

// Version returns bgpd's version line, e.g. "bgpd version 8.4.4".
func Version(t testing.TB) string {
	t.Helper()
	out, _ := exec.Command(Binary(t), "--version").CombinedOutput()
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

// freePort is a port reserved for t and free on every address (package
// porttest).
func freePort(t testing.TB, addr string) int {
	t.Helper()
	return porttest.Free(t, addr)
}

// Start writes the configuration and starts bgpd; it is stopped at cleanup.
func Start(t testing.TB, o Options) *Router {
	t.Helper()
	bin := Binary(t)
	vtysh, _ := exec.LookPath("vtysh")
	if o.RouterID == "" {
		o.RouterID = o.Address
	}
	if o.Port == 0 {
		o.Port = freePort(t, o.Address)
	}
	// The vty socket path must stay under the 108 bytes of a unix socket
	// address: t.TempDir() paths of long test names do not.
	dir, err := os.MkdirTemp("", "frrtest-")
	if err != nil {
		t.Fatal(err)
	}
	r := &Router{Options: o, Dir: dir, vtysh: vtysh, exited: make(chan struct{})}
	conf := filepath.Join(dir, "bgpd.conf")
	if err := os.WriteFile(conf, []byte(r.config()), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "bgpd.out"))
	if err != nil {
		t.Fatal(err)
	}
	// -S: no user switch or capability checks (works as root and as an
	// unprivileged user); -Z: no zebra; -l/-p: loopback address and test
	// port only; -P 0: no TCP vty, only the socket in dir.
	r.cmd = exec.Command(bin, "-S", "-Z", "-f", conf, "-i", filepath.Join(dir, "bgpd.pid"),
		"--vty_socket", dir, "-l", o.Address, "-p", fmt.Sprint(o.Port), "-P", "0",
		"--log", "file:"+filepath.Join(dir, "bgpd.log"))
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start bgpd: %v", err)
	}
	go func() { r.cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		<-r.exited
		logf.Close()
		if t.Failed() {
			for _, name := range []string{"bgpd.out", "bgpd.log"} {
				if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil && len(b) > 0 {
					t.Logf("FRR %s (%s):\n%s", name, o.Address, tail(string(b), 40))
				}
			}
		}
		os.RemoveAll(dir)
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := r.Vtysh("show bgp summary"); err == nil {
			return r
		}
		select {
		case <-r.exited:
			b, _ := os.ReadFile(filepath.Join(dir, "bgpd.out"))
			t.Fatalf("bgpd on %s exited at start: %s", o.Address, b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("bgpd on %s did not answer vtysh within 15s", o.Address)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *Router) config() string {
	var b strings.Builder
	fmt.Fprintf(&b, "frr defaults traditional\nhostname frrtest\n!\nrouter bgp %d\n bgp router-id %s\n", r.ASN, r.RouterID)
	// No policy needed to accept eBGP routes; unicast routes are shown
	// even though no IGP resolves their next hops.
	b.WriteString(" no bgp ebgp-requires-policy\n no bgp default ipv4-unicast\n no bgp network import-check\n")
	for _, p := range r.Peers {
		fmt.Fprintf(&b, " neighbor %s remote-as %d\n", p.Address, p.ASN)
		fmt.Fprintf(&b, " neighbor %s port %d\n", p.Address, p.Port)
		fmt.Fprintf(&b, " neighbor %s update-source %s\n", p.Address, r.Address)
		// Loopback neighbors are not on a directly connected network.
		fmt.Fprintf(&b, " neighbor %s ebgp-multihop 2\n", p.Address)
		fmt.Fprintf(&b, " neighbor %s timers connect 1\n", p.Address)
		if p.Passive {
			fmt.Fprintf(&b, " neighbor %s passive\n", p.Address)
		}
	}
	for _, af := range []string{"ipv4 flowspec", "ipv6 flowspec", "ipv4 unicast", "ipv6 unicast"} {
		fmt.Fprintf(&b, " address-family %s\n", af)
		for _, p := range r.Peers {
			fmt.Fprintf(&b, "  neighbor %s activate\n", p.Address)
		}
		b.WriteString(" exit-address-family\n")
	}
	b.WriteString("!\n")
	return b.String()
}

// Vtysh runs one vtysh command against this bgpd and returns its standard
// output. (Run unprivileged, vtysh warns on stderr that it cannot read
// /etc/frr/vtysh.conf; that must not reach the JSON readers.)
func (r *Router) Vtysh(command string) (string, error) {
	var stderr strings.Builder
	cmd := exec.Command(r.vtysh, "--vty_socket", r.Dir, "-d", "bgpd", "-c", command)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("vtysh -c %q: %v: %s%s", command, err, stderr.String(), out)
	}
	return string(out), nil
}

// Session is FRR's view of one neighbor.
type Session struct {
	State string // "Established", "Active", "Connect", ...
	// Established counts the times the session came up; it grows by one
	// at every reset and re-establishment.
	Established int
	Dropped     int
	// LastReset is FRR's reason for the last reset, e.g. "BGP
	// Notification send" with LastError "UPDATE Message Error/Optional
	// Attribute Error".
	LastReset, LastError string
}

// Neighbor returns the session with the neighbor at addr.
func (r *Router) Neighbor(addr string) (Session, error) {
	out, err := r.Vtysh("show bgp neighbors " + addr + " json")
	if err != nil {
		return Session{}, err
	}
	var m map[string]struct {
		BgpState               string `json:"bgpState"`
		ConnectionsEstablished int    `json:"connectionsEstablished"`
		ConnectionsDropped     int    `json:"connectionsDropped"`
		LastResetDueTo         string `json:"lastResetDueTo"`
		LastNotificationReason string `json:"lastNotificationReason"`
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		return Session{}, fmt.Errorf("show bgp neighbors %s json: %v: %s", addr, err, out)
	}
	n, ok := m[addr]
	if !ok {
		return Session{}, fmt.Errorf("FRR has no neighbor %s: %s", addr, out)
	}
	return Session{State: n.BgpState, Established: n.ConnectionsEstablished, Dropped: n.ConnectionsDropped,
		LastReset: n.LastResetDueTo, LastError: n.LastNotificationReason}, nil
}

// Established reports whether the session with addr is up.
func (r *Router) Established(addr string) bool {
	s, err := r.Neighbor(addr)
	return err == nil && s.State == "Established"
}

// Flow is one FlowSpec route as "show bgp ... flowspec detail" prints it.
type Flow struct {
	// Match holds FRR's lines for the components, in its order and
	// trimmed, e.g. "Destination Address 10.0.0.0/24",
	// "Destination Port >= 1024 , <= 2048 , = 80".
	Match []string
	// Actions is FRR's line of extended communities, e.g.
	// "FS:rate 0.000000" or "FS:redirect VRF RT:65000:100 FS:marking 10".
	Actions string
}

// Key is the first match line (the destination, or the first component).
func (f Flow) Key() string {
	if len(f.Match) == 0 {
		return ""
	}
	return f.Match[0]
}

// Flows returns the FlowSpec routes of afi ("ipv4" or "ipv6"), read from
// the text of "show bgp AFI flowspec detail": FRR 8.4's JSON forms of the
// FlowSpec table carry the components but not the actions ("show bgp ...
// flowspec json"), or the actions as separate array elements that follow
// their route's element in a flat list ("... detail json").
func (r *Router) Flows(afi string) ([]Flow, error) {
	out, err := r.Vtysh("show bgp " + afi + " flowspec detail")
	if err != nil {
		return nil, err
	}
	return parseFlows(out), nil
}

// matchPrefixes are the component labels FRR 8.4 prints
// (bgpd/bgp_flowspec_util.c).
var matchPrefixes = []string{"Destination Address", "Source Address", "IP Protocol", "Port", "Destination Port",
	"Source Port", "ICMP Type", "ICMP Code", "TCP Flags", "Packet Length", "DSCP field", "Packet Fragment", "Packet Flow Label"}

func parseFlows(out string) []Flow {
	var flows []Flow
	var cur *Flow
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "BGP flowspec entry:"):
			flows = append(flows, Flow{})
			cur = &flows[len(flows)-1]
		case cur == nil || line == "":
		case strings.HasPrefix(line, "received for") || strings.HasPrefix(line, "not installed") ||
			strings.HasPrefix(line, "installed in PBR") || strings.HasPrefix(line, "Displayed "):
		case isMatchLine(line):
			cur.Match = append(cur.Match, line)
		default:
			if cur.Actions != "" {
				cur.Actions += " "
			}
			cur.Actions += line
		}
	}
	return flows
}

func isMatchLine(line string) bool {
	for _, p := range matchPrefixes {
		if strings.HasPrefix(line, p+" ") {
			return true
		}
	}
	return false
}

// Unicast is one unicast route as FRR shows it.
type Unicast struct {
	Prefix      string
	Communities string   // FRR's community string, e.g. "blackhole no-export"
	NextHops    []string // next-hop addresses
}

// UnicastRoutes returns the unicast routes of afi ("ipv4" or "ipv6"),
// keyed by prefix.
func (r *Router) UnicastRoutes(afi string) (map[string]Unicast, error) {
	out, err := r.Vtysh("show bgp " + afi + " unicast json")
	if err != nil {
		return nil, err
	}
	var table struct {
		Routes map[string]json.RawMessage `json:"routes"`
	}
	if err := json.Unmarshal([]byte(out), &table); err != nil {
		return nil, fmt.Errorf("show bgp %s unicast json: %v", afi, err)
	}
	routes := map[string]Unicast{}
	for prefix := range table.Routes {
		out, err := r.Vtysh("show bgp " + afi + " unicast " + prefix + " json")
		if err != nil {
			return nil, err
		}
		var d struct {
			Paths []struct {
				Community struct {
					String string `json:"string"`
				} `json:"community"`
				NextHops []struct {
					IP string `json:"ip"`
				} `json:"nexthops"`
			} `json:"paths"`
		}
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			return nil, fmt.Errorf("show bgp %s unicast %s json: %v", afi, prefix, err)
		}
		u := Unicast{Prefix: prefix}
		if len(d.Paths) > 0 {
			u.Communities = d.Paths[0].Community.String
			for _, nh := range d.Paths[0].NextHops {
				u.NextHops = append(u.NextHops, nh.IP)
			}
		}
		routes[prefix] = u
	}
	return routes, nil
}

// WaitFlows polls afi's FlowSpec table until cond holds or timeout passes
// and returns the last flows seen.
func (r *Router) WaitFlows(t testing.TB, afi string, timeout time.Duration, what string, cond func([]Flow) bool) []Flow {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		flows, err := r.Flows(afi)
		if err == nil && cond(flows) {
			return flows
		}
		if time.Now().After(deadline) {
			t.Fatalf("FRR %s flowspec: %s not reached within %v; it holds %d flows (err %v)", afi, what, timeout, len(flows), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// LogTail returns the last n lines of bgpd's log.
func (r *Router) LogTail(n int) string {
	b, err := os.ReadFile(filepath.Join(r.Dir, "bgpd.log"))
	if err != nil {
		return err.Error()
	}
	return tail(string(b), n)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
