package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// benchSignalSecret signs the benchmark's webhook signals.
const benchSignalSecret = "bench-signal-secret-0123456789"

// BenchmarkSignalToUpdate: attacks one at a time: from the start of a
// signed webhook signal (POST /v1/signals/NAME, a start for a new target)
// until the UPDATE carrying the rule its playbook made arrives at a
// timestamping peer, p50/p99/max; beside it, in the same daemon, single
// POST /v1/rules (post-p50-ms, post-p99-ms), the two write by write in
// turn, in rounds of 200 each (see bench_latency_test.go). The signal's
// path adds the webhook's checks, the correlation into a new incident and
// the playbook's rendering before the same gate and early announcement.
func BenchmarkSignalToUpdate(b *testing.B) {
	const n = 200
	playbook := fmt.Sprintf(`
[[source]]
name = "bench"
kind = "webhook"
secret = %q
max_new_rules_per_minute = -1

[[playbook]]
name = "dns-flood"
sources = ["bench"]
quiet_after = "10m"
hold_down = "1m"

[[playbook.step]]
rules = ["match destination {target} protocol {protocol} destination-port {dst_ports} then discard"]
ttl = "1h"
`, benchSignalSecret)
	peer, peerPort := startStampPeer(b, benchBirdAddr, 65001)
	d := startBenchDaemon(b, birdtest.FreePort(b, benchSpeakerAddr), benchBirdAddr, peerPort, playbook)
	waitFor(b, 60*time.Second, "ribkeeper session with the stamp peer", peer.Established)
	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", d.socket)
		}}}
	sig, post := interleave(latencyRounds(b), n, func(k int) time.Duration {
		body := fmt.Appendf(nil, `{"signals":[{"target":"10.%d.%d.%d","state":"start","protocol":"udp","dst_ports":[53],"pps":250000}]}`, k>>16&255, k>>8&255, k&255)
		t0 := time.Now()
		ts := strconv.FormatInt(t0.Unix(), 10)
		m := hmac.New(sha256.New, []byte(benchSignalSecret))
		m.Write([]byte(ts + "."))
		m.Write(body)
		req, _ := http.NewRequest(http.MethodPost, "http://ribkeeper/v1/signals/bench", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Ribkeeper-Timestamp", ts)
		req.Header.Set("X-Ribkeeper-Signature", "sha256="+hex.EncodeToString(m.Sum(nil)))
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("signal %d: %s: %s", k, resp.Status, answer)
		}
		return waitStamped(b, peer, t0).Sub(t0)
	}, func(k int) time.Duration {
		t0 := time.Now()
		if _, _, err := d.client.AddRule(context.Background(), api.AddRuleRequest{Text: ruleText(1<<16 + k), TTL: "1h"}); err != nil {
			b.Fatal(err)
		}
		return waitStamped(b, peer, t0).Sub(t0)
	})
	sig.report(b, nil)
	pooled := slices.Sorted(slices.Values(post.all))
	b.ReportMetric(ms(quantile(pooled, 0.5)), "post-p50-ms")
	b.ReportMetric(ms(quantile(pooled, 0.99)), "post-p99-ms")
	b.ReportMetric(ms(slices.Min(post.p99s)), "post-p99-lo-ms")
	b.ReportMetric(ms(slices.Max(post.p99s)), "post-p99-hi-ms")
}
