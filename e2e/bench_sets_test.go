package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	rkapi "github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// setRoute is line i of the RTBH feed of BenchmarkSets: a /32 blackhole
// under 10.0.0.0/8 (i < 2^24).
func setRoute(i int) string {
	return fmt.Sprintf("route 10.%d.%d.%d/32 then blackhole", i>>16&255, i>>8&255, i&255)
}

// setFeed is the body of PUT /v1/sets/NAME for lines [0, n), with the
// first changed of them replaced by lines [n, n+changed).
func setFeed(n, changed int) []byte {
	var b strings.Builder
	b.Grow(n * 48)
	b.WriteString(`{"rules":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		j := i
		if i < changed {
			j = n + i
		}
		b.WriteString(`{"text":"` + setRoute(j) + `"}`)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// BenchmarkSets: a declarative RTBH set of RIBKEEPER_BENCH_SET /32 routes
// (default 1,000,000) applied through PUT /v1/sets/feed to a daemon
// peering with BIRD, until BIRD holds every route; then the same set with
// 1 % of its lines replaced by other prefixes, until BIRD has the new
// ones and none of the old; then the second list once more, unchanged.
// For each: the API call's time, the time until BIRD was done, and the
// UPDATE messages that crossed the wire (a wireCounter between the daemon
// and BIRD) and the route updates and withdrawals BIRD counted. Replacing
// 1 % of the lines should cost exactly that difference (1 % of the routes
// withdrawn, 1 % announced); the unchanged apply nothing. UPDATE messages
// pack many routes each, more when many routes change at once, so their
// ratio is higher than the routes'. Also the daemon's peak and settled
// RSS.
func BenchmarkSets(b *testing.B) {
	n := benchEnv(b, "RIBKEEPER_BENCH_SET", 1_000_000)
	changed := max(n/100, 1)
	for range b.N {
		b.StopTimer()
		birdtest.Binary(b)
		rkPort := birdtest.FreePort(b, benchSpeakerAddr)
		bird := startBird(b, benchBirdAddr, rkPort)
		wc := startWireCounter(b, benchRelayAddr, benchSpeakerAddr, net.JoinHostPort(benchBirdAddr, strconv.Itoa(bird.Port)))
		d := startSetDaemon(b, rkPort, wc.Addr, wc.Port)
		waitFor(b, 20*time.Second, "BGP session with BIRD established", func() bool { return bird.Established(0) })
		first, second := setFeed(n, 0), setFeed(n, changed)

		var fence func(phase string) int64
		// reach is how many routes the phase announces at least: BIRD is
		// asked only once that many crossed the wire (waitReach).
		apply := func(phase string, body []byte, reach int, done func() bool) (api, total time.Duration, updates int64, bu, bw int) {
			b.Helper()
			u0, r0 := wc.Updates(), wc.Reach()
			bu0, bw0, err := bird.ImportStats(0, "ipv4")
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			res, err := d.client.ApplySet(ctx, "feed", body)
			cancel()
			if err != nil {
				b.Fatalf("%s: PUT /v1/sets/feed: %v", phase, err)
			}
			api = time.Since(t0)
			wc.waitReach(b, r0+int64(reach), 30*time.Minute)
			waitFor(b, 30*time.Minute, phase+": BIRD holds the set", done)
			total = time.Since(t0)
			bu1, bw1, _ := bird.ImportStats(0, "ipv4")
			// UPDATEs the speaker sent after BIRD's table was right (none
			// should be) are counted too: BGP is one ordered stream, so
			// once BIRD holds a marker route announced after the apply,
			// every earlier UPDATE has passed the counter. The marker's
			// own UPDATE is not counted; it is withdrawn before the next
			// phase starts counting.
			updates = fence(phase) - u0 - 1
			b.Logf("%s: %+v; API %v, BIRD done after %v, %d UPDATE messages, BIRD counted %d updates and %d withdrawals",
				phase, res, api.Round(time.Millisecond), total.Round(time.Millisecond), updates, bu1-bu0, bw1-bw0)
			return api, total, updates, bu1 - bu0, bw1 - bw0
		}
		ctl, err := bird.Dial()
		if err != nil {
			b.Fatal(err)
		}
		defer ctl.Close()
		// fence announces a marker route, waits until BIRD holds it,
		// reads the counter, then withdraws it and waits until it is gone.
		fence = func(phase string) int64 {
			const marker = "192.0.2.255/32"
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, _, err := d.client.AddRule(ctx, rkapi.AddRuleRequest{Text: "route " + marker + " then blackhole", TTL: "1h"}); err != nil {
				b.Fatalf("%s: marker: %v", phase, err)
			}
			waitFor(b, time.Minute, phase+": BIRD holds the marker", func() bool {
				_, there, err := ctl.RouteTime("up4", marker)
				return err == nil && there
			})
			n := wc.Updates()
			if _, err := d.client.WithdrawMatches(ctx, []rkapi.WithdrawMatchRequest{{Text: "route " + marker + " then blackhole"}}); err != nil {
				b.Fatalf("%s: marker: %v", phase, err)
			}
			waitFor(b, time.Minute, phase+": the marker gone from BIRD", func() bool {
				_, there, err := ctl.RouteTime("up4", marker)
				return err == nil && !there
			})
			return n
		}
		has := func(want int, gone string) func() bool {
			return func() bool {
				c, err := ctl.Count("up4")
				if err != nil || c != want {
					return false
				}
				if gone == "" {
					return true
				}
				_, there, err := ctl.RouteTime("up4", gone)
				return err == nil && !there
			}
		}
		b.StartTimer()
		api1, total1, up1, bu1, _ := apply("first apply", first, n, has(n, ""))
		// The replaced lines' routes are gone once the last of them is.
		lastGone := strings.Fields(setRoute(changed - 1))[1]
		api2, total2, up2, bu2, bw2 := apply("1 % changed", second, changed, has(n, lastGone))
		api3, _, up3, _, _ := apply("unchanged", second, 0, has(n, lastGone))
		b.StopTimer()
		settled, _, peak := settledRSS(b, d.pid(), nil)
		b.ReportMetric(float64(n), "rules")
		b.ReportMetric(api1.Seconds(), "apply1-api-s")
		b.ReportMetric(total1.Seconds(), "apply1-bird-s")
		b.ReportMetric(float64(n)/total1.Seconds(), "apply1-rules/s")
		b.ReportMetric(float64(up1), "apply1-updates")
		b.ReportMetric(float64(bu1), "apply1-bird-updates")
		b.ReportMetric(api2.Seconds(), "apply2-api-s")
		b.ReportMetric(total2.Seconds(), "apply2-bird-s")
		b.ReportMetric(float64(up2), "apply2-updates")
		b.ReportMetric(float64(bu2+bw2), "apply2-bird-changes")
		b.ReportMetric(100*float64(up2)/float64(max(up1, 1)), "apply2-updates-%")
		// Replacing 1 % of the lines is 1 % of the routes withdrawn and
		// 1 % announced: the difference, and all of it, is 2 % of the
		// first apply's route updates.
		b.ReportMetric(100*float64(bu2+bw2)/float64(max(bu1, 1)), "apply2-route-changes-%")
		b.ReportMetric(api3.Seconds(), "apply3-api-s")
		b.ReportMetric(float64(up3), "apply3-updates")
		b.ReportMetric(mb(peak), "MB-peak")
		b.ReportMetric(mb(settled), "MB-rss")
	}
}

// startSetDaemon starts ribkeeper for BenchmarkSets: as startBenchDaemon,
// with the IPv4 unicast family (RTBH) to its one neighbor.
func startSetDaemon(b testing.TB, rkPort int, peerAddr string, peerPort int) *benchDaemon {
	return startBenchDaemonFamilies(b, rkPort, peerAddr, peerPort, `"ipv4-unicast"`, rtbhTable)
}

// rtbhTable is the RTBH benchmarks' [rtbh] table: rtbhNextHop.
var rtbhTable = fmt.Sprintf("[rtbh]\nnext_hop_ipv4 = %q", rtbhNextHop)
