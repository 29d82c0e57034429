package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// BenchmarkFastNetMon: Debian's FastNetMon 1.2.4 with gobgp = on sees an
// attack in NetFlow v5 (TestFastNetMonGoBGP's recipe) and bans the host;
// each round times from the first attack datagram.
//
//   - detect-*: until FastNetMon's log line of the attack (its own
//     detection: its one-second cycle, the same for both sides);
//   - gobgpd: route-* until the route is in BIRD (BIRD's own time of the
//     route), after-detect-* the part after FastNetMon's detection;
//   - ours: the same with ribkeeper (fnmPlaybook: the ban becomes a
//     discard rule) in gobgpd's place, the route being the FlowSpec rule;
//     signal-* until its log line of the accepted signal, written when
//     the engine has taken it (the rule may be at BIRD before: the
//     announcement leaves while the rule's commit runs).
//   - ours-rtbh: the same with a playbook making the route gobgpd
//     announces, a blackhole of the host (fnmRTBHPlaybook), to the same
//     BIRD table: the like-for-like comparison with gobgpd.
//
// BIRD stamps routes in microseconds, FastNetMon its log lines in
// milliseconds (truncated): after-detect-* carries that millisecond on
// both sides alike; after-detect-mean-ms is the mean over the rounds.
//
// Rounds: RIBKEEPER_BENCH_FNM_ROUNDS (10); each waits for the unban
// (ban_time 5 s) before the next attack.
func BenchmarkFastNetMon(b *testing.B) {
	rounds := 10
	if s := os.Getenv("RIBKEEPER_BENCH_FNM_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("RIBKEEPER_BENCH_FNM_ROUNDS=%q is not a positive number", s)
		}
		rounds = n
	}
	bins := fnmBinaries(b)
	b.Run("gobgpd", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			g := startGoBGPd(b, bins)
			f := startFastNetMon(b, bins, g.api)
			ctl, err := g.bird.Dial()
			if err != nil {
				b.Fatal(err)
			}
			defer ctl.Close()
			var detect, route, after []time.Duration
			for range rounds {
				mark := len(f.log())
				stop, first := f.attackFrom(b)
				var at string
				waitFor(b, 60*time.Second, "the ban at gobgpd's BIRD peer", func() bool {
					t, ok, err := ctl.RouteTime("up4", fnmTarget+"/32")
					at = t
					return err == nil && ok
				})
				stop()
				det := f.detected(b, mark)
				routed := parseLocal(b, birdtest.RouteTimeLayout, at)
				detect, route, after = append(detect, det.Sub(first)), append(route, routed.Sub(first)), append(after, routed.Sub(det))
				g.bird.WaitRoutes(b, "up4", 60*time.Second, "the unban", noRoute(fnmTarget+"/32"))
			}
			percentiles(b, detect, "detect-")
			percentiles(b, route, "route-")
			percentiles(b, after, "after-detect-")
			b.ReportMetric(meanMS(after), "after-detect-mean-ms")
		}
	})
	b.Run("ours", func(b *testing.B) {
		benchFastNetMonOurs(b, bins, rounds, "", `"ipv4-flowspec", "ipv6-flowspec"`, fnmPlaybook, "ft4", "flow4 { dst "+fnmTarget+"/32; }")
	})
	b.Run("ours-rtbh", func(b *testing.B) {
		benchFastNetMonOurs(b, bins, rounds, rtbhTable, `"ipv4-unicast"`, fnmRTBHPlaybook, "up4", fnmTarget+"/32")
	})
}

// fnmRTBHPlaybook is fnmPlaybook with a blackhole for the attacked host in
// place of the discard rule: the route gobgpd announces for FastNetMon.
var fnmRTBHPlaybook = strings.Replace(fnmPlaybook, "match destination {target} then discard", "route {target} then blackhole", 1)

