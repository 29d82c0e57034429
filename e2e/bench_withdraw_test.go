package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/api"
)

// BenchmarkTimeToWithdraw: rules announced one at a time (each waited
// for at the peer), then withdrawn one at a time: from the start of a
// single DELETE /v1/rules/{id} until the UPDATE withdrawing it arrives at
// a timestamping stampPeer, p50/p99/max; beside ExaBGP 4.2 fed one
// "withdraw flow route" line at a time through its API process, to a peer
// of its own. Both run at once, write by write in turn, in rounds of 200:
// each round announces its 200 rules on both sides (untimed), then
// withdraws them (see bench_latency_test.go). ack-p50-ms is when
// ribkeeper's answer (after the durable commit) arrived.
func BenchmarkTimeToWithdraw(b *testing.B) {
	n := benchEnv(b, "RIBKEEPER_BENCH_TTW_N", 200)
	r := startLatencyRig(b)
	ids := map[int]int64{}
	acks := make([]time.Duration, 0, n)
	var cpu time.Duration
	var ours, exa latencySide
	for round := range latencyRounds(b) {
		for i := range n {
			k := round*n + i
			t0 := time.Now()
			rule, _, err := r.d.client.AddRule(context.Background(), api.AddRuleRequest{Text: ruleText(k), TTL: "1h"})
			if err != nil {
				b.Fatal(err)
			}
			ids[k] = rule.ID
			waitStamped(b, r.peer, t0)
			t0 = time.Now()
			r.exSend(b, exabgpFlow("announce", k))
			waitStamped(b, r.exPeer, t0)
		}
		prof := func() {}
		if round == 0 {
			prof = r.d.profileWhile(b, "ttw", benchEnv(b, "RIBKEEPER_BENCH_PROF_S", 2))
		}
		cpu0 := cpuTime(b, r.d.pid())
		o, e := interleave(1, n, func(i int) time.Duration {
			k := round*n + i
			t0 := time.Now()
			if _, err := r.d.client.WithdrawRule(context.Background(), ids[k]); err != nil {
				b.Fatal(err)
			}
			acks = append(acks, time.Since(t0))
			return waitWithdrawal(b, r.peer, t0).Sub(t0)
		}, func(i int) time.Duration {
			t0 := time.Now()
			r.exSend(b, exabgpFlow("withdraw", round*n+i))
			return waitWithdrawal(b, r.exPeer, t0).Sub(t0)
		})
		cpu += cpuTime(b, r.d.pid()) - cpu0
		prof()
		ours.endRound(o.all)
		exa.endRound(e.all)
	}
	b.Run("ours", func(b *testing.B) {
		ours.report(b, &exa)
		b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(len(ours.all)), "cpu-ms/write")
		b.ReportMetric(ms(quantile(slices.Sorted(slices.Values(acks)), 0.5)), "ack-p50-ms")
	})
	b.Run("exabgp", func(b *testing.B) { exa.report(b, nil) })
}

// waitWithdrawal returns the arrival time of the next UPDATE that
// withdraws FlowSpec NLRI (other UPDATEs are skipped), failing after 30 s.
func waitWithdrawal(b testing.TB, peer *stampPeer, since time.Time) time.Time {
	b.Helper()
	return nextUpdate(b, peer, since, "withdrawal", func(u stampedUpdate) bool { return len(u.Unreach) > 0 })
}
