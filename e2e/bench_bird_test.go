package e2e

// Benchmarks of the whole ribkeeper binary against a real BIRD, each next
// to the same scenario with a raw GoBGP v4.8.0 process (rawProc) and the
// same kind of BIRD peer, in the same run. Sizes: RIBKEEPER_BENCH_RULES
// (default 100,000) and RIBKEEPER_BENCH_CHURN (default 1,000,000). Each
// benchmark body is one whole scenario; run them with -benchtime 1x.

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

const (
	apiBatch  = 1000 // rules per POST /v1/rules/batch
	churnLive = 10_000
	// churnMaxTime bounds the sending of ribkeeper's churn so that make
	// bench stays practical; the per-rule figures hold for any count.
	churnMaxTime = 5 * time.Minute
)

func mb(v int64) float64 { return float64(v) / (1 << 20) }

// BenchmarkBulk: N rules written through the API (batch endpoint, 1,000
// per request) until BIRD holds all N, against the same N paths handed to
// raw GoBGP with AddPath (2,000 native paths per call) until BIRD holds
// all N. Also the RSS of each process holding the N paths (settled 3 s
// after BIRD had them), the RSS growth per path over the same process with
// an empty table, the UPDATE messages that crossed the wire (a
// wireCounter between speaker and BIRD), and the CPU time the speaker's
// process used from the first write until BIRD held all N (cpu-s; BIRD's
// own as bird-cpu-s): on a shared machine they say what the load cost
// when the wall-clock figures are noisy.
//
// Ours and raw GoBGP run in rounds, in turn (bench_rounds_test.go), each
// run on a fresh process and a fresh BIRD; the parent measures, ours and
// gobgp report the medians and spread (and ours the ratio, round by
// round). ExaBGP runs once, for reference.
func BenchmarkBulk(b *testing.B) {
	n := benchRules(b)
	var ours, raw bulkSide
	for round := range bulkRounds(b) {
		inTurn(round, func() {
			inRound(b, func(tb *roundTB) { ours.runs = append(ours.runs, bulkOurs(tb, n, round)) })
		}, func() {
			inRound(b, func(tb *roundTB) { raw.runs = append(raw.runs, bulkRaw(tb, n)) })
		})
		b.Logf("round %d: ours %.0f rules/s (%.2f cpu-s), raw GoBGP %.0f rules/s (%.2f cpu-s): %.2f×", round+1,
			ours.runs[round].rate(), ours.runs[round].cpu.Seconds(), raw.runs[round].rate(), raw.runs[round].cpu.Seconds(),
			ours.runs[round].rate()/raw.runs[round].rate())
	}
	b.Run("ours", func(b *testing.B) { ours.report(b, &raw) })
	b.Run("gobgp", func(b *testing.B) { raw.report(b, nil) })
	// ExaBGP (Debian's, fed through its API process), for reference.
	b.Run("exabgp", func(b *testing.B) { benchBulkExaBGP(b, n) })
}

// bulkOurs is round (from 0) of BenchmarkBulk's ours: the built binary
// and a BIRD, both started for it.
func bulkOurs(b *roundTB, n, round int) bulkRun {
	d, bird, wc := startBenchPairCounted(b, true)
	r := bulkRun{n: n}
	r.rss0, _, _ = settledRSS(b, d.pid(), nil)
	r0 := wc.Reach()
	prof := d.profileWhile(b, "bulk-"+strconv.Itoa(round+1), benchEnv(b, "RIBKEEPER_BENCH_PROF_S", 8))
	cpu0, bird0 := cpuTime(b, d.pid()), cpuTime(b, bird.Pid())
	t0 := time.Now()
	addRules(b, d.client, 0, n, apiBatch, "")
	r.write = time.Since(t0)
	wc.waitReach(b, r0+int64(n), 10*time.Minute)
	r.el = waitCount(b, bird, "ft4", n, 10*time.Minute).Sub(t0)
	prof()
	r.cpu, r.birdCPU = cpuTime(b, d.pid())-cpu0, cpuTime(b, bird.Pid())-bird0
	r.updates = wc.Updates()
	r.rss, r.early, r.peak = settledRSS(b, d.pid(), nil)
	return r
}

