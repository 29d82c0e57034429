package e2e

import (
	"bufio"
	be "encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// FastNetMon with gobgp = on, unchanged, against ribkeeper's GoBGP v3
// listener. Debian's fastnetmon (1.2.4) bans a host it sees attacked in
// NetFlow v5 datagrams the test sends, and tells "GoBGP" through
// /apipb.GobgpApi/AddPath on localhost:50051; the unban is the same call
// with is_withdraw.
//
// The harness is first proved against Debian's gobgpd 3.10 (the control):
// the ban reaches a BIRD peer of gobgpd and the unban withdraws it. Only
// then is ribkeeper put in gobgpd's place, so that a failure there is
// ribkeeper's, not the harness's.
func TestFastNetMonGoBGP(t *testing.T) {
	bins := fnmBinaries(t)
	if !t.Run("gobgpd control", func(t *testing.T) {
		g := startGoBGPd(t, bins)
		f := startFastNetMon(t, bins, g.api)
		stop := f.attack(t)
		route := g.bird.WaitRoutes(t, "up4", 60*time.Second, "FastNetMon's ban of "+fnmTarget+" at gobgpd's BIRD peer", hasRoute(fnmTarget+"/32"))
		stop()
		if c := route[fnmTarget+"/32"].Attrs["BGP.community"]; !strings.Contains(c, "(65535,666)") {
			t.Errorf("BIRD got %s with communities %q, want FastNetMon's gobgp_community_host (65535,666)", fnmTarget, c)
		}
		g.bird.WaitRoutes(t, "up4", 60*time.Second, "FastNetMon's unban withdrawing "+fnmTarget, noRoute(fnmTarget+"/32"))
		f.waitLog(t, "withdraw "+fnmTarget+"/32 to GoBGP")
	}) {
		t.Fatal("the harness does not work with gobgpd: FastNetMon, its configuration or the NetFlow datagrams are at fault, not ribkeeper")
	}

	t.Run("ribkeeper", func(t *testing.T) {
		listen := fnmAPIAddr(t)
		a := startAppliance(t, birdtest.Options{}, "", fmt.Sprintf(fnmPlaybook, listen), true)
		f := startFastNetMon(t, bins, listen)
		stop := f.attack(t)
		flow := "flow4 { dst " + fnmTarget + "/32; }"
		a.bird.WaitRoutes(t, "ft4", 60*time.Second, "FastNetMon's ban as a discard rule at BIRD", has(flow, discardExt))
		stop()
		banned := a.waitLog(t, "signal accepted: source=fnm op=AddPath target="+fnmTarget+"/32 state=start")
		for _, w := range []string{"origin igp", "next-hop " + fnmNextHop, "communities 65535:666"} {
			if !strings.Contains(banned, w) {
				t.Errorf("the ban's signal lacks %q: %s", w, banned)
			}
		}
		var list struct {
			Rules []struct {
				ID     int64  `json:"id"`
				Actor  string `json:"actor"`
				Text   string `json:"text"`
				Reason string `json:"reason"`
			} `json:"rules"`
		}
		if err := json.Unmarshal([]byte(a.mustCLI("rule", "list", "--state", "active", "--json")), &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Rules) != 1 || list.Rules[0].Actor != "fnm" || !strings.Contains(list.Rules[0].Text, fnmTarget+"/32") || !strings.Contains(list.Rules[0].Reason, "fnm-ban") {
			t.Fatalf("active rules after the ban: %+v, want one discard of %s by source fnm, playbook fnm-ban", list.Rules, fnmTarget)
		}
		a.waitLog(t, "signal accepted: source=fnm op=AddPath target="+fnmTarget+"/32 state=end")
		// Both are in the ring of recent signals, by way of gobgp.
		for _, st := range []string{"start", "end"} {
			a.waitSignal(t, "the "+st+" signal in `ribkeeper signals`", func(s api.Signal) bool {
				return s.Via == "gobgp" && s.Source == "fnm" && s.Target == fnmTarget+"/32" && s.State == st && s.Accepted &&
					strings.Contains(s.Detail, "65535:666")
			})
		}
		a.bird.WaitRoutes(t, "ft4", 60*time.Second, "FastNetMon's unban withdrawing the rule at BIRD", lacks(flow))
		id := strconv.FormatInt(list.Rules[0].ID, 10)
		waitFor(t, 30*time.Second, "the rule withdrawn in ribkeeper", func() bool { return a.show(id)["state"] == "withdrawn" })
		f.waitLog(t, "withdraw "+fnmTarget+"/32 to GoBGP")
	})
}

// fnmPlaybook is ribkeeper's configuration for FastNetMon (the address
// of the listener to fill in): its ban becomes a discard rule for the
// attacked host, its unban ends it (after a hold-down of a second).
const fnmPlaybook = `
[[source]]
name = "fnm"
kind = "gobgp"
listen = [%q]
prefixes = ["` + fnmNetwork + `"]

[[playbook]]
name = "fnm-ban"
sources = ["fnm"]
quiet_after = "never"
hold_down = "1s"

[[playbook.step]]
rules = ["match destination {target} then discard"]
ttl = "10m"
`

// The attacked host, inside the network FastNetMon watches, and what it
// is told to announce for it.
const (
	fnmTarget  = "198.51.100.10"
	fnmNetwork = "198.51.100.0/24"
	fnmNextHop = "192.0.2.254"
)

type fnmBins struct{ fastnetmon, gobgpd, unshare string }

// fnmBinaries finds Debian's fastnetmon and gobgpd and util-linux's
// unshare, or fails (CI) or skips.
func fnmBinaries(t testing.TB) fnmBins {
	t.Helper()
	birdtest.Binary(t)
	find := func(name, pkg string) string {
		for _, p := range []string{name, "/usr/sbin/" + name, "/usr/bin/" + name} {
			if path, err := exec.LookPath(p); err == nil {
				return path
			}
		}
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not found but CI is set: .ci/run must install Debian's %s package", name, pkg)
		}
		t.Skipf("%s not found (apt-get install %s to run this test)", name, pkg)
		return ""
	}
	b := fnmBins{fastnetmon: find("fastnetmon", "fastnetmon"), gobgpd: find("gobgpd", "gobgpd"), unshare: find("unshare", "util-linux")}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("not root but CI is set: FastNetMon dials localhost:50051, which this test points at its own loopback address with a private mount namespace (unshare -m), which needs root")
		}
		t.Skip("needs root: FastNetMon dials localhost:50051, which this test maps to its own loopback address in a private mount namespace")
	}
	if out, err := exec.Command(b.unshare, "-m", "--propagation", "private", "--", "mount", "-t", "tmpfs", "tmpfs", "/mnt").CombinedOutput(); err != nil {
		msg := fmt.Sprintf("cannot mount in a private mount namespace (%v: %s): FastNetMon dials localhost:50051, which this test maps to its own loopback address with a bind-mounted /etc/hosts; run the tests with CAP_SYS_ADMIN (e.g. docker run --cap-add SYS_ADMIN)", err, strings.TrimSpace(string(out)))
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return b
}

