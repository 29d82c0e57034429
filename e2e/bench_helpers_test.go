package e2e

// Helpers shared by the benchmarks: rule generation, RSS readings, a
// ribkeeper process started without the harness's `rule list` polling (it
// would list 100,000 rules per poll), and a raw GoBGP v3.37.0 process (this
// test binary re-executed as TestHelperRawGoBGP) that is the baseline.
//
// The raw baseline is the only GoBGP contact outside bgp/: it must be GoBGP
// itself, not ribkeeper's wrapper of it.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/cli"

	gobgpapi "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Loopback addresses of the benchmarks, away from the e2e tests' .1/.2 so
// that both can run at once.
const (
	benchSpeakerAddr = "127.0.0.11" // ribkeeper or raw GoBGP
	benchBirdAddr    = "127.0.0.12" // BIRD
	benchBird2Addr   = "127.0.0.13" // the fresh BIRD of the initial-sync baseline
	benchRelayAddr   = "127.0.0.14" // the wireCounter between a speaker and BIRD
)

// benchEnv reads a positive integer size from the environment.
func benchEnv(b testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// benchRules is RIBKEEPER_BENCH_RULES (default 100,000).
func benchRules(b testing.TB) int { return benchEnv(b, "RIBKEEPER_BENCH_RULES", 100_000) }

// ruleText is rule i, the shape of the baseline in GOBGP-V3-NOTES.md:
// destination 10.x.x.x/32, UDP, destination port 53, discard.
func ruleText(i int) string {
	return fmt.Sprintf("match destination 10.%d.%d.%d/32 protocol ==17 destination-port ==53 then discard", i>>16&255, i>>8&255, i&255)
}

// ruleRequests are rules [from, to) as API requests.
func ruleRequests(from, to int, ttl string) []api.AddRuleRequest {
	reqs := make([]api.AddRuleRequest, 0, to-from)
	for i := from; i < to; i++ {
		reqs = append(reqs, api.AddRuleRequest{Text: ruleText(i), TTL: ttl, Reason: "bench"})
	}
	return reqs
}

// addRules writes rules [from, to) through the batch endpoint, batch rules
// per request, answered with the ids only (Prefer: return=minimal), as a
// feed that loads many rules asks.
func addRules(b testing.TB, c *cli.Client, from, to, batch int, ttl string) {
	b.Helper()
	for i := from; i < to; i += batch {
		reqs := ruleRequests(i, min(i+batch, to), ttl)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		_, err := c.StoreRules(ctx, reqs)
		cancel()
		if err != nil {
			b.Fatalf("add rules %d..%d: %v", i, i+len(reqs), err)
		}
	}
}

// rss returns a process's resident set (VmRSS) and peak (VmHWM) in bytes.
func rss(b testing.TB, pid int) (cur, peak int64) {
	b.Helper()
	cur, peak, err := readRSS(pid)
	if err != nil {
		b.Fatalf("read RSS: %v", err)
	}
	return cur, peak
}

// readRSS reads VmRSS and VmHWM of pid.
func readRSS(pid int) (cur, peak int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parse %s: %w", line, err)
		}
		if k == "VmRSS" {
			cur = n << 10
		} else {
			peak = n << 10
		}
	}
	return cur, peak, nil
}