// bulkRaw is one round of BenchmarkBulk's gobgp: a raw GoBGP process and a
// BIRD, both started for it.
func bulkRaw(b *roundTB, n int) bulkRun {
	raw := startRaw(b)
	bird := startBird(b, benchBirdAddr, raw.port)
	wc := startWireCounter(b, benchRelayAddr, benchSpeakerAddr, net.JoinHostPort(benchBirdAddr, strconv.Itoa(bird.Port)))
	raw.do(fmt.Sprintf("peer %s %d", wc.Addr, wc.Port))
	waitFor(b, 20*time.Second, "raw GoBGP session with BIRD", func() bool { return bird.Established(0) })
	r := bulkRun{n: n}
	r.rss0, _, _ = settledRSS(b, raw.pid(), func() { raw.do("release") })
	r0 := wc.Reach()
	cpu0, bird0 := cpuTime(b, raw.pid()), cpuTime(b, bird.Pid())
	t0 := time.Now()
	secs, _ := strconv.ParseFloat(raw.do(fmt.Sprintf("add 0 %d", n))[0], 64)
	r.write = time.Duration(secs * float64(time.Second))
	wc.waitReach(b, r0+int64(n), 10*time.Minute)
	r.el = waitCount(b, bird, "ft4", n, 10*time.Minute).Sub(t0)
	r.cpu, r.birdCPU = cpuTime(b, raw.pid())-cpu0, cpuTime(b, bird.Pid())-bird0
	r.updates = wc.Updates()
	r.rss, r.early, r.peak = settledRSS(b, raw.pid(), func() { raw.do("release") })
	return r
}

// BenchmarkTimeToMitigate: rules one at a time: from the start of a
// single POST /v1/rules until the UPDATE carrying it arrives at a peer (a
// timestamping stampPeer), p50/p99/max; beside ExaBGP 4.2 fed one
// "announce flow route" line at a time through its API process, to a
// peer of its own. Both run at once, write by write in turn, in rounds of
// 200 (see bench_latency_test.go). ack-p50-ms is when ribkeeper's answer
// (after the durable commit) arrived.
func BenchmarkTimeToMitigate(b *testing.B) {
	n := benchEnv(b, "RIBKEEPER_BENCH_TTW_N", 200)
	r := startLatencyRig(b)
	acks := make([]time.Duration, 0, n)
	prof := r.d.profileWhile(b, "ttm", benchEnv(b, "RIBKEEPER_BENCH_PROF_S", 2))
	cpu0 := cpuTime(b, r.d.pid())
	ours, exa := interleave(latencyRounds(b), n, func(k int) time.Duration {
		t0 := time.Now()
		if _, _, err := r.d.client.AddRule(context.Background(), api.AddRuleRequest{Text: ruleText(k), TTL: "1h"}); err != nil {
			b.Fatal(err)
		}
		acks = append(acks, time.Since(t0))
		return waitStamped(b, r.peer, t0).Sub(t0)
	}, func(k int) time.Duration {
		t0 := time.Now()
		r.exSend(b, exabgpFlow("announce", k))
		return waitStamped(b, r.exPeer, t0).Sub(t0)
	})
	cpu := cpuTime(b, r.d.pid()) - cpu0
	prof()
	b.Run("ours", func(b *testing.B) {
		ours.report(b, &exa)
		b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(len(ours.all)), "cpu-ms/write")
		b.ReportMetric(ms(quantile(slices.Sorted(slices.Values(acks)), 0.5)), "ack-p50-ms")
	})
	b.Run("exabgp", func(b *testing.B) { exa.report(b, nil) })
}

