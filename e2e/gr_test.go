package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/cli"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"github.com/ribkeeper/ribkeeper/e2e/rawbgp"
)

// The graceful-restart tests announce grRules4 IPv4 and grRules6 IPv6
// FlowSpec rules to a BIRD and restart ribkeeper under it.
const (
	grRK     = "127.0.7.1"
	grBIRD   = "127.0.7.2"
	grRules4 = 900
	grRules6 = 100
	// grTTLFlow is BIRD's text of the rule with a TTL that passes while
	// ribkeeper is down.
	grTTLRule = "match destination 198.51.100.9/32 protocol tcp destination-port ==443 then discard"
	grTTLFlow = "flow4 { dst 198.51.100.9/32; proto 6; dport 443; }"
)

// startGR starts BIRD and ribkeeper, ribkeeper's neighbor with
// graceful_restart = gr and BIRD with "graceful restart on" when birdGR
// (else BIRD's default, "aware"), announces the rules and waits until BIRD
// holds them.
func startGR(t *testing.T, gr, birdGR bool) (*daemon, *birdtest.Router) {
	t.Helper()
	return startGRWith(t, gr, birdGR, "")
}

// startGRWith is startGR with more [[neighbor]] tables in the
// configuration.
func startGRWith(t *testing.T, gr, birdGR bool, extraNeighbors string) (*daemon, *birdtest.Router) {
	t.Helper()
	d, bird := startGRDaemon(t, gr, birdGR, extraNeighbors)
	announceGR(t, d, bird)
	return d, bird
}

// startGRDaemon starts BIRD and ribkeeper as startGRWith does, without
// rules.
func startGRDaemon(t *testing.T, gr, birdGR bool, extraNeighbors string) (*daemon, *birdtest.Router) {
	t.Helper()
	return startGRDaemonKeys(t, gr, birdGR, "", extraNeighbors)
}

