package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"github.com/ribkeeper/ribkeeper/e2e/rawbgp"
)

// Addresses of the flood tests: the daemon, a router that floods it with
// unicast routes, and a bystander that only takes FlowSpec rules.
const (
	floodRK        = "127.0.21.1"
	floodRouter    = "127.0.21.2"
	floodBystander = "127.0.21.3"
	floodRouterASN = 65021
	floodRoutes    = 300000
	// floodRSSBound is the documented bound (README, "Received routes")
	// on how much a router flooding floodRoutes routes may grow the
	// daemon's resident memory.
	floodRSSBound = 64 << 20
)

var ipv4Unicast = rawbgp.Family{AFI: 1, SAFI: 1}

// A configured router that sends 300,000 unicast routes costs at most
// 64 MB of resident memory with the default max_prefixes: its session is
// closed with Cease / Maximum Number of Prefixes Reached (6/1) once it
// passes the limit and stays down (no flapping), the bystander's session
// and rules are untouched, `peers` says why and what to do, and a reload
// brings the session back. Without a limit GoBGP keeps every route in the
// peer's Adj-RIB-In (bgp/maxprefix.go); that grew RSS by 348 MB.
func TestFloodBoundedMemory(t *testing.T) {
	d, port := startFlood(t, "")
	pid := d.cmd.Process.Pid
	remote := netip.AddrPortFrom(netip.MustParseAddr(floodRK), uint16(port))
	deadline := time.Now().Add(60 * time.Second)

	// The bystander gets a rule, which must stay with it throughout.
	by, err := rawSession(context.Background(), netip.MustParseAddr(floodBystander), remote, "",
		rawbgp.Open{ASN: 65022, HoldTime: 240, RouterID: netip.MustParseAddr(floodBystander), Families: []rawbgp.Family{rawbgp.IPv4FlowSpec}}, deadline)
	if err != nil {
		t.Fatal(err)
	}
	defer by.Close()
	d.addRule("--ttl", "1h", "match destination 198.51.100.0/24 protocol udp then discard")
	if n, err := readTable(by, map[rawbgp.Family]int{rawbgp.IPv4FlowSpec: 1}, deadline); n != nil || err != nil {
		t.Fatalf("bystander did not get the rule: notification %v, error %v", n, err)
	}

	fl, err := rawSession(context.Background(), netip.MustParseAddr(floodRouter), remote, "",
		rawbgp.Open{ASN: floodRouterASN, HoldTime: 240, RouterID: netip.MustParseAddr(floodRouter), Families: []rawbgp.Family{ipv4Unicast}}, deadline)
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	waitFor(t, 30*time.Second, "both sessions established in peers", func() bool {
		return peerJSON(t, d, floodRouter)["state"] == "established" && peerJSON(t, d, floodBystander)["state"] == "established"
	})
	if m, _ := peerJSON(t, d, floodRouter)["max_prefixes"].(float64); m != 10000 {
		t.Errorf("peers: max_prefixes of the router %v, want the default 10000", m)
	}
	before := procStatus(t, pid, "VmRSS")

	sent := make(chan int, 1)
	go func() { sent <- flood(fl, floodRoutes) }()
	notif, err := readNotification(fl, time.Now().Add(90*time.Second))
	if err != nil {
		t.Fatalf("no NOTIFICATION while flooding %d routes (the daemon holds them all?): %v", floodRoutes, err)
	}
	if notif.Code != 6 || notif.Subcode != 1 {
		t.Fatalf("the flooding router got %v, want Cease / Maximum Number of Prefixes Reached (6/1)", notif)
	}
	n := <-sent
	growth := procStatus(t, pid, "VmHWM") - before
	t.Logf("router wrote %d routes to its socket before the session closed; RSS %d MB before, peak growth %.1f MB", n, before>>20, float64(growth)/(1<<20))
	if growth > floodRSSBound {
		t.Errorf("resident memory grew by %.1f MB at its peak (bound %d MB)", float64(growth)/(1<<20), floodRSSBound>>20)
	}

	waitFor(t, 30*time.Second, "peers shows the router closed at its prefix limit", func() bool {
		return peerJSON(t, d, floodRouter)["prefix_limited"] == true
	})
	p := peerJSON(t, d, floodRouter)
	if p["state"] == "established" || !strings.Contains(fmt.Sprint(p["last_error"]), "maximum number of prefixes reached") ||
		!strings.Contains(fmt.Sprint(p["hint"]), "max_prefixes") {
		t.Errorf("peers: the router closed at its limit shows %v", p)
	}
	if out := d.mustCLI("peers"); !strings.Contains(out, "maximum number of prefixes reached") || !strings.Contains(out, "0/10000") {
		t.Errorf("ribkeeper peers does not show the limit and why the session is down:\n%s", out)
	}
	b := peerJSON(t, d, floodBystander)
	if b["state"] != "established" || b["flaps"] != float64(0) || b["sent"] != float64(1) {
		t.Errorf("the bystander was touched: %v", b)
	}
	// No flapping: the router's next attempts are refused until the
	// operator acts.
	if c, err := rawbgp.Dial(context.Background(), netip.MustParseAddr(floodRouter), remote, ""); err == nil {
		err := c.Handshake(rawbgp.Open{ASN: floodRouterASN, HoldTime: 240, RouterID: netip.MustParseAddr(floodRouter), Families: []rawbgp.Family{ipv4Unicast}},
			time.Now().Add(30*time.Second))
		c.Close()
		if err == nil {
			t.Errorf("a session closed at its prefix limit came up again by itself")
		}
	}

	// A reload is the operator's word that the router was fixed.
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	again, err := rawSession(context.Background(), netip.MustParseAddr(floodRouter), remote, "",
		rawbgp.Open{ASN: floodRouterASN, HoldTime: 240, RouterID: netip.MustParseAddr(floodRouter), Families: []rawbgp.Family{ipv4Unicast}}, time.Now().Add(60*time.Second))
	if err != nil {
		t.Fatalf("after a reload the router's session did not come up again: %v", err)
	}
	defer again.Close()
	waitFor(t, 30*time.Second, "peers shows the router established and no longer limited", func() bool {
		p := peerJSON(t, d, floodRouter)
		return p["state"] == "established" && p["prefix_limited"] == nil
	})
}