// BenchmarkRestart: N rules in the store, ribkeeper killed with SIGKILL,
// BIRD flushed; time from exec of the new process until BIRD holds all N.
// Baseline: raw GoBGP already holding N paths, time from AddPeer of a
// fresh BIRD until that BIRD holds all N (GoBGP's own initial sync).
// session-s is when BIRD first showed the session established. cpu-s is the CPU
// time the speaker's process used in that window (ribkeeper: since exec),
// bird-cpu-s BIRD's: on a shared machine they say where the time went
// when the wall-clock figures are noisy. Both speakers reach BIRD through
// a wireCounter, which dials BIRD itself (so both sessions start with
// the speaker's connect, not BIRD's retry), and BIRD is asked for its
// count only once N routes crossed it: a count walks BIRD's table. With
// both, BIRD's CPU in ours' window fell from 1.1-1.5 s to 0.3 s (raw:
// 0.15-0.28 s) at 100,000 rules.
func BenchmarkRestart(b *testing.B) {
	n := benchRules(b)
	report := func(b *testing.B, session, el, cpu, birdCPU time.Duration) {
		b.ReportMetric(float64(n), "rules")
		b.ReportMetric(session.Seconds(), "session-s")
		b.ReportMetric(el.Seconds(), "s")
		b.ReportMetric(float64(n)/el.Seconds(), "rules/s")
		b.ReportMetric(cpu.Seconds(), "cpu-s")
		b.ReportMetric(birdCPU.Seconds(), "bird-cpu-s")
	}
	b.Run("ours", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			d, bird, wc := startBenchPairCounted(b, true)
			addRules(b, d.client, 0, n, apiBatch, "")
			waitCount(b, bird, "ft4", n, 10*time.Minute)
			d.kill()
			waitCount(b, bird, "ft4", 0, time.Minute)
			r0 := wc.Reach()
			b.StartTimer()
			bird0 := cpuTime(b, bird.Pid())
			t0 := time.Now()
			d.start()
			session := waitEstablished(b, bird).Sub(t0)
			wc.waitReach(b, r0+int64(n), 10*time.Minute)
			el := waitCount(b, bird, "ft4", n, 10*time.Minute).Sub(t0)
			b.StopTimer()
			report(b, session, el, cpuTime(b, d.pid()), cpuTime(b, bird.Pid())-bird0)
		}
	})
	b.Run("gobgp", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			raw := startRaw(b)
			raw.do(fmt.Sprintf("add 0 %d", n))
			bird := startBird(b, benchBird2Addr, raw.port)
			wc := startWireCounter(b, benchRelayAddr, benchSpeakerAddr, net.JoinHostPort(benchBird2Addr, strconv.Itoa(bird.Port)))
			b.StartTimer()
			raw0, bird0 := cpuTime(b, raw.cmd.Process.Pid), cpuTime(b, bird.Pid())
			t0 := time.Now()
			raw.do(fmt.Sprintf("peer %s %d", wc.Addr, wc.Port))
			session := waitEstablished(b, bird).Sub(t0)
			wc.waitReach(b, int64(n), 10*time.Minute)
			el := waitCount(b, bird, "ft4", n, 10*time.Minute).Sub(t0)
			b.StopTimer()
			report(b, session, el, cpuTime(b, raw.cmd.Process.Pid)-raw0, cpuTime(b, bird.Pid())-bird0)
		}
	})
}