// fnmAPIAddr returns host:50051 on a loopback address of the test's own
// where port 50051 is free: FastNetMon always dials port 50051 of
// localhost, which the test maps to that address.
func fnmAPIAddr(t testing.TB) string {
	t.Helper()
	for range 100 {
		ip := netip.AddrFrom4([4]byte{127, byte(1 + rand.IntN(250)), byte(rand.IntN(256)), byte(1 + rand.IntN(250))})
		addr := net.JoinHostPort(ip.String(), "50051")
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr
		}
	}
	t.Fatal("no loopback address with port 50051 free")
	return ""
}

// gobgpdPeer is Debian's gobgpd with a BIRD peer.
type gobgpdPeer struct {
	api  string // its gRPC API, host:50051
	bird *birdtest.Router
}

// startGoBGPd starts gobgpd with its API on a loopback address of its own
// and an eBGP session (ipv4-unicast) to a BIRD, and waits for the session.
func startGoBGPd(t testing.TB, bins fnmBins) *gobgpdPeer {
	t.Helper()
	api := fnmAPIAddr(t)
	host, _, _ := net.SplitHostPort(api)
	dir := t.TempDir()
	bird := birdtest.Start(t, birdtest.Options{Address: "127.0.0.2", ASN: 65001,
		Peers: []birdtest.Peer{{Address: host, Port: birdtest.FreePort(t, host), ASN: 65000}}})
	conf := fmt.Sprintf(`[global.config]
  as = 65000
  router-id = %q
  port = -1
[[neighbors]]
  [neighbors.config]
    neighbor-address = "127.0.0.2"
    peer-as = 65001
  [neighbors.transport.config]
    local-address = %q
    remote-port = %d
  [neighbors.ebgp-multihop.config]
    enabled = true
    multihop-ttl = 2
  [neighbors.timers.config]
    connect-retry = 1
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv4-unicast"
`, host, host, bird.Port)
	confPath := filepath.Join(dir, "gobgpd.toml")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "gobgpd.log")
	startLogged(t, logPath, bins.gobgpd, "-f", confPath, "-p", "--api-hosts", api, "--pprof-disable")
	waitFor(t, 60*time.Second, "gobgpd's session with BIRD established", func() bool { return bird.Established(0) })
	return &gobgpdPeer{api: api, bird: bird}
}

