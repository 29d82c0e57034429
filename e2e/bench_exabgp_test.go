package e2e

// ExaBGP as a sender, for comparison rows in the benchmarks (issue 10):
// Debian's exabgp fed through its API process (exabgptest.Speaker.Send)
// pushes the same rules as ruleText(i). benchBulkExaBGP(b, n) is the body
// of BenchmarkBulk/exabgp beside "ours" and "gobgp": N rules until BIRD
// holds them all, the UPDATEs counted on the wire. The latency
// benchmarks run ExaBGP beside ours at once instead (startLatencyRig,
// bench_latency_test.go).

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"github.com/ribkeeper/ribkeeper/e2e/exabgptest"
)

// exabgpFlow is ruleText(i) in ExaBGP's API syntax: destination
// 10.x.x.x/32, UDP, destination port 53, discard (traffic-rate 0).
func exabgpFlow(verb string, i int) string {
	return fmt.Sprintf("%s flow route destination 10.%d.%d.%d/32 protocol =udp destination-port =53 discard",
		verb, i>>16&255, i>>8&255, i&255)
}

// exabgpFlowNet is rule i as BIRD shows it.
func exabgpFlowNet(i int) string {
	return fmt.Sprintf("flow4 { dst 10.%d.%d.%d/32; proto 17; dport 53; }", i>>16&255, i>>8&255, i&255)
}

// startExaBGPSender starts a BIRD on benchBirdAddr and an ExaBGP on
// benchSpeakerAddr peering with it (AS 65000 → 65001, FlowSpec and
// unicast), and waits for the session.
func startExaBGPSender(b testing.TB) (*exabgptest.Speaker, *birdtest.Router) {
	s, bird, _ := startExaBGPSenderCounted(b, false)
	return s, bird
}

// startExaBGPSenderCounted is startExaBGPSender with, if count is set, a
// wireCounter between ExaBGP and BIRD.
func startExaBGPSenderCounted(b testing.TB, count bool) (*exabgptest.Speaker, *birdtest.Router, *wireCounter) {
	b.Helper()
	birdtest.Binary(b)
	exabgptest.Binary(b)
	port := birdtest.FreePort(b, benchSpeakerAddr)
	bird := startBird(b, benchBirdAddr, port)
	peerAddr, peerPort := benchBirdAddr, bird.Port
	var wc *wireCounter
	if count {
		wc = startWireCounter(b, benchRelayAddr, benchSpeakerAddr, net.JoinHostPort(benchBirdAddr, strconv.Itoa(bird.Port)))
		peerAddr, peerPort = wc.Addr, wc.Port
	}
	s := exabgptest.Start(b, exabgptest.Options{Address: benchSpeakerAddr, Port: port, ASN: 65000,
		Peers: []exabgptest.Peer{{Address: peerAddr, Port: peerPort, ASN: 65001}}})
	waitFor(b, 60*time.Second, "ExaBGP session with BIRD established", func() bool { return bird.Established(0) })
	return s, bird, wc
}

// exabgpSend hands ExaBGP commands for rules [from, to) in writes of up to
// 1,000 lines.
func exabgpSend(b testing.TB, s *exabgptest.Speaker, verb string, from, to int) {
	b.Helper()
	cmds := make([]string, 0, 1000)
	for i := from; i < to; i++ {
		cmds = append(cmds, exabgpFlow(verb, i))
		if len(cmds) == cap(cmds) || i == to-1 {
			if err := s.Send(cmds...); err != nil {
				b.Fatalf("write to ExaBGP's API process: %v", err)
			}
			cmds = cmds[:0]
		}
	}
}

// exabgpPushToBIRD announces rules [0, n) through ExaBGP's API and returns
// how long it took until BIRD held all n (from the first command written),
// and the time spent writing the commands. With a wire counter (wc not
// nil), BIRD is asked only once n routes crossed it.
func exabgpPushToBIRD(b testing.TB, s *exabgptest.Speaker, bird *birdtest.Router, wc *wireCounter, n int) (el, write time.Duration) {
	b.Helper()
	var r0 int64
	if wc != nil {
		r0 = wc.Reach()
	}
	t0 := time.Now()
	exabgpSend(b, s, "announce", 0, n)
	write = time.Since(t0)
	if wc != nil {
		wc.waitReach(b, r0+int64(n), 10*time.Minute)
	}
	return waitCount(b, bird, "ft4", n, 10*time.Minute).Sub(t0), write
}