// BenchmarkRestartGR: N rules announced to a BIRD that is a graceful-
// restart helper ("graceful restart on"), ribkeeper's neighbor with
// graceful_restart = true; ribkeeper killed with SIGKILL and started
// again once a rule with a short TTL has expired meanwhile. A sampler
// reads BIRD's table size over one control connection from before the
// kill until BIRD has swept the expired rule (it does that at the new
// session's End-of-RIB): min-pct is the smallest table seen as a
// percentage of the N live rules (100 = no gap), back-s the time from
// exec until the session was re-established, swept-s until the sweep,
// samples and gap-max-ms how densely BIRD was read.
func BenchmarkRestartGR(b *testing.B) {
	n := benchRules(b)
	for range b.N {
		b.StopTimer()
		birdtest.Binary(b)
		rkPort := birdtest.FreePort(b, benchSpeakerAddr)
		bird := birdtest.Start(b, birdtest.Options{Address: benchBirdAddr, ASN: 65001, GracefulRestart: true,
			Peers: []birdtest.Peer{{Address: benchSpeakerAddr, Port: rkPort, ASN: 65000}}})
		d := startBenchDaemon(b, rkPort, benchBirdAddr, bird.Port, "graceful_restart = true\nrestart_time = \"300s\"")
		waitFor(b, 60*time.Second, "BGP session with BIRD established", func() bool { return bird.Established(0) })
		addRules(b, d.client, 0, n, apiBatch, "")
		// The load first: the short rule's 3 s must not pass while the
		// speaker still catches up with the load (it would expire before
		// its turn and never reach BIRD).
		waitCount(b, bird, "ft4", n, 10*time.Minute)
		short, _, err := d.client.AddRule(context.Background(), api.AddRuleRequest{Text: ruleText(n), TTL: "3s"})
		if err != nil {
			b.Fatal(err)
		}
		waitCount(b, bird, "ft4", n+1, 10*time.Minute)
		since, err := bird.Since(0)
		if err != nil {
			b.Fatal(err)
		}
		ctl, err := bird.Dial()
		if err != nil {
			b.Fatal(err)
		}
		type sample struct {
			at time.Time
			n  int
		}
		var (
			mu      sync.Mutex
			samples []sample
			stop    = make(chan struct{})
			done    = make(chan struct{})
		)
		go func() {
			defer close(done)
			defer ctl.Close()
			for {
				c, err := ctl.Count("ft4")
				if err == nil {
					mu.Lock()
					samples = append(samples, sample{time.Now(), c})
					mu.Unlock()
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
		b.StartTimer()
		d.kill()
		waitFor(b, time.Minute, "the short rule's TTL passed while ribkeeper is down", func() bool { return time.Now().After(*short.ExpiresAt) })
		t0 := time.Now()
		d.start()
		waitFor(b, 2*time.Minute, "BIRD session re-established", func() bool {
			s2, err := bird.Since(0)
			return err == nil && !birdtest.SameSince(s2, since) && bird.Established(0)
		})
		back := time.Since(t0)
		swept := waitCount(b, bird, "ft4", n, 2*time.Minute).Sub(t0)
		b.StopTimer()
		close(stop)
		<-done
		least, maxGap := n, time.Duration(0)
		for i, s := range samples {
			least = min(least, s.n)
			if i > 0 {
				maxGap = max(maxGap, s.at.Sub(samples[i-1].at))
			}
		}
		b.ReportMetric(float64(n), "rules")
		b.ReportMetric(100*float64(least)/float64(n), "min-pct")
		b.ReportMetric(back.Seconds(), "back-s")
		b.ReportMetric(swept.Seconds(), "swept-s")
		b.ReportMetric(float64(len(samples)), "samples")
		b.ReportMetric(float64(maxGap)/float64(time.Millisecond), "gap-max-ms")
	}
}

// waitEstablished polls BIRD every 20 ms until its session is up.
func waitEstablished(b testing.TB, bird *birdtest.Router) time.Time {
	waitFor(b, time.Minute, "BGP session with BIRD established", func() bool { return bird.Established(0) })
	return time.Now()
}

// BenchmarkChurn: RIBKEEPER_BENCH_CHURN distinct rules pass through a live
// set of about 10,000 and all are gone again; then the settled RSS and its
// growth per distinct rule ever announced. ribkeeper: batches of 1,000
// through the API with a 1 s TTL, paced at 10,000 rules/s at most and
// never above 10,000 routes in BIRD (max-live), so expiry removes them.
// Raw GoBGP: AddPath of each rule and DeletePath of the one added 10,000
// earlier. Sending stops after churnMaxTime; then both sides churn the
// count ribkeeper reached. GoBGP v4.8.0 keeps a table destination per
// distinct withdrawn NLRI (../shared/GOBGP-NOTES.md); ribkeeper compacts.
// Whether memory stays bounded is judged on the live heap of both
// processes, read cycle by cycle from GODEBUG=gctrace=1, over two equal
// windows after warm-up (bench_churnmem_test.go).
func BenchmarkChurn(b *testing.B) {
	total := benchEnv(b, "RIBKEEPER_BENCH_CHURN", 1_000_000)
	// Both processes (ribkeeper, the raw helper) inherit it.
	b.Setenv("GODEBUG", "gctrace=1")
	// windows reports the memory of the churn from t0 to end of a process
	// started at started, whose stderr is in logPath.
	windows := func(b *testing.B, t0, end time.Time, rss []rssSample, logPath string, started time.Time) {
		data, err := os.ReadFile(logPath)
		if err != nil {
			b.Fatal(err)
		}
		w := churnWindows(t0, end)
		cycles, compactions := gcCycles(data, started), compactionTimes(data)
		for i := range w {
			w[i].fill(cycles, rss, compactions)
		}
		b.Logf("live heap floor %.0f then %.0f MB (peaks %.0f, %.0f; %d and %d GC cycles; %d and %d compactions)",
			mb(w[0].liveFloor), mb(w[1].liveFloor), mb(w[0].livePeak), mb(w[1].livePeak), w[0].cycles, w[1].cycles, w[0].compactions, w[1].compactions)
		reportWindows(b, w)
	}
	report := func(b *testing.B, el time.Duration, rss0, cur, early, peak int64) {
		b.ReportMetric(float64(total), "rules")
		b.ReportMetric(float64(total)/el.Seconds(), "rules/s")
		b.ReportMetric(mb(rss0), "MB-rss-before")
		b.ReportMetric(mb(cur), "MB-rss")
		b.ReportMetric(mb(early), "MB-rss-3s")
		b.ReportMetric(mb(peak), "MB-peak")
		b.ReportMetric(float64(cur-rss0)/float64(total), "B-rss/churned")
	}
	b.Run("ours", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			d, bird := startBenchPair(b)
			rss0, _, _ := settledRSS(b, d.pid(), nil)
			b.StartTimer()
			const ttl = time.Second
			rate := float64(churnLive) / ttl.Seconds()
			sampler := sampleRSS(b, d.pid())
			t0 := time.Now()
			maxLive := 0
			stop := t0.Add(churnMaxTime)
			for i := 0; i < total; i += apiBatch {
				if time.Now().After(stop) {
					b.Logf("churn stopped at %d rules after %v; the raw GoBGP side churns as many", i, churnMaxTime)
					total = i
					break
				}
				if wait := time.Until(t0.Add(time.Duration(float64(i) / rate * float64(time.Second)))); wait > 0 {
					time.Sleep(wait)
				}
				// Keep the live set at 10,000 even when expiry lags
				// behind the TTL: wait for BIRD to lose the excess.
				for {
					live, err := bird.Count("ft4")
					if err != nil {
						b.Fatal(err)
					}
					maxLive = max(maxLive, live)
					if live+apiBatch <= churnLive {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				addRules(b, d.client, i, min(i+apiBatch, total), apiBatch, ttl.String())
			}
			end := waitCount(b, bird, "ft4", 0, 10*time.Minute)
			el := end.Sub(t0)
			b.StopTimer()
			windows(b, t0, end, sampler(), filepath.Join(d.dir, "ribkeeper.log"), d.started)
			cur, early, peak := settledRSS(b, d.pid(), nil)
			report(b, el, rss0, cur, early, peak)
			b.ReportMetric(float64(maxLive), "max-live")
		}
	})
	b.Run("gobgp", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			raw := startRaw(b)
			bird := startBird(b, benchBirdAddr, raw.port)
			raw.do(fmt.Sprintf("peer %s %d", benchBirdAddr, bird.Port))
			waitFor(b, 20*time.Second, "raw GoBGP session with BIRD", func() bool { return bird.Established(0) })
			rss0, _, _ := settledRSS(b, raw.pid(), func() { raw.do("release") })
			b.StartTimer()
			sampler := sampleRSS(b, raw.pid())
			t0 := time.Now()
			raw.do(fmt.Sprintf("churn %d %d", total, churnLive))
			end := waitCount(b, bird, "ft4", 0, 10*time.Minute)
			el := end.Sub(t0)
			b.StopTimer()
			windows(b, t0, end, sampler(), raw.errLog, raw.started)
			cur, early, peak := settledRSS(b, raw.pid(), func() { raw.do("release") })
			report(b, el, rss0, cur, early, peak)
		}
	})
}
