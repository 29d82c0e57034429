package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"github.com/ribkeeper/ribkeeper/e2e/exabgptest"
)

// BenchmarkTimeToWithdraw: 200 rules announced one at a time (each
// waited for at the peer), then withdrawn one at a time: from the start of
// a single DELETE /v1/rules/{id} until the UPDATE withdrawing it arrives
// at a timestamping stampPeer, p50/p99/max; beside ExaBGP 4.2 fed one
// "withdraw flow route" line at a time through its API process, to the
// same kind of peer. ack-p50-ms is when ribkeeper's answer (after the
// durable commit) arrived. The shape of BenchmarkTimeToMitigate.
func BenchmarkTimeToWithdraw(b *testing.B) {
	n := benchEnv(b, "RIBKEEPER_BENCH_TTW_N", 200)
	b.Run("ours", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			peer, peerPort := startStampPeer(b, benchBirdAddr, 65001)
			d := startBenchDaemon(b, birdtest.FreePort(b, benchSpeakerAddr), benchBirdAddr, peerPort, "")
			waitFor(b, 60*time.Second, "ribkeeper session with the stamp peer", peer.Established)
			ids := make([]int64, n)
			for i := range n {
				t0 := time.Now()
				r, _, err := d.client.AddRule(context.Background(), api.AddRuleRequest{Text: ruleText(i), TTL: "1h"})
				if err != nil {
					b.Fatal(err)
				}
				ids[i] = r.ID
				waitStamped(b, peer, t0)
			}
			lat := make([]time.Duration, 0, n)
			acks := make([]time.Duration, 0, n)
			prof := d.profileWhile(b, "ttw", benchEnv(b, "RIBKEEPER_BENCH_PROF_S", 2))
			cpu0 := cpuTime(b, d.pid())
			b.StartTimer()
			for _, id := range ids {
				t0 := time.Now()
				if _, err := d.client.WithdrawRule(context.Background(), id); err != nil {
					b.Fatal(err)
				}
				acks = append(acks, time.Since(t0))
				lat = append(lat, waitWithdrawal(b, peer, t0).Sub(t0))
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime(b, d.pid())-cpu0)/float64(time.Millisecond)/float64(n), "cpu-ms/write")
			prof()
			reportLatency(b, lat)
			slices.Sort(acks)
			b.ReportMetric(float64(acks[len(acks)/2])/float64(time.Millisecond), "ack-p50-ms")
		}
	})
	b.Run("exabgp", func(b *testing.B) { benchTTWExaBGP(b, n) })
}

// benchTTWExaBGP: n rules announced through ExaBGP's API one at a time
// (each waited for at the peer), then for each the time from writing one
// "withdraw flow route" line until the UPDATE withdrawing it arrives at a
// timestamping BGP peer (stampPeer on benchBirdAddr). Reports p50/p99/max
// in ms.
func benchTTWExaBGP(b *testing.B, n int) {
	for range b.N {
		b.StopTimer()
		exabgptest.Binary(b)
		peer, peerPort := startStampPeer(b, benchBirdAddr, 65001)
		s := exabgptest.Start(b, exabgptest.Options{Address: benchSpeakerAddr, ASN: 65000,
			Peers: []exabgptest.Peer{{Address: benchBirdAddr, Port: peerPort, ASN: 65001}}})
		waitFor(b, 60*time.Second, "ExaBGP session with the stamp peer", peer.Established)
		for i := range n {
			t0 := time.Now()
			if err := s.Send(exabgpFlow("announce", i)); err != nil {
				b.Fatalf("write to ExaBGP's API process: %v", err)
			}
			waitStamped(b, peer, t0)
		}
		lat := make([]time.Duration, 0, n)
		b.StartTimer()
		for i := range n {
			t0 := time.Now()
			if err := s.Send(exabgpFlow("withdraw", i)); err != nil {
				b.Fatalf("write to ExaBGP's API process: %v", err)
			}
			lat = append(lat, waitWithdrawal(b, peer, t0).Sub(t0))
		}
		b.StopTimer()
		reportLatency(b, lat)
	}
}

// waitWithdrawal returns the arrival time of the next UPDATE that
// withdraws FlowSpec NLRI (other UPDATEs are skipped), failing after 30 s.
func waitWithdrawal(b testing.TB, peer *stampPeer, since time.Time) time.Time {
	b.Helper()
	return nextUpdate(b, peer, since, "withdrawal", func(u stampedUpdate) bool { return len(u.Unreach) > 0 })
}