// benchBulkExaBGP is BenchmarkBulk's scenario with ExaBGP as the sender:
// N rules handed to ExaBGP's API process until BIRD holds all N, and
// ExaBGP's RSS (Python; settled, no release hook).
func benchBulkExaBGP(b *testing.B, n int) {
	for range b.N {
		b.StopTimer()
		s, bird, wc := startExaBGPSenderCounted(b, true)
		rss0, _, _ := settledRSS(b, s.Pid(), nil)
		b.StartTimer()
		el, write := exabgpPushToBIRD(b, s, bird, wc, n)
		b.StopTimer()
		cur, early, peak := settledRSS(b, s.Pid(), nil)
		b.ReportMetric(float64(wc.Updates()), "updates")
		b.ReportMetric(float64(n), "rules")
		b.ReportMetric(float64(n)/el.Seconds(), "rules/s")
		b.ReportMetric(write.Seconds(), "write-s")
		b.ReportMetric(mb(cur), "MB-rss")
		b.ReportMetric(mb(early), "MB-rss-3s")
		b.ReportMetric(float64(early-rss0)/float64(n), "B-rss-3s/path")
		b.ReportMetric(mb(peak), "MB-peak")
		b.ReportMetric(float64(cur-rss0)/float64(n), "B-rss/path")
	}
}

// waitStamped returns the arrival time of the next UPDATE that announces
// FlowSpec NLRI (End-of-RIB and other UPDATEs are skipped), failing after
// 30 s.
func waitStamped(b testing.TB, peer *stampPeer, since time.Time) time.Time {
	b.Helper()
	return nextUpdate(b, peer, since, "UPDATE", func(u stampedUpdate) bool { return len(u.Reach) > 0 })
}

// nextUpdate returns the arrival time of the next UPDATE at peer that
// wanted accepts (others are skipped), failing after 30 s.
func nextUpdate(b testing.TB, peer *stampPeer, since time.Time, what string, wanted func(stampedUpdate) bool) time.Time {
	b.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case u := <-peer.Updates:
			if wanted(u) {
				return u.At
			}
		case <-timeout:
			b.Fatalf("no %s at the stamp peer within 30s of %v (session up %v, err %v)", what, since.Format(time.StampMicro), peer.Established(), peer.Err())
		}
	}
}

// reportLatency reports p50, p99 and max of lat in ms.
func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	ms := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
	b.ReportMetric(ms(1), "max-ms")
}

// The sender helper itself: rules announced through ExaBGP's API reach
// BIRD decoded as meant (the benchmarks' shape: /32, UDP, port 53,
// discard), and withdrawals take them away again.
func TestExaBGPSenderToBIRD(t *testing.T) {
	const n = 300
	s, bird := startExaBGPSender(t)
	el, _ := exabgpPushToBIRD(t, s, bird, nil, n)
	t.Logf("ExaBGP %s → BIRD: %d rules in %v", exabgptest.Version(t), n, el.Round(time.Millisecond))
	routes := bird.WaitRoutes(t, "ft4", 30*time.Second, "all rules", func(m map[string]birdtest.Route) bool { return len(m) == n })
	for i := range n {
		r, ok := routes[exabgpFlowNet(i)]
		if !ok || r.Attrs["BGP.ext_community"] != discardExt {
			t.Fatalf("BIRD: %s missing or not discard: %v", exabgpFlowNet(i), r.Attrs)
		}
		// The same rule as the other senders' rule i.
		dst := strings.TrimSuffix(strings.Fields(exabgpFlowNet(i))[3], ";")
		if want := "match destination " + dst + " protocol ==17 destination-port ==53 then discard"; ruleText(i) != want {
			t.Fatalf("rule %d: ExaBGP sends %s, the other senders %s", i, want, ruleText(i))
		}
	}
	exabgpSend(t, s, "withdraw", 0, n/2)
	waitCount(t, bird, "ft4", n-n/2, 30*time.Second)
	routes, err := bird.Routes("ft4")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := routes[exabgpFlowNet(0)]; ok {
		t.Errorf("withdrawn %s still in BIRD", exabgpFlowNet(0))
	}
	if _, ok := routes[exabgpFlowNet(n-1)]; !ok {
		t.Errorf("%s gone from BIRD although not withdrawn", exabgpFlowNet(n-1))
	}
}
