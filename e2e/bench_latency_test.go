package e2e

// Single-write latency benchmarks compare two senders whose p50 differ by
// a tenth of a millisecond and whose p99 is the second-largest of 200
// samples. Run one after the other, each side met a different machine:
// on the shared 2-core host a comparison flipped between two runs of the
// same code. So the latency benchmarks (TimeToMitigate, TimeToWithdraw,
// SignalToUpdate) run both sides at once, alternate them write by write
// (the side that goes first alternating too, so neither always follows
// the other's after-work), and repeat the 200-write scenario in
// rounds (RIBKEEPER_BENCH_LAT_ROUNDS, default 5). Each side reports its
// figures over all rounds pooled (p50-ms, p99-ms, max-ms), the spread of
// the per-round figures (p50-lo-ms … p99-hi-ms), and, on ours, in how
// many rounds it was at or below the other side (rounds-p50-le,
// rounds-p99-le).

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"github.com/ribkeeper/ribkeeper/e2e/exabgptest"
)

// latencyRounds is RIBKEEPER_BENCH_LAT_ROUNDS (default 5).
func latencyRounds(b testing.TB) int { return benchEnv(b, "RIBKEEPER_BENCH_LAT_ROUNDS", 5) }

// latencySide is one side's latencies, round by round.
type latencySide struct {
	all        []time.Duration
	p50s, p99s []time.Duration
}

// endRound adds one round's latencies.
func (s *latencySide) endRound(round []time.Duration) {
	if len(round) == 0 {
		return
	}
	s.all = append(s.all, round...)
	sorted := slices.Sorted(slices.Values(round))
	s.p50s = append(s.p50s, quantile(sorted, 0.50))
	s.p99s = append(s.p99s, quantile(sorted, 0.99))
}

// quantile is the q-quantile of sorted (not empty).
func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// report reports the pooled figures and the per-round spread; with other
// set, also in how many rounds s was at or below other.
func (s *latencySide) report(b *testing.B, other *latencySide) {
	b.Helper()
	if len(s.all) == 0 {
		b.Fatal("no latencies measured")
	}
	reportLatency(b, slices.Clone(s.all))
	b.ReportMetric(float64(len(s.p50s)), "rounds")
	b.ReportMetric(ms(slices.Min(s.p50s)), "p50-lo-ms")
	b.ReportMetric(ms(slices.Max(s.p50s)), "p50-hi-ms")
	b.ReportMetric(ms(slices.Min(s.p99s)), "p99-lo-ms")
	b.ReportMetric(ms(slices.Max(s.p99s)), "p99-hi-ms")
	if other == nil {
		return
	}
	le := func(a, o []time.Duration) (n int) {
		for i := range min(len(a), len(o)) {
			if a[i] <= o[i] {
				n++
			}
		}
		return n
	}
	b.ReportMetric(float64(le(s.p50s, other.p50s)), "rounds-p50-le")
	b.ReportMetric(float64(le(s.p99s, other.p99s)), "rounds-p99-le")
}

// interleave runs rounds of n writes on each of two sides, a and c,
// alternating write by write, and which of the two goes first alternating
// from one write to the next. a(k) and c(k) each make their side's write k
// (k = round*n + i, distinct over the whole run) and return its latency.
func interleave(rounds, n int, a, c func(k int) time.Duration) (sa, sc latencySide) {
	for round := range rounds {
		la := make([]time.Duration, 0, n)
		lc := make([]time.Duration, 0, n)
		for i := range n {
			k := round*n + i
			inTurn(i, func() { la = append(la, a(k)) }, func() { lc = append(lc, c(k)) })
		}
		sa.endRound(la)
		sc.endRound(lc)
	}
	return sa, sc
}

// TestLatencySideReport checks the arithmetic the latency benchmarks
// report: pooled quantiles, the per-round spread and the rounds won.
func TestLatencySideReport(t *testing.T) {
	var order []string
	a, c := interleave(2, 4,
		func(k int) time.Duration {
			order = append(order, "a"+strconv.Itoa(k))
			return time.Duration(k+1) * time.Millisecond
		},
		func(k int) time.Duration {
			order = append(order, "c"+strconv.Itoa(k))
			return time.Duration(10-k) * time.Millisecond
		})
	want := "a0 c0 c1 a1 a2 c2 c3 a3 a4 c4 c5 a5 a6 c6 c7 a7"
	if got := strings.Join(order, " "); got != want {
		t.Fatalf("order %s, want %s", got, want)
	}
	// a: round 0 = 1..4 ms, round 1 = 5..8 ms; c: round 0 = 10..7, round 1 = 6..3.
	if got := ms(a.p50s[0]); got != 3 {
		t.Errorf("a round 0 p50 %v, want 3", got)
	}
	if got := ms(a.p99s[1]); got != 8 {
		t.Errorf("a round 1 p99 %v, want 8", got)
	}
	if got := ms(c.p50s[1]); got != 5 {
		t.Errorf("c round 1 p50 %v, want 5", got)
	}
	if len(a.all) != 8 || len(c.all) != 8 {
		t.Fatalf("pooled %d / %d, want 8 / 8", len(a.all), len(c.all))
	}
	pooled := slices.Sorted(slices.Values(a.all))
	if got := ms(quantile(pooled, 0.5)); got != 5 {
		t.Errorf("a pooled p50 %v, want 5", got)
	}
}

// latencyRig is the built daemon and ExaBGP, each peering with its own
// timestamping peer, both up at once for interleave.
type latencyRig struct {
	d            *benchDaemon
	peer, exPeer *stampPeer
	ex           *exabgptest.Speaker
}

// startLatencyRig starts both sides and waits for both sessions.
func startLatencyRig(b *testing.B) *latencyRig {
	b.Helper()
	exabgptest.Binary(b)
	r := &latencyRig{}
	peer, peerPort := startStampPeer(b, benchBirdAddr, 65001)
	r.peer = peer
	r.d = startBenchDaemon(b, birdtest.FreePort(b, benchSpeakerAddr), benchBirdAddr, peerPort, "")
	exPeer, exPort := startStampPeer(b, benchBirdAddr, 65001)
	r.exPeer = exPeer
	r.ex = exabgptest.Start(b, exabgptest.Options{Address: benchSpeakerAddr, ASN: 65000,
		Peers: []exabgptest.Peer{{Address: benchBirdAddr, Port: exPort, ASN: 65001}}})
	waitFor(b, 60*time.Second, "ribkeeper session with the stamp peer", peer.Established)
	waitFor(b, 60*time.Second, "ExaBGP session with the stamp peer", exPeer.Established)
	return r
}

// exSend writes one command to ExaBGP's API process.
func (r *latencyRig) exSend(b testing.TB, cmd string) {
	if err := r.ex.Send(cmd); err != nil {
		b.Fatalf("write to ExaBGP's API process: %v", err)
	}
}