// benchFastNetMonOurs is BenchmarkFastNetMon's "ours": the built binary
// with one BIRD neighbor of the given families, FastNetMon's source and
// the playbook (with the listener's address to fill in), and more
// configuration tables in conf; each round times the attack until BIRD's
// table holds net.
func benchFastNetMonOurs(b *testing.B, bins fnmBins, rounds int, conf, families, playbook, table, net string) {
	for range b.N {
		b.StopTimer()
		api := fnmAPIAddr(b)
		bird := birdtest.Start(b, birdtest.Options{Address: benchBirdAddr, ASN: 65001,
			Peers: []birdtest.Peer{{Address: benchSpeakerAddr, Port: birdtest.FreePort(b, benchSpeakerAddr), ASN: 65000}}})
		d := startBenchDaemonFamilies(b, bird.Peers[0].Port, benchBirdAddr, bird.Port, families, conf+"\n"+fmt.Sprintf(playbook, api))
		waitFor(b, 60*time.Second, "ribkeeper's session with BIRD", func() bool { return bird.Established(0) })
		rkLog := filepath.Join(d.dir, "ribkeeper.log")
		f := startFastNetMon(b, bins, api)
		ctl, err := bird.Dial()
		if err != nil {
			b.Fatal(err)
		}
		defer ctl.Close()
		var detect, signal, route, after []time.Duration
		for range rounds {
			mark, fmark := len(readText(rkLog)), len(f.log())
			stop, first := f.attackFrom(b)
			var at string
			waitFor(b, 60*time.Second, "the ban's rule at BIRD", func() bool {
				t, ok, err := ctl.RouteTime(table, net)
				at = t
				return err == nil && ok
			})
			stop()
			// The rule leaves while the engine's write commits, so the
			// log line may come after it reached BIRD.
			var line string
			waitFor(b, 60*time.Second, "ribkeeper's log line of the ban's signal", func() bool {
				line = findLine(readText(rkLog)[mark:], "signal accepted: source=fnm op=AddPath target="+fnmTarget+"/32 state=start")
				return line != ""
			})
			det := f.detected(b, fmark)
			got := parseLocal(b, "2006-01-02T15:04:05.000Z0700", strings.Fields(line)[0])
			routed := parseLocal(b, birdtest.RouteTimeLayout, at)
			detect, signal = append(detect, det.Sub(first)), append(signal, got.Sub(first))
			route, after = append(route, routed.Sub(first)), append(after, routed.Sub(det))
			bird.WaitRoutes(b, table, 60*time.Second, "the unban", lacks(net))
		}
		percentiles(b, detect, "detect-")
		percentiles(b, signal, "signal-")
		percentiles(b, route, "route-")
		percentiles(b, after, "after-detect-")
		b.ReportMetric(meanMS(after), "after-detect-mean-ms")
	}
}

// meanMS is the mean of ds in milliseconds.
func meanMS(ds []time.Duration) float64 {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return float64(sum) / float64(len(ds)) / float64(time.Millisecond)
}

func readText(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// parseLocal parses a timestamp written in the machine's local time (or
// with its zone, if layout has one).
func parseLocal(b testing.TB, layout, s string) time.Time {
	b.Helper()
	t, err := time.ParseInLocation(layout, s, time.Local)
	if err != nil {
		b.Fatalf("timestamp %q: %v", s, err)
	}
	return t
}

// detected returns the time of FastNetMon's first attack line for
// fnmTarget after byte offset mark of its log, waiting for it.
func (f *fastNetMon) detected(b testing.TB, mark int) time.Time {
	b.Helper()
	var line string
	waitFor(b, 60*time.Second, "FastNetMon's attack line", func() bool {
		line = findLine(f.log()[mark:], "Attack with direction: incoming IP: "+fnmTarget)
		return line != ""
	})
	// "2026-11-25 19:41:22,986 [INFO] Attack with direction: ..."
	if len(line) < 23 {
		b.Fatalf("FastNetMon's attack line has no time: %q", line)
	}
	return parseLocal(b, "2006-01-02 15:04:05,000", line[:23])
}
