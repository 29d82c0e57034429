package metrics_test

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/porttest"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/metrics"
	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
)

// mxValue sums the samples of the metric family name whose labels include
// want: counter and gauge values, histogram sample counts. ok is false when
// no series matches.
func mxValue(t *testing.T, reg prometheus.Gatherer, name string, want map[string]string) (v float64, ok bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Logf("gather: %v", err) // a failing source; the rest is still there
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for k, w := range want {
				if labels[k] != w {
					continue next
				}
			}
			ok = true
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				v += m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				v += m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				v += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return v, ok
}

type mxRig struct {
	m    *metrics.Metrics
	st   *store.Store
	sp   *bgp.Speaker
	peer *bgp.Speaker
	hc   *http.Client
}

func mxFreePort(t *testing.T, addr string) int32 {
	t.Helper()
	return int32(porttest.Free(t, addr))
}

// newMxRig wires real parts as main.go does: SQLite store, an embedded
// speaker peering over loopback with a second speaker (the "router"), the
// reconciler and the API on a unix socket, all reporting to one Metrics.
func newMxRig(t *testing.T) *mxRig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := hclog.New(&hclog.LoggerOptions{Output: hclog.DefaultOutput, Level: hclog.Warn})
	m := metrics.New(log)

	dir := t.TempDir()
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(dir, "rk.db"), Site: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	a, b := "127.0.0.1", "127.0.0.2"
	pa, pb := mxFreePort(t, a), mxFreePort(t, b)
	sp := bgp.New(log.Named("bgp"), bgp.Config{ASN: 65000, RouterID: netip.MustParseAddr(a),
		ListenAddresses: []string{a}, ListenPort: pa,
		Neighbors: []bgp.Neighbor{{Address: netip.MustParseAddr(b), ASN: 65001, Port: uint16(pb),
			LocalAddress: netip.MustParseAddr(a), Families: []flowspec.Family{flowspec.IPv4}}}})
	peer := bgp.New(log.Named("peer"), bgp.Config{ASN: 65001, RouterID: netip.MustParseAddr(b),
		ListenAddresses: []string{b}, ListenPort: pb,
		Neighbors: []bgp.Neighbor{{Address: netip.MustParseAddr(a), ASN: 65000, Port: uint16(pa),
			LocalAddress: netip.MustParseAddr(b), Families: []flowspec.Family{flowspec.IPv4}}}})
	for _, s := range []*bgp.Speaker{sp, peer} {
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
	}

	rec := reconcile.New(log.Named("reconcile"), st, sp, reconcile.Config{
		Recorder: m, SettleTimeout: 200 * time.Millisecond, RetryBase: 10 * time.Millisecond,
	})
	m.Watch(metrics.Sources{Rules: st, Drift: rec, Speaker: sp})
	srv := api.New(log.Named("api"), st, admit.New(admit.Config{Store: st}), sp, api.WithMetrics(m.Handler(), m), api.WithReconciler(rec))
	sock := filepath.Join(dir, "rk.sock")
	go rec.Run(ctx)
	go srv.Serve(ctx, sock)

	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	r := &mxRig{m: m, st: st, sp: sp, peer: peer, hc: hc}
	mxEventually(t, 10*time.Second, "API answering", func() bool {
		resp, err := hc.Get("http://rk/v1/status")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	return r
}

func (r *mxRig) request(t *testing.T, method, path, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, "http://rk"+path, strings.NewReader(body))
	resp, err := r.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func mxEventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// moved waits until the metric's mxValue reaches at least want.
func (r *mxRig) moved(t *testing.T, name string, labels map[string]string, want float64) {
	t.Helper()
	var last float64
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, _ := mxValue(t, r.m.Registry(), name, labels)
		if v >= want {
			return
		}
		last = v
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v, want at least %v", name, labels, last, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type mxL = map[string]string

// Every metric is driven by the code path it names, with real parts: an
// API request, a reconcile pass, an announcement, a TTL expiring, drift
// repaired, a BGP session coming up.
func TestEveryMetricMoves(t *testing.T) {
	r := newMxRig(t)
	reg := r.m.Registry()

	// A BGP session comes up: session state, up, uptime.
	r.moved(t, "ribkeeper_peer_session_state", mxL{"peer": "127.0.0.2", "state": "established"}, 1)
	r.moved(t, "ribkeeper_peer_up", mxL{"peer": "127.0.0.2"}, 1)
	if v, ok := mxValue(t, reg, "ribkeeper_peer_session_state", mxL{"peer": "127.0.0.2", "state": "idle"}); !ok || v != 0 {
		t.Errorf("idle state of an established peer = %v (present %v), want 0", v, ok)
	}
	r.moved(t, "ribkeeper_reconcile_passes_total", mxL{"result": "ok"}, 1)
	r.moved(t, "ribkeeper_reconcile_pass_duration_seconds", nil, 1)
	r.moved(t, "ribkeeper_rib_ready", nil, 1)

	// An API request adds a rule: the API counter, the rule gauges, the
	// announcement, the RIB, the path sent to the peer.
	if code := r.request(t, "POST", "/v1/rules", `{"text": "match destination 203.0.113.7/32 then discard", "ttl": "1500ms"}`); code != 201 {
		t.Fatalf("POST /v1/rules: %d", code)
	}
	if code := r.request(t, "POST", "/v1/rules", `{"text": "match nonsense"}`); code != 400 {
		t.Fatalf("POST bad rule: %d", code)
	}
	r.moved(t, "ribkeeper_api_requests_total", mxL{"route": "/v1/rules", "method": "POST", "code": "201"}, 1)
	r.moved(t, "ribkeeper_api_requests_total", mxL{"route": "/v1/rules", "method": "POST", "code": "400"}, 1)
	r.moved(t, "ribkeeper_api_request_duration_seconds", mxL{"route": "/v1/rules"}, 2)
	r.moved(t, "ribkeeper_announcements_total", mxL{"family": "ipv4-flowspec", "op": "add"}, 1)
	r.moved(t, "ribkeeper_rules", mxL{"state": "active", "family": "ipv4-flowspec"}, 1)
	r.moved(t, "ribkeeper_rules_announced", mxL{"family": "ipv4-flowspec"}, 1)
	r.moved(t, "ribkeeper_rib_paths", mxL{"family": "ipv4-flowspec"}, 1)
	r.moved(t, "ribkeeper_peer_prefixes_sent", mxL{"peer": "127.0.0.2"}, 1)
	r.moved(t, "ribkeeper_reconcile_last_pass_timestamp_seconds", nil, float64(time.Now().Add(-time.Minute).Unix()))

	// The TTL passes: the path is withdrawn as retire, the rule expires,
	// and its lateness is observed.
	r.moved(t, "ribkeeper_withdrawals_total", mxL{"family": "ipv4-flowspec", "op": "retire"}, 1)
	r.moved(t, "ribkeeper_expiry_lateness_seconds", nil, 1)
	r.moved(t, "ribkeeper_rules", mxL{"state": "expired", "family": "ipv4-flowspec"}, 1)

	// Drift: a desired path withdrawn behind our back is re-added; a path
	// nothing desires is withdrawn.
	if code := r.request(t, "POST", "/v1/rules", `{"text": "match destination 198.51.100.1/32 then discard"}`); code != 201 {
		t.Fatalf("POST /v1/rules: %d", code)
	}
	desired, err := flowspec.Parse("match destination 198.51.100.1/32 then discard")
	if err != nil {
		t.Fatal(err)
	}
	// Announced is what a pass observed in the RIB: from then on, the
	// path going missing is drift.
	mxEventually(t, 30*time.Second, "a pass observed the desired path in the RIB", func() bool {
		rules, err := r.st.ActiveRules(context.Background())
		if err != nil {
			return false
		}
		for _, rl := range rules {
			if rl.Rule.Match == desired.Match && rl.Announced {
				return true
			}
		}
		return false
	})
	ctx := context.Background()
	if err := r.sp.Withdraw(ctx, []flowspec.Match{desired.Match})[0]; err != nil {
		t.Fatal(err)
	}
	r.moved(t, "ribkeeper_drift_repairs_total", mxL{"kind": "readded"}, 1)
	r.moved(t, "ribkeeper_announcements_total", mxL{"family": "ipv4-flowspec", "op": "readd"}, 1)

	orphan, err := flowspec.Parse("match destination 192.0.2.99/32 then discard")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.sp.Announce(ctx, []flowspec.Rule{orphan})[0]; err != nil {
		t.Fatal(err)
	}
	r.moved(t, "ribkeeper_drift_repairs_total", mxL{"kind": "orphan_withdrawn"}, 1)
	r.moved(t, "ribkeeper_withdrawals_total", mxL{"family": "ipv4-flowspec", "op": "orphan"}, 1)

	// The path's action changed behind our back: replaced.
	if err := r.sp.Announce(ctx, []flowspec.Rule{{Match: desired.Match, Action: flowspec.RateLimit(1000)}})[0]; err != nil {
		t.Fatal(err)
	}
	r.moved(t, "ribkeeper_drift_repairs_total", mxL{"kind": "replaced"}, 1)

	// Withdrawing over the API: withdrawing, then withdrawn.
	if code := r.request(t, "DELETE", "/v1/rules/2", ""); code != 202 {
		t.Fatalf("DELETE /v1/rules/2: %d", code)
	}
	r.moved(t, "ribkeeper_rules", mxL{"state": "withdrawn"}, 1)
	r.moved(t, "ribkeeper_api_requests_total", mxL{"route": "/v1/rules/{id}", "method": "DELETE", "code": "202"}, 1)

	// The upstream peer resets and comes back; then the embedded speaker
	// itself restarts on a fresh server, loaded with what the old one held
	// (nothing needs announcing again).
	if code := r.request(t, "POST", "/v1/rules", `{"text": "match destination 198.51.100.2/32 then discard"}`); code != 201 {
		t.Fatalf("POST /v1/rules: %d", code)
	}
	kept, err := flowspec.Parse("match destination 198.51.100.2/32 then discard")
	if err != nil {
		t.Fatal(err)
	}
	mxEventually(t, 5*time.Second, "kept path in the RIB", func() bool { _, ok := r.sp.Lookup(kept.Match); return ok })
	if err := r.peer.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	r.moved(t, "ribkeeper_drift_repairs_total", mxL{"kind": "peer_reset"}, 1)
	if err := r.sp.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	r.moved(t, "ribkeeper_drift_repairs_total", mxL{"kind": "speaker_restart"}, 1)
	if _, ok := r.sp.Lookup(kept.Match); !ok {
		t.Error("the restarted speaker was not loaded with the kept path")
	}
	r.moved(t, "ribkeeper_reconcile_passes_total", mxL{"result": "skipped"}, 1)

	// The session goes down: the peer is no longer up.
	r.peer.Stop()
	mxEventually(t, 10*time.Second, "peer down", func() bool {
		v, _ := mxValue(t, reg, "ribkeeper_peer_up", mxL{"peer": "127.0.0.2"})
		return v == 0
	})

	// The endpoint serves it all in the text format.
	resp, err := r.hc.Get("http://rk/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	for _, name := range []string{"ribkeeper_rules{", "ribkeeper_reconcile_passes_total{", "ribkeeper_api_requests_total{",
		"ribkeeper_peer_prefixes_sent{", "go_goroutines"} {
		if !strings.Contains(b.String(), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}