// startLogged starts a command with stdout and stderr to logPath; it is
// stopped (SIGTERM, then SIGKILL after 10 s) at cleanup, and its log shown
// if the test failed.
func startLogged(t testing.TB, logPath, name string, args ...string) *exec.Cmd {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "GRPC_DNS_RESOLVER=native")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s log (%s):\n%s", filepath.Base(name), logPath, tailLines(string(b), 40))
		}
	})
	return cmd
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// fastNetMon is one fastnetmon process.
type fastNetMon struct {
	dir, logPath string
	collector    string // its NetFlow collector, host:port (UDP)
}

// startFastNetMon starts FastNetMon with gobgp = on, its NetFlow collector
// on a free loopback UDP port, config, pid, stats and log in the test's
// directory, and localhost mapped to api's address: it runs in a private
// mount namespace with its own /etc/hosts (and /dev/shm, where its MongoDB
// client library leaves a file). It waits for the collector to listen.
func startFastNetMon(t testing.TB, bins fnmBins, api string) *fastNetMon {
	t.Helper()
	dir := t.TempDir()
	host, _, _ := net.SplitHostPort(api)
	f := &fastNetMon{dir: dir, logPath: filepath.Join(dir, "fastnetmon.log"), collector: freeUDP(t, "127.0.0.1")}
	cHost, cPort, _ := net.SplitHostPort(f.collector)
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hosts := write("hosts", host+" localhost\n")
	conf := write("fastnetmon.conf", fmt.Sprintf(`logging_level = info
netflow = on
netflow_host = %s
netflow_port = %s
networks_list_path = %s
white_list_path = %s
process_incoming_traffic = on
process_outgoing_traffic = off
enable_ban = on
enable_ban_ipv6 = off
ban_for_pps = on
threshold_pps = 5000
ban_for_bandwidth = off
ban_for_flows = off
average_calculation_time = 1
speed_calculation_delay = 1
ban_time = 5
unban_only_if_attack_finished = on
gobgp = on
gobgp_announce_host = on
gobgp_announce_whole_subnet = off
gobgp_next_hop = %s
gobgp_community_host = 65535:666
enable_api = off
prometheus = off
disable_usage_report = on
notify_script_enabled = off
pid_path = %s
cli_stats_file_path = %s
cli_stats_ipv6_file_path = %s
notify_script_path = %s
`, cHost, cPort, write("networks", fnmNetwork+"\n"), write("whitelist", ""), fnmNextHop,
		filepath.Join(dir, "fastnetmon.pid"), filepath.Join(dir, "stats.dat"), filepath.Join(dir, "stats6.dat"), filepath.Join(dir, "notify.sh")))
	script := `mount --bind "$1" /etc/hosts && mount -t tmpfs -o size=16m tmpfs /dev/shm && exec "$2" --configuration_file "$3" --log_file "$4"`
	startLogged(t, filepath.Join(dir, "stdout.log"), bins.unshare, "-m", "--propagation", "private", "--", "sh", "-c", script, "sh", hosts, bins.fastnetmon, conf, f.logPath)
	f.waitLog(t, "netflow plugin will listen on "+f.collector)
	return f
}