// startGRDaemonKeys is startGRDaemon with more keys in [bgp].
func startGRDaemonKeys(t *testing.T, gr, birdGR bool, bgpKeys, extraNeighbors string) (*daemon, *birdtest.Router) {
	t.Helper()
	birdtest.Binary(t)
	dir := t.TempDir()
	rkPort := birdtest.FreePort(t, grRK)
	birdPort := birdtest.FreePort(t, grBIRD)
	bird := birdtest.Start(t, birdtest.Options{
		Address: grBIRD, Port: birdPort, ASN: 65001, GracefulRestart: birdGR,
		Peers: []birdtest.Peer{{Address: grRK, Port: rkPort, ASN: 65000}},
	})
	d := &daemon{t: t, dir: dir, conf: filepath.Join(dir, "ribkeeper.toml"), socket: filepath.Join(dir, "rk.sock")}
	grKeys := ""
	if gr {
		grKeys = "graceful_restart = true\nrestart_time = \"120s\"\n"
	}
	conf := fmt.Sprintf(`site = "gr"
[log]
level = "info"
[bgp]
asn = 65000
router_id = %q
listen_addresses = [%q]
listen_port = %d
%s[[neighbor]]
address = %q
asn = 65001
port = %d
local_address = %q
families = ["ipv4-flowspec", "ipv6-flowspec"]
%s%s[store]
path = %q
[api]
socket = %q
`, grRK, grRK, rkPort, bgpKeys, grBIRD, birdPort, grRK, grKeys, extraNeighbors, filepath.Join(dir, "rk.db"), d.socket)
	if err := os.WriteFile(d.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	d.start()
	waitFor(t, 30*time.Second, "BGP session with BIRD established", func() bool { return bird.Established(0) })
	return d, bird
}

// announceGR adds the grRules4+grRules6 rules through the API and waits
// until BIRD holds them.
func announceGR(t *testing.T, d *daemon, bird *birdtest.Router) {
	t.Helper()
	var reqs []api.AddRuleRequest
	for i := range grRules4 {
		reqs = append(reqs, api.AddRuleRequest{Text: fmt.Sprintf(
			"match destination 198.18.%d.%d/32 protocol udp destination-port ==53 then discard", i/200, i%200+1)})
	}
	for i := range grRules6 {
		reqs = append(reqs, api.AddRuleRequest{Text: fmt.Sprintf(
			"match destination 2001:db8:7::%x/128 protocol udp then discard", i+1)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cli.NewClient(d.socket, 0).AddRules(ctx, reqs); err != nil {
		t.Fatalf("add %d rules: %v", len(reqs), err)
	}
	waitFull(t, bird)
}

func waitFull(t *testing.T, bird *birdtest.Router) {
	t.Helper()
	waitFor(t, 60*time.Second, fmt.Sprintf("BIRD holds %d+%d rules", grRules4, grRules6), func() bool {
		n4, err4 := bird.Count("ft4")
		n6, err6 := bird.Count("ft6")
		return err4 == nil && err6 == nil && n4 == grRules4 && n6 == grRules6
	})
}

// sample is what BIRD held at one moment.
type sample struct {
	at       time.Time
	n4, n6   int
	ttlFound bool // BIRD holds the rule with the TTL
	err      error
}

// sampler reads BIRD's FlowSpec table sizes, and the TTL rule's route,
// over one persistent control connection, as fast as every interval.
type sampler struct {
	mu      sync.Mutex
	samples []sample
	stop    chan struct{}
	done    chan struct{}
}

func startSampler(t *testing.T, bird *birdtest.Router, interval time.Duration) *sampler {
	t.Helper()
	ctl, err := bird.Dial()
	if err != nil {
		t.Fatal(err)
	}
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer ctl.Close()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			sm := sample{at: time.Now()}
			var counts map[string]int
			counts, sm.err = ctl.Counts("ft4", "ft6")
			sm.n4, sm.n6 = counts["ft4"], counts["ft6"]
			if sm.err == nil {
				_, sm.ttlFound, sm.err = ctl.RouteTime("ft4", grTTLFlow)
			}
			s.mu.Lock()
			s.samples = append(s.samples, sm)
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	waitFor(t, 10*time.Second, "first sample", func() bool { return s.last().at != time.Time{} })
	return s
}

func (s *sampler) last() sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return sample{}
	}
	return s.samples[len(s.samples)-1]
}

// finish stops the sampler and returns every sample.
func (s *sampler) finish() []sample {
	close(s.stop)
	<-s.done
	return s.samples
}

// gapStats is the largest and the 99th-percentile time between samples.
func gapStats(ss []sample) (max, p99 time.Duration) {
	var gaps []time.Duration
	for i := 1; i < len(ss); i++ {
		gaps = append(gaps, ss[i].at.Sub(ss[i-1].at))
	}
	if len(gaps) == 0 {
		return 0, 0
	}
	slices.Sort(gaps)
	return gaps[len(gaps)-1], gaps[len(gaps)*99/100]
}

// waitExit waits for the daemon to end and returns its exit code.
func (d *daemon) waitExit(timeout time.Duration) int {
	d.t.Helper()
	select {
	case err := <-d.exited:
		d.exited = nil
		d.log.Close()
		if err == nil {
			return 0
		}
		code := -1
		if ee, ok := err.(interface{ ExitCode() int }); ok {
			code = ee.ExitCode()
		}
		return code
	case <-time.After(timeout):
		d.t.Fatalf("ribkeeper did not exit within %v; log:\n%s", timeout, d.logTail(30))
		return -1
	}
}

// grRestart announces the rules and one rule with a TTL, stops ribkeeper
// with stop, waits until the TTL has passed, starts ribkeeper again and
// waits until BIRD has swept the expired rule. It returns every sample
// BIRD's tables gave from before the stop to the end, and when the stop
// began.
func grRestart(t *testing.T, gr, birdGR bool, stop func(*daemon)) (samples []sample, stoppedAt time.Time) {
	d, bird := startGR(t, gr, birdGR)
	id := d.addRule("--ttl", "4s", grTTLRule)
	bird.WaitRoutes(t, "ft4", 10*time.Second, "TTL rule announced", hasRoute(grTTLFlow))
	exp, err := time.Parse(time.RFC3339Nano, d.show(id)["expires_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	since, err := bird.Since(0)
	if err != nil {
		t.Fatal(err)
	}

	before, _, err := bird.ImportStats(0, "flow4")
	if err != nil {
		t.Fatal(err)
	}
	notes, err := bird.Notifications()
	if err != nil {
		t.Fatal(err)
	}
	s := startSampler(t, bird, 20*time.Millisecond)
	stoppedAt = time.Now()
	if !s.last().ttlFound {
		t.Fatalf("BIRD lost the TTL rule before ribkeeper stopped")
	}
	stop(d)
	waitFor(t, 30*time.Second, "the TTL rule's expires_at passed while ribkeeper is down", func() bool { return time.Now().After(exp) })
	d.start()
	waitFor(t, 60*time.Second, "BIRD session re-established", func() bool {
		s2, err := bird.Since(0)
		return err == nil && !birdtest.SameSince(s2, since) && bird.Established(0)
	})
	waitFor(t, 60*time.Second, "BIRD holds every rule and no longer the expired one", func() bool {
		l := s.last()
		return l.err == nil && !l.ttlFound && l.n4 == grRules4 && l.n6 == grRules6
	})
	waitFor(t, 10*time.Second, "the TTL rule is expired in the store", func() bool { return d.show(id)["state"] == "expired" })
	samples = s.finish()
	if gr {
		// The stop must not send a NOTIFICATION: with one, a helper
		// flushes the rules at once (RFC 4724 section 4.2).
		after, err := bird.Notifications()
		if err != nil {
			t.Fatal(err)
		}
		if len(after) > len(notes) {
			t.Errorf("BIRD received a NOTIFICATION when ribkeeper stopped: %q", after[len(notes):])
		}
		// BIRD counts received updates across a graceful restart: after it
		// no more than one per live rule, else a rule was sent twice or the
		// expired one was announced again.
		updates, _, err := bird.ImportStats(0, "flow4")
		if err != nil {
			t.Fatal(err)
		}
		got := updates - before
		if updates < before {
			got = updates // a new session, not a graceful restart: BIRD counts from zero
		}
		t.Logf("BIRD received %d IPv4 FlowSpec updates after the restart for %d live rules", got, grRules4)
		if got > grRules4 {
			t.Errorf("BIRD received %d IPv4 FlowSpec updates after the restart for %d live rules: the expired rule was announced again, or rules twice", got, grRules4)
		}
	}
	return samples, stoppedAt
}

// minSample is the sample with the fewest IPv4+IPv6 routes from stoppedAt
// on, and how many samples there were from then on.
func minSample(ss []sample, from time.Time) (sample, int) {
	var m sample
	n := 0
	for _, s := range ss {
		if s.at.Before(from) || s.err != nil {
			continue
		}
		if n == 0 || s.n4+s.n6 < m.n4+m.n6 {
			m = s
		}
		n++
	}
	return m, n
}

func TestGracefulRestart(t *testing.T) {
	stops := []struct {
		name   string
		birdGR bool
		stop   func(*daemon)
	}{
		{"kill -9", true, (*daemon).kill},
		{"SIGTERM", true, (*daemon).stop},
		// BIRD's default "graceful restart aware" is the helper role too.
		{"SIGTERM, BIRD graceful restart aware", false, (*daemon).stop},
		{"shutdown without --withdraw", true, func(d *daemon) {
			if _, errOut, code := d.cli("shutdown"); code != 0 {
				d.t.Fatalf("ribkeeper shutdown: exit %d: %s", code, errOut)
			}
			if code := d.waitExit(30 * time.Second); code != 0 {
				d.t.Errorf("ribkeeper exited with %d after `shutdown`, want 0", code)
			}
		}},
	}
	for _, st := range stops {
		t.Run(st.name, func(t *testing.T) {
			samples, stoppedAt := grRestart(t, true, st.birdGR, st.stop)
			low, n := minSample(samples, stoppedAt)
			gapMax, gapP99 := gapStats(samples)
			t.Logf("%d samples after the stop (gap between samples: p99 %v, max %v); fewest routes %d+%d at %v after the stop",
				n, gapP99.Round(time.Millisecond), gapMax.Round(time.Millisecond), low.n4, low.n6, low.at.Sub(stoppedAt).Round(time.Millisecond))
			if low.n4 < grRules4 || low.n6 < grRules6 {
				t.Errorf("BIRD held only %d+%d of %d+%d rules %v after the stop: the restart was not hitless",
					low.n4, low.n6, grRules4, grRules6, low.at.Sub(stoppedAt).Round(time.Millisecond))
			}
			// Once BIRD swept the expired rule it must never come back.
			gone := false
			for _, s := range samples {
				if s.at.Before(stoppedAt) || s.err != nil {
					continue
				}
				if !s.ttlFound {
					gone = true
				} else if gone {
					t.Errorf("the expired rule was announced again %v after the stop, after BIRD had swept it", s.at.Sub(stoppedAt).Round(time.Millisecond))
					break
				}
			}
		})
	}

	// Control: without graceful restart on ribkeeper's side (BIRD still
	// "graceful restart on") the same stop empties BIRD at some sample,
	// which shows the sampler sees a gap when there is one.
	t.Run("control: SIGTERM without graceful restart", func(t *testing.T) {
		samples, stoppedAt := grRestart(t, false, true, (*daemon).stop)
		low, n := minSample(samples, stoppedAt)
		gapMax, gapP99 := gapStats(samples)
		t.Logf("%d samples after the stop (gap between samples: p99 %v, max %v); fewest routes %d+%d at %v after the stop",
			n, gapP99.Round(time.Millisecond), gapMax.Round(time.Millisecond), low.n4, low.n6, low.at.Sub(stoppedAt).Round(time.Millisecond))
		if low.n4 >= grRules4 && low.n6 >= grRules6 {
			t.Errorf("without graceful restart BIRD never held fewer than %d+%d rules: the sampler cannot see a gap", grRules4, grRules6)
		}
	})
}

// `ribkeeper shutdown --withdraw` withdraws every rule, waits until every
// established router was sent the withdrawals, closes the sessions with a
// Cease and exits 0; the CLI exits 0 once that is done. A raw speaker as a
// second neighbor sees the order on the wire: every withdrawal, then the
// Cease. BIRD ends up empty and logs the Cease.
//
// The raw neighbor has no graceful_restart: a graceful-restart neighbor
// that is down when ribkeeper starts delays everyone's table (see
// TestGRDownRouterDelaysNoOther).
func TestShutdownWithdraw(t *testing.T) {
	const rawAddr = "127.0.7.3"
	d, bird := startGRWith(t, true, true, fmt.Sprintf(
		"[[neighbor]]\naddress = %q\nasn = %d\npassive = true\nfamilies = [\"ipv4-flowspec\", \"ipv6-flowspec\"]\n",
		rawAddr, hostileRawASN))

	rkPort := listenPort(t, d)
	deadline := time.Now().Add(30 * time.Second)
	conn, err := rawSession(context.Background(), netip.MustParseAddr(rawAddr), netip.AddrPortFrom(netip.MustParseAddr(grRK), uint16(rkPort)), "",
		rawbgp.Open{ASN: hostileRawASN, HoldTime: 240, RouterID: netip.MustParseAddr(rawAddr), Families: bothFamilies}, deadline)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	want := map[rawbgp.Family]int{rawbgp.IPv4FlowSpec: grRules4, rawbgp.IPv6FlowSpec: grRules6}
	if n, err := readTable(conn, want, deadline); err != nil || n != nil {
		t.Fatalf("raw peer: initial table: %v %v", n, err)
	}

	type result struct {
		out, errOut string
		code        int
	}
	cli := make(chan result, 1)
	go func() {
		out, errOut, code := d.cli("shutdown", "--withdraw")
		cli <- result{out, errOut, code}
	}()

	// Everything the raw peer reads until the session ends.
	withdrawn := map[rawbgp.Family]int{}
	var cease *rawbgp.Notification
	for cease == nil {
		m, err := conn.Read(time.Now().Add(60 * time.Second))
		if errors.Is(err, io.EOF) {
			// GoBGP v4.8.0 writes the Cease best effort (fsm.go
			// sendNotification ignores the write error and a concurrent
			// teardown may have closed the socket): seen once in a -race
			// run. The withdrawals before the end are what matters; BIRD's
			// Cease is checked below.
			t.Logf("raw peer: the session ended without a NOTIFICATION after %v withdrawals", withdrawn)
			break
		}
		if err != nil {
			t.Fatalf("raw peer: %v after %v withdrawals, without a NOTIFICATION", err, withdrawn)
		}
		switch m.Type {
		case rawbgp.MsgUpdate:
			f, n, err := rawbgp.FlowSpecWithdrawn(m.Body)
			if err != nil {
				t.Fatalf("raw peer: unparseable UPDATE: %v", err)
			}
			withdrawn[f] += n
			if _, n, _ := rawbgp.FlowSpecNLRIs(m.Body); n > 0 {
				t.Errorf("ribkeeper announced %d FlowSpec NLRIs during shutdown --withdraw", n)
			}
		case rawbgp.MsgNotification:
			n, err := rawbgp.ParseNotification(m.Body)
			if err != nil {
				t.Fatal(err)
			}
			cease = &n
		}
	}
	t.Logf("raw peer: %v withdrawals, then %v", withdrawn, cease)
	for f, n := range want {
		if withdrawn[f] < n {
			t.Errorf("raw peer got %d %s withdrawals of %d rules before the NOTIFICATION", withdrawn[f], f, n)
		}
	}
	if cease != nil && cease.Code != 6 {
		t.Errorf("session ended with %v, want a Cease (code 6)", cease)
	}

	select {
	case r := <-cli:
		if r.code != 0 {
			t.Errorf("ribkeeper shutdown --withdraw: exit %d: %s%s", r.code, r.errOut, r.out)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("ribkeeper shutdown --withdraw did not return within 60s")
	}
	if code := d.waitExit(30 * time.Second); code != 0 {
		t.Errorf("ribkeeper exited with %d after `shutdown --withdraw`, want 0", code)
	}
	waitFor(t, 30*time.Second, "BIRD's FlowSpec tables empty", func() bool {
		n4, err4 := bird.Count("ft4")
		n6, err6 := bird.Count("ft6")
		return err4 == nil && err6 == nil && n4 == 0 && n6 == 0
	})
	notes, err := bird.Notifications()
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) == 0 {
		t.Errorf("BIRD logged no NOTIFICATION from ribkeeper: the session did not end with a Cease")
	}
	t.Logf("BIRD logged: %q", notes)
}

// listenPort is the BGP listen_port of d's configuration.
func listenPort(t *testing.T, d *daemon) int {
	t.Helper()
	b, err := os.ReadFile(d.conf)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		var p int
		if _, err := fmt.Sscanf(l, "listen_port = %d", &p); err == nil {
			return p
		}
	}
	t.Fatalf("no listen_port in %s", d.conf)
	return 0
}

// A configured graceful-restart router that is down must not hold back the
// rules of the routers that are up: a mitigation added right after ribkeeper
// started reaches BIRD while the other neighbor (nothing listens on its
// address) never comes up.
func TestGRDownRouterDelaysNoOther(t *testing.T) {
	const downAddr = "127.0.7.5"
	downPort := birdtest.FreePort(t, downAddr)
	d, bird := startGRDaemon(t, true, true, fmt.Sprintf(
		"[[neighbor]]\naddress = %q\nasn = 65002\nport = %d\nlocal_address = %q\nfamilies = [\"ipv4-flowspec\", \"ipv6-flowspec\"]\ngraceful_restart = true\n",
		downAddr, downPort, grRK))
	start := time.Now()
	d.addRule(dnsRule)
	// The usual failure timeout of these tests (TestAddUpdateWithdraw):
	// without the other router, the rule arrives in milliseconds.
	bird.WaitRoutes(t, "ft4", 10*time.Second, "rule announced while another graceful-restart neighbor is down", has(dnsFlow, discardExt))
	t.Logf("rule in BIRD %v after it was added", time.Since(start).Round(time.Millisecond))
}

// Compaction (compact_after) moves to a fresh GoBGP server, loads it with
// every rule and only then brings the session back: with graceful restart
// BIRD keeps every rule throughout. The churned rules are IPv4 only, so
// the IPv6 table shows any gap whatever the churn does to the IPv4 one.
func TestCompactionHitlessWithGR(t *testing.T) {
	d, bird := startGRDaemonKeys(t, true, true, "compact_after = 20\n", "")
	announceGR(t, d, bird)
	since, err := bird.Since(0)
	if err != nil {
		t.Fatal(err)
	}
	s := startSampler(t, bird, 20*time.Millisecond)
	start := time.Now()
	var ids []string
	for i := range 25 {
		ids = append(ids, d.addRule(fmt.Sprintf("match destination 203.0.113.%d/32 protocol udp then discard", i+1)))
	}
	for _, id := range ids {
		d.mustCLI("rule", "withdraw", id)
	}
	waitFor(t, 60*time.Second, "compaction logged", func() bool { return d.logCount(`speaker restarted on a fresh GoBGP server`) >= 1 })
	waitFor(t, 60*time.Second, "BIRD session re-established", func() bool {
		s2, err := bird.Since(0)
		return err == nil && !birdtest.SameSince(s2, since) && bird.Established(0)
	})
	waitFull(t, bird)
	samples := s.finish()
	low, n := minSample(samples, start)
	gapMax, gapP99 := gapStats(samples)
	t.Logf("%d samples (gap p99 %v, max %v); fewest routes %d+%d", n, gapP99.Round(time.Millisecond), gapMax.Round(time.Millisecond), low.n4, low.n6)
	if low.n6 < grRules6 || low.n4 < grRules4 {
		t.Errorf("BIRD held only %d+%d of %d+%d rules during the compaction: not hitless", low.n4, low.n6, grRules4, grRules6)
	}
	// One line per rule (a pass of a few), or the summary of a bulk pass.
	if n := d.logCount(`op=reannounce|reannounced=[1-9]`); n != 0 {
		t.Errorf("%d log lines of rules announced again after the compaction, want 0", n)
	}
}