// startFlood starts a daemon with the flooding router and the bystander
// as passive neighbors; extra is added to the router's [[neighbor]].
func startFlood(t *testing.T, extra string) (*daemon, int) {
	t.Helper()
	dir := t.TempDir()
	port := birdtest.FreePort(t, floodRK)
	d := &daemon{t: t, dir: dir, conf: filepath.Join(dir, "ribkeeper.toml"), socket: filepath.Join(dir, "rk.sock")}
	conf := fmt.Sprintf(`site = "flood"
[log]
level = "info"
[bgp]
asn = 65000
router_id = %q
listen_addresses = [%q]
listen_port = %d
[[neighbor]]
address = %q
asn = %d
passive = true
hold_time = "240s"
families = ["ipv4-unicast"]
%s
[[neighbor]]
address = %q
asn = 65022
passive = true
hold_time = "240s"
families = ["ipv4-flowspec"]
[store]
path = %q
[api]
socket = %q
`, floodRK, floodRK, port, floodRouter, floodRouterASN, extra, floodBystander, filepath.Join(dir, "rk.db"), d.socket)
	if err := os.WriteFile(d.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	d.start()
	return d, port
}

// flood announces n distinct /32s in UPDATEs of up to 4096 bytes and
// returns how many it sent before a write failed.
func flood(c *rawbgp.Conn, n int) int {
	nh := netip.MustParseAddr(floodRouter).As4()
	attrs := cat(
		rawbgp.Attr(rawbgp.FlagTransitive, 1, []byte{0}),
		rawbgp.Attr(rawbgp.FlagTransitive, rawbgp.AttrASPath, rawbgp.ASPath4(floodRouterASN)),
		rawbgp.Attr(rawbgp.FlagTransitive, 3, nh[:]),
	)
	perMsg := (4096 - 19 - 4 - len(attrs)) / 5
	sent := 0
	for sent < n {
		k := min(perMsg, n-sent)
		nlri := make([]byte, 0, 5*k)
		for i := sent; i < sent+k; i++ {
			nlri = append(nlri, 32, 10, byte(i>>16), byte(i>>8), byte(i))
		}
		if err := c.Send(rawbgp.MsgUpdate, rawbgp.Update(nil, attrs, nlri)); err != nil {
			return sent
		}
		sent += k
	}
	return sent
}

// readNotification reads until a NOTIFICATION arrives.
func readNotification(c *rawbgp.Conn, deadline time.Time) (rawbgp.Notification, error) {
	for {
		m, err := c.Read(deadline)
		if err != nil {
			return rawbgp.Notification{}, err
		}
		if m.Type == rawbgp.MsgNotification {
			return rawbgp.ParseNotification(m.Body)
		}
	}
}

// procStatus returns a "kB" field of /proc/PID/status in bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			t.Fatalf("%s in /proc/%d/status: %v", field, pid, err)
		}
		return kb << 10
	}
	t.Fatal(errors.Join(sc.Err(), fmt.Errorf("no %s in /proc/%d/status", field, pid)))
	return 0
}
