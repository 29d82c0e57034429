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

// BenchmarkSignalToUpdate: 200 attacks, one at a time: from the start of
// a signed webhook signal (POST /v1/signals/NAME, a start for a new
// target) until the UPDATE carrying the rule its playbook made arrives at
// a timestamping peer, p50/p99/max; beside it, in the same daemon and
// run, 200 single POST /v1/rules (post-p50-ms, post-p99-ms). The signal's
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
	for range b.N {
		b.StopTimer()
		peer, peerPort := startStampPeer(b, benchBirdAddr, 65001)
		d := startBenchDaemon(b, birdtest.FreePort(b, benchSpeakerAddr), benchBirdAddr, peerPort, playbook)
		waitFor(b, 60*time.Second, "ribkeeper session with the stamp peer", peer.Established)
		hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", d.socket)
			}}}
		sig := make([]time.Duration, 0, n)
		post := make([]time.Duration, 0, n)
		b.StartTimer()
		for i := range n {
			body := fmt.Appendf(nil, `{"signals":[{"target":"10.%d.%d.%d","state":"start","protocol":"udp","dst_ports":[53],"pps":250000}]}`, i>>16&255, i>>8&255, i&255)
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
				b.Fatalf("signal %d: %s: %s", i, resp.Status, answer)
			}
			sig = append(sig, waitStamped(b, peer, t0).Sub(t0))
		}
		for i := range n {
			t0 := time.Now()
			if _, _, err := d.client.AddRule(context.Background(), api.AddRuleRequest{Text: ruleText(1<<16 + i), TTL: "1h"}); err != nil {
				b.Fatal(err)
			}
			post = append(post, waitStamped(b, peer, t0).Sub(t0))
		}
		b.StopTimer()
		reportLatency(b, sig)
		slices.Sort(post)
		ms := func(l []time.Duration, q float64) float64 {
			return float64(l[min(len(l)-1, int(q*float64(len(l))))]) / float64(time.Millisecond)
		}
		b.ReportMetric(ms(post, 0.5), "post-p50-ms")
		b.ReportMetric(ms(post, 0.99), "post-p99-ms")
	}
}