func freeUDP(t testing.TB, host string) string {
	t.Helper()
	for range 50 {
		addr := net.JoinHostPort(host, strconv.Itoa(20000+rand.IntN(12768)))
		if c, err := net.ListenPacket("udp", addr); err == nil {
			c.Close()
			return addr
		}
	}
	t.Fatal("no free UDP port on " + host)
	return ""
}

func (f *fastNetMon) log() string {
	b, _ := os.ReadFile(f.logPath)
	return string(b)
}

// waitLog waits for a line of FastNetMon's log containing s and returns it.
func (f *fastNetMon) waitLog(t testing.TB, s string) string {
	t.Helper()
	var line string
	waitFor(t, 60*time.Second, "FastNetMon's log line "+strconv.Quote(s), func() bool {
		line = findLine(f.log(), s)
		return line != ""
	})
	return line
}

func findLine(text, s string) string {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			return sc.Text()
		}
	}
	return ""
}

// waitLog waits for a line of ribkeeper's log containing s and returns it.
func (d *daemon) waitLog(t testing.TB, s string) string {
	t.Helper()
	var line string
	waitFor(t, 60*time.Second, "ribkeeper's log line "+strconv.Quote(s), func() bool {
		b, _ := os.ReadFile(filepath.Join(d.dir, "ribkeeper.log"))
		line = findLine(string(b), s)
		return line != ""
	})
	return line
}

// attack sends the attack to FastNetMon's collector until the returned
// stop is called: NetFlow v5 datagrams of 10 flows of 200 UDP packets each
// to fnmTarget, 10 a second (about 20,000 packets/s, four times its
// threshold_pps). It returns once the first datagram is sent.
func (f *fastNetMon) attack(t testing.TB) (stop func()) {
	t.Helper()
	stop, _ = f.attackFrom(t)
	return stop
}

// attackFrom is attack, also returning when the first datagram left.
func (f *fastNetMon) attackFrom(t testing.TB) (stop func(), first time.Time) {
	t.Helper()
	c, err := net.Dial("udp", f.collector)
	if err != nil {
		t.Fatal(err)
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	boot := time.Now().Add(-time.Minute) // the exporter's uptime starts a minute earlier
	var seq uint32
	send := func() {
		c.Write(netflowV5(netip.MustParseAddr(fnmTarget), boot, seq))
		seq += 10
	}
	first = time.Now()
	send()
	go func() {
		defer close(stopped)
		defer c.Close()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				send()
			}
		}
	}()
	var once bool
	stop = func() {
		if !once {
			once = true
			close(done)
			<-stopped
		}
	}
	t.Cleanup(stop)
	return stop, first
}

// netflowV5 is one NetFlow v5 datagram: 10 flows, each of 200 UDP packets
// of 100 bytes from 192.0.2.1-10 to dst port 53, ending now.
func netflowV5(dst netip.Addr, boot time.Time, seq uint32) []byte {
	const flows = 10
	now := time.Now()
	up := uint32(now.Sub(boot).Milliseconds())
	b := make([]byte, 24+flows*48)
	be.BigEndian.PutUint16(b[0:], 5) // version
	be.BigEndian.PutUint16(b[2:], flows)
	be.BigEndian.PutUint32(b[4:], up)
	be.BigEndian.PutUint32(b[8:], uint32(now.Unix()))
	be.BigEndian.PutUint32(b[12:], uint32(now.Nanosecond()))
	be.BigEndian.PutUint32(b[16:], seq)
	d := dst.As4()
	for i := range flows {
		r := b[24+i*48:]
		copy(r[0:], []byte{192, 0, 2, byte(i + 1)}) // srcaddr
		copy(r[4:], d[:])                           // dstaddr
		be.BigEndian.PutUint32(r[16:], 200)         // dPkts
		be.BigEndian.PutUint32(r[20:], 200*100)     // dOctets
		be.BigEndian.PutUint32(r[24:], up)          // First
		be.BigEndian.PutUint32(r[28:], up)          // Last
		be.BigEndian.PutUint16(r[32:], uint16(1024+i))
		be.BigEndian.PutUint16(r[34:], 53)
		r[38] = 17 // UDP
	}
	return b
}