// cpuTime returns the CPU time (user and system) pid has used so far.
func cpuTime(b testing.TB, pid int) time.Duration {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatalf("read CPU time: %v", err)
	}
	// The command (field 2) may hold spaces; the fields after its closing
	// parenthesis start with field 3, so utime and stime (14, 15) are
	// the 12th and 13th.
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data[i+1:]))
	if i < 0 || len(f) < 13 {
		b.Fatalf("read CPU time: unexpected /proc/%d/stat: %q", pid, data)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatalf("read CPU time: %v", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times (100 on every
// Linux architecture Go supports).
const clockTicks = 100

// rssSample is one reading of a process's RSS.
type rssSample struct {
	at  time.Time
	rss int64
}

// sampleRSS reads pid's RSS every 250 ms until the returned function is
// called, which returns the readings.
func sampleRSS(b testing.TB, pid int) func() []rssSample {
	stop := make(chan struct{})
	done := make(chan []rssSample, 1)
	go func() {
		var out []rssSample
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			if cur, _, err := readRSS(pid); err == nil {
				out = append(out, rssSample{at: time.Now(), rss: cur})
			}
			select {
			case <-stop:
				done <- out
				return
			case <-t.C:
			}
		}
	}()
	return func() []rssSample { close(stop); return <-done }
}

// settledRSS reads the RSS of a process that has finished its work: at 3
// s (early: what the run left behind, garbage included) and once it has
// settled: free heap pages returned to the OS, then RSS fell by less than
// 1% over the last 10 s (or 120 s passed). ribkeeper returns its free
// pages by itself after a burst (memory.go); for raw GoBGP, release makes
// it do the same (debug.FreeOSMemory), so that both figures are what the
// process holds, not what its last burst left behind.
func settledRSS(b testing.TB, pid int, release func()) (settled, early, peak int64) {
	b.Helper()
	time.Sleep(3 * time.Second)
	early, _ = rss(b, pid)
	if release != nil {
		release()
	}
	hist := []int64{early}
	start := time.Now()
	for {
		time.Sleep(time.Second)
		cur, _ := rss(b, pid)
		hist = append(hist, cur)
		if n := len(hist); n > 10 && float64(hist[n-11]-cur) < 0.01*float64(cur) {
			break
		}
		if time.Since(start) > 120*time.Second {
			b.Logf("pid %d: RSS still falling after %v", pid, time.Since(start).Round(time.Second))
			break
		}
	}
	settled, peak = rss(b, pid)
	b.Logf("pid %d: RSS %.0f MB at 3 s, %.0f MB settled after %v", pid, mb(early), mb(settled), time.Since(start).Round(time.Second)+3*time.Second)
	return settled, early, peak
}

// waitCount waits until BIRD's table holds want routes and returns when it
// first saw them. It asks BIRD's `show route count` every 50 ms.
func waitCount(b testing.TB, r *birdtest.Router, table string, want int, timeout time.Duration) time.Time {
	b.Helper()
	// One control connection for the whole wait: a birdc process every
	// 50 ms cost the two measured cores a fork and exec each time.
	ctl, err := r.Dial()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { ctl.Close() }()
	deadline := time.Now().Add(timeout)
	last := -1
	for {
		n, err := ctl.Count(table)
		if err == nil && n == want {
			return time.Now()
		}
		if err == nil {
			last = n
		} else if ctl2, derr := r.Dial(); derr == nil {
			// BIRD may close a control connection (a restart): dial again.
			ctl.Close()
			ctl = ctl2
		}
		if time.Now().After(deadline) {
			b.Fatalf("BIRD %s holds %d routes after %v, want %d (err %v)", table, last, timeout, want, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func startBird(b testing.TB, addr string, peerPort int) *birdtest.Router {
	b.Helper()
	return birdtest.Start(b, birdtest.Options{
		Address: addr, ASN: 65001,
		Peers: []birdtest.Peer{{Address: benchSpeakerAddr, Port: peerPort, ASN: 65000}},
	})
}

// benchDaemon is a ribkeeper process for benchmarks, peering with one BIRD.
type benchDaemon struct {
	b      testing.TB
	dir    string
	conf   string
	socket string
	cmd    *exec.Cmd
	log    *os.File
	client *cli.Client
	// started is when the process last began (gctrace's @ times count
	// from about then: gcCycles).
	started time.Time
}

// startBenchPair starts BIRD and ribkeeper (SQLite, log level info as in
// the example configuration) and waits for the session.
func startBenchPair(b testing.TB) (*benchDaemon, *birdtest.Router) {
	d, bird, _ := startBenchPairCounted(b, false)
	return d, bird
}

// startBenchPairCounted is startBenchPair with, if count is set, a
// wireCounter between ribkeeper and BIRD.
func startBenchPairCounted(b testing.TB, count bool) (*benchDaemon, *birdtest.Router, *wireCounter) {
	b.Helper()
	birdtest.Binary(b)
	rkPort := birdtest.FreePort(b, benchSpeakerAddr)
	bird := startBird(b, benchBirdAddr, rkPort)
	peerAddr, peerPort := benchBirdAddr, bird.Port
	var wc *wireCounter
	if count {
		wc = startWireCounter(b, benchRelayAddr, benchSpeakerAddr, net.JoinHostPort(benchBirdAddr, strconv.Itoa(bird.Port)))
		peerAddr, peerPort = wc.Addr, wc.Port
	}
	d := startBenchDaemon(b, rkPort, peerAddr, peerPort, "")
	waitFor(b, 20*time.Second, "BGP session with BIRD established", func() bool { return bird.Established(0) })
	return d, bird, wc
}

// startBenchDaemon starts ribkeeper on benchSpeakerAddr:rkPort (SQLite,
// log level info as in the example configuration) with one FlowSpec
// neighbor; neighborKeys are more keys of its [[neighbor]] table (or
// tables after it).
func startBenchDaemon(b testing.TB, rkPort int, peerAddr string, peerPort int, neighborKeys string) *benchDaemon {
	return startBenchDaemonFamilies(b, rkPort, peerAddr, peerPort, `"ipv4-flowspec", "ipv6-flowspec"`, neighborKeys)
}

// startBenchDaemonFamilies is startBenchDaemon with the neighbor's
// families (TOML array items).
func startBenchDaemonFamilies(b testing.TB, rkPort int, peerAddr string, peerPort int, families, neighborKeys string) *benchDaemon {
	b.Helper()
	dir := b.TempDir()
	d := &benchDaemon{b: b, dir: dir, conf: filepath.Join(dir, "ribkeeper.toml"), socket: filepath.Join(dir, "rk.sock")}
	conf := fmt.Sprintf(`site = "bench"
[log]
level = "info"
[bgp]
asn = 65000
router_id = %[1]q
listen_addresses = [%[1]q]
listen_port = %[2]d
[[neighbor]]
address = %[3]q
asn = 65001
port = %[4]d
local_address = %[1]q
families = [%[8]s]
%[7]s
[api]
socket = %[5]q
[store]
path = %[6]q
`, benchSpeakerAddr, rkPort, peerAddr, peerPort, d.socket, filepath.Join(dir, "rk.db"), neighborKeys, families)
	if err := os.WriteFile(d.conf, []byte(conf), 0o644); err != nil {
		b.Fatal(err)
	}
	d.client = cli.NewClient(d.socket, 60*time.Second)
	d.start()
	b.Cleanup(d.stop)
	d.waitSocket()
	return d
}

// start execs the daemon and returns at once.
func (d *benchDaemon) start() {
	d.b.Helper()
	var err error
	d.log, err = os.OpenFile(filepath.Join(d.dir, "ribkeeper.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		d.b.Fatal(err)
	}
	d.cmd = exec.Command(binary, "serve", "--config", d.conf)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.started = time.Now()
	if err := d.cmd.Start(); err != nil {
		d.b.Fatalf("start ribkeeper: %v", err)
	}
}

// waitSocket waits until the API answers (GET /v1/peers: cheap at any
// table size).
func (d *benchDaemon) waitSocket() {
	d.b.Helper()
	waitFor(d.b, 30*time.Second, "ribkeeper API answering", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := d.client.Peers(ctx)
		return err == nil
	})
}

func (d *benchDaemon) pid() int { return d.cmd.Process.Pid }

// kill is kill -9: no withdrawals, no clean shutdown.
func (d *benchDaemon) kill() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	d.cmd.Wait()
	d.log.Close()
}

func (d *benchDaemon) stop() {
	if d.cmd.ProcessState != nil {
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		d.cmd.Process.Kill()
		<-done
	}
	d.log.Close()
	// RIBKEEPER_BENCH_LOGS=DIR keeps each daemon's log for a look afterwards.
	if keep := os.Getenv("RIBKEEPER_BENCH_LOGS"); keep != "" {
		if data, err := os.ReadFile(filepath.Join(d.dir, "ribkeeper.log")); err == nil {
			name := strings.NewReplacer("/", "_", " ", "_").Replace(d.b.Name())
			os.WriteFile(filepath.Join(keep, name+".log"), data, 0o644)
		}
	}
	if d.b.Failed() {
		if data, err := os.ReadFile(filepath.Join(d.dir, "ribkeeper.log")); err == nil {
			lines := strings.Split(string(data), "\n")
			if len(lines) > 40 {
				lines = lines[len(lines)-40:]
			}
			d.b.Logf("ribkeeper log:\n%s", strings.Join(lines, "\n"))
		}
	}
}

// rawProc is a raw GoBGP v4.8.0 speaker in its own process (this test
// binary re-executed as TestHelperRawGoBGP), driven over stdin/stdout.
type rawProc struct {
	b    testing.TB
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	port int
	// errLog holds the helper's stderr.
	errLog string
	// started is when the process began (see benchDaemon.started).
	started time.Time
}

const rawHelperEnv = "RIBKEEPER_RAW_GOBGP_HELPER"

func startRaw(b testing.TB) *rawProc {
	b.Helper()
	port := birdtest.FreePort(b, benchSpeakerAddr)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRawGoBGP$", "-test.v=false")
	cmd.Env = append(os.Environ(), rawHelperEnv+"="+fmt.Sprintf("%s:%d", benchSpeakerAddr, port))
	errLog, err := os.Create(filepath.Join(b.TempDir(), "raw-gobgp.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = errLog // GoBGP's own log, shown when the helper dies
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatalf("start raw GoBGP helper: %v", err)
	}
	r := &rawProc{b: b, cmd: cmd, in: in, out: bufio.NewScanner(outp), port: port, errLog: errLog.Name(), started: started}
	b.Cleanup(func() {
		in.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	r.reply() // "ready"
	return r
}

// do sends one command and returns the reply's fields after "ok".
func (r *rawProc) do(cmd string) []string {
	r.b.Helper()
	if _, err := fmt.Fprintln(r.in, cmd); err != nil {
		r.b.Fatalf("raw helper %q: %v", cmd, err)
	}
	return r.reply()
}

func (r *rawProc) reply() []string {
	r.b.Helper()
	for r.out.Scan() {
		f := strings.Fields(r.out.Text())
		if len(f) > 0 && f[0] == "ok" {
			return f[1:]
		}
		if len(f) > 0 && f[0] == "error" {
			r.b.Fatalf("raw helper: %s", r.out.Text())
		}
		// Anything else is test-binary noise (PASS lines etc.).
	}
	data, _ := os.ReadFile(r.errLog)
	lines := strings.Split(string(data), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	r.b.Fatalf("raw helper exited (%v); its stderr:\n%s", r.out.Err(), strings.Join(lines, "\n"))
	return nil
}

func (r *rawProc) pid() int { return r.cmd.Process.Pid }

// TestHelperRawGoBGP is not a test: it is the raw GoBGP process of the
// benchmarks, run only when rawHelperEnv is set. Commands, one a line:
//
//	peer ADDR PORT [ipv4-unicast]
//	                   add a BGP neighbor (AS 65001, FlowSpec v4+v6, or IPv4 unicast only)
//	add FROM TO        AddPath rules [FROM, TO), rawBatch per call; replies the seconds
//	rtbh FROM TO       AddPath blackhole routes [FROM, TO) (rtbhPaths), likewise
//	churn TOTAL LIVE   add TOTAL distinct rules, deleting each LIVE later
//	gc                 runtime GC + scavenge (not used for the RSS figures)
func TestHelperRawGoBGP(t *testing.T) {
	listen := os.Getenv(rawHelperEnv)
	if listen == "" {
		t.Skip("helper process of the benchmarks")
	}
	addr, portS, _ := strings.Cut(listen, ":")
	port, _ := strconv.Atoi(portS)
	srv := server.NewBgpServer()
	go srv.Serve()
	if err := srv.StartBgp(context.Background(), &gobgpapi.StartBgpRequest{Global: &gobgpapi.Global{
		Asn: 65000, RouterId: addr, ListenPort: int32(port), ListenAddresses: []string{addr},
	}}); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("ok ready")
	fail := func(err error) { fmt.Println("error", strings.ReplaceAll(err.Error(), "\n", " ")); os.Exit(1) }
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "peer":
			p, _ := strconv.Atoi(f[2])
			fams := []*gobgpapi.Family{
				{Afi: gobgpapi.Family_AFI_IP, Safi: gobgpapi.Family_SAFI_FLOW_SPEC_UNICAST},
				{Afi: gobgpapi.Family_AFI_IP6, Safi: gobgpapi.Family_SAFI_FLOW_SPEC_UNICAST},
			}
			if len(f) > 3 && f[3] == "ipv4-unicast" {
				fams = []*gobgpapi.Family{{Afi: gobgpapi.Family_AFI_IP, Safi: gobgpapi.Family_SAFI_UNICAST}}
			}
			var afis []*gobgpapi.AfiSafi
			for _, fam := range fams {
				afis = append(afis, &gobgpapi.AfiSafi{Config: &gobgpapi.AfiSafiConfig{Family: fam, Enabled: true}})
			}
			err := srv.AddPeer(context.Background(), &gobgpapi.AddPeerRequest{Peer: &gobgpapi.Peer{
				Conf:      &gobgpapi.PeerConf{NeighborAddress: f[1], PeerAsn: 65001},
				Transport: &gobgpapi.Transport{RemotePort: uint32(p), LocalAddress: addr},
				AfiSafis:  afis,
			}})
			if err != nil {
				fail(err)
			}
			fmt.Println("ok")
		case "add":
			from, _ := strconv.Atoi(f[1])
			to, _ := strconv.Atoi(f[2])
			t0 := time.Now()
			for lo := from; lo < to; lo += rawBatch {
				if _, err := srv.AddPath(apiutil.AddPathRequest{Paths: rawPaths(lo, min(lo+rawBatch, to), false)}); err != nil {
					fail(err)
				}
			}
			fmt.Println("ok", time.Since(t0).Seconds())
		case "rtbh":
			from, _ := strconv.Atoi(f[1])
			to, _ := strconv.Atoi(f[2])
			t0 := time.Now()
			for lo := from; lo < to; lo += rawBatch {
				if _, err := srv.AddPath(apiutil.AddPathRequest{Paths: rtbhPaths(lo, min(lo+rawBatch, to))}); err != nil {
					fail(err)
				}
			}
			fmt.Println("ok", time.Since(t0).Seconds())
		case "release":
			// What ribkeeper does by itself after a burst (memory.go).
			debug.FreeOSMemory()
			fmt.Println("ok")
		case "churn":
			total, _ := strconv.Atoi(f[1])
			live, _ := strconv.Atoi(f[2])
			t0 := time.Now()
			const step = 100 // rules added (and, past live, deleted) per pair of calls
			for lo := 0; lo < total; lo += step {
				hi := min(lo+step, total)
				if _, err := srv.AddPath(apiutil.AddPathRequest{Paths: rawPaths(lo, hi, false)}); err != nil {
					fail(err)
				}
				if hi > live {
					if err := srv.DeletePath(apiutil.DeletePathRequest{Paths: rawPaths(max(lo-live, 0), hi-live, true)}); err != nil {
						fail(err)
					}
				}
			}
			for lo := max(total-live, 0); lo < total; lo += rawBatch {
				if err := srv.DeletePath(apiutil.DeletePathRequest{Paths: rawPaths(lo, min(lo+rawBatch, total), true)}); err != nil {
					fail(err)
				}
			}
			fmt.Println("ok", time.Since(t0).Seconds())
		default:
			fail(fmt.Errorf("unknown command %q", f[0]))
		}
	}
	os.Exit(0)
}

// rawBatch is the paths per AddPath call of the raw baseline: the batch
// size bgp/ uses.
const rawBatch = 2000

// rawPaths are rules [from, to) as GoBGP's native paths, built the way
// bgp/ builds them: ORIGIN IGP, MP_REACH (next hop 0.0.0.0) and the
// action's extended communities; withdrawals carry the NLRI only.
func rawPaths(from, to int, withdraw bool) []*apiutil.Path {
	out := make([]*apiutil.Path, 0, max(to-from, 0))
	for i := from; i < to; i++ {
		out = append(out, nativePath(mustParse(ruleText(i)), withdraw))
	}
	return out
}

func mustParse(text string) flowspec.Rule {
	r, err := flowspec.Parse(text)
	if err != nil {
		panic(err)
	}
	return r
}

// nativePath is r as GoBGP's native path.
func nativePath(r flowspec.Rule, withdraw bool) *apiutil.Path {
	nlri, err := gobgp.NLRIFromSlice(gobgp.RF_FS_IPv4_UC, r.Match.AppendTo(nil))
	if err != nil {
		panic(err)
	}
	p := &apiutil.Path{Family: gobgp.RF_FS_IPv4_UC, Nlri: nlri, Withdrawal: withdraw}
	p.Attrs = append(p.Attrs, gobgp.NewPathAttributeOrigin(0))
	if withdraw {
		return p
	}
	mp, err := gobgp.NewPathAttributeMpReachNLRI(gobgp.RF_FS_IPv4_UC, []gobgp.PathNLRI{{NLRI: nlri}}, netip.IPv4Unspecified())
	if err != nil {
		panic(err)
	}
	p.Attrs = append(p.Attrs, mp)
	if ext := r.Action.AppendExtCommunities(nil); len(ext) > 0 {
		var cs []gobgp.ExtendedCommunityInterface
		for i := 0; i+8 <= len(ext); i += 8 {
			c, err := gobgp.ParseExtended(ext[i : i+8])
			if err != nil {
				panic(err)
			}
			cs = append(cs, c)
		}
		p.Attrs = append(p.Attrs, gobgp.NewPathAttributeExtendedCommunities(cs))
	}
	return p
}

// mustRule is rule i.
func mustRule(b testing.TB, i int) flowspec.Rule {
	r, err := flowspec.Parse(ruleText(i))
	if err != nil {
		b.Fatal(err)
	}
	return r
}
