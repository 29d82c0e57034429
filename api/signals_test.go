package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/ingest"
	"github.com/ribkeeper/ribkeeper/signals"
)

const hookSecret = "hook-secret-0123456789"

// takeAll is a Sink that keeps every signal but one for the target
// refuse.
type takeAll struct {
	mu     sync.Mutex
	got    []signals.Signal
	refuse string
}

func (s *takeAll) Accept(_ context.Context, sig signals.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sig.Target.String() == s.refuse {
		return errors.New("target outside the source's prefixes")
	}
	s.got = append(s.got, sig)
	return nil
}

func (s *takeAll) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

// startSignals serves an API with the ways in for a webhook source on a
// real TCP listener with tokens, one of them scoped to 192.0.2.0/24.
func startSignals(t *testing.T) (*tcpServer, *takeAll) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	sink, recent := &takeAll{}, signals.NewRecent(0)
	in, err := ingest.New(nil, []config.Source{{Name: "hook", Kind: config.SourceWebhook, Secret: hookSecret,
		TimestampWindow: time.Minute, ReplayCache: 100, MaxSignalsPerRequest: 10}}, sink, recent, nil)
	if err != nil {
		t.Fatal(err)
	}
	rules := newFakeRules()
	log := hclog.New(&hclog.LoggerOptions{Output: tWriter{t}, Level: hclog.Info})
	srv := newAPI(log, rules, newFakeRIB(), api.WithMaxBodyBytes(4096), api.WithSignals(in, recent))
	tokens := append([]api.Token{{Name: "scoped", Role: api.RoleRead, Secret: "scoped-secret-0123456789",
		Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}}, testTokens...)
	return serveTCP(t, srv, rules, api.TCPConfig{Addr: addr, Tokens: tokens}), sink
}

func (ts *tcpServer) signal(t *testing.T, body string, header map[string]string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", ts.url+"/v1/signals/hook", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := ts.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, []byte(b.String())
}

func sign(body string) map[string]string {
	ts := time.Now().Unix()
	return map[string]string{ingest.HeaderTimestamp: strconv.FormatInt(ts, 10),
		ingest.HeaderSignature: ingest.Sign([]byte(hookSecret), ts, []byte(body))}
}

// Over TCP the ways in need no API token (their source's signature is
// their credential) but keep the listener's other checks and bounds; GET
// /v1/signals needs a token and shows a scoped one only its prefixes.
func TestSignalsOverTCP(t *testing.T) {
	ts, sink := startSignals(t)
	in := `{"signals": [{"target": "192.0.2.10", "state": "start"}]}`
	out := `{"signals": [{"target": "198.51.100.1", "state": "start"}]}`
	for _, b := range []string{in, out} {
		if code, body := ts.signal(t, b, sign(b)); code != 200 {
			t.Fatalf("signed signal: %d %s", code, body)
		}
	}
	// An API token is no signature.
	code, body := ts.signal(t, in, map[string]string{"Authorization": "Bearer " + writeSecret})
	if code != 401 || !strings.Contains(string(body), "X-Ribkeeper-Signature") {
		t.Errorf("bearer token instead of a signature: %d %s", code, body)
	}
	// The listener's body limit (4096 bytes) holds.
	big := `{"signals": [{"target": "192.0.2.10", "state": "start", "detail": "` + strings.Repeat("x", 5000) + `"}]}`
	if code, body := ts.signal(t, big, sign(big)); code != 413 {
		t.Errorf("big body: %d %s", code, body)
	}
	// As do the write checks: not JSON, or from a web page.
	if code, body := ts.signal(t, in, map[string]string{"Content-Type": "text/plain"}); code != 415 {
		t.Errorf("text/plain: %d %s", code, body)
	}
	if code, body := ts.signal(t, in, map[string]string{"Origin": "https://evil.example"}); code != 403 {
		t.Errorf("foreign origin: %d %s", code, body)
	}
	if n := sink.count(); n != 2 {
		t.Errorf("sink got %d signals, want 2", n)
	}
	// Other routes still need a token.
	status, b, _ := ts.do(t, "", "GET", "/v1/signals", "")
	wantError(t, status, b, 401, api.CodeUnauthorized)
	status, b, _ = ts.do(t, "", "POST", "/v1/signals", in)
	if status != 401 {
		t.Errorf("POST /v1/signals without a source: %d %s", status, b)
	}

	list := func(token, query string) api.SignalList {
		t.Helper()
		status, b, _ := ts.do(t, token, "GET", "/v1/signals"+query, "")
		if status != 200 {
			t.Fatalf("GET /v1/signals%s: %d %s", query, status, b)
		}
		var l api.SignalList
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	all := list(readSecret, "")
	// 2 accepted, 1 refused (a bearer token); the big body was refused by
	// the listener before it reached the source.
	if len(all.Signals) != 3 {
		t.Fatalf("unscoped list = %+v", all)
	}
	if s := all.Signals[len(all.Signals)-1]; s.Target != "192.0.2.10/32" || s.State != "start" || !s.Accepted || s.Source != "hook" || s.Via != "webhook" {
		t.Errorf("oldest = %+v", s)
	}
	if s := all.Signals[0]; s.Accepted || s.Target != "" || !strings.Contains(s.Reason, "missing X-Ribkeeper-Timestamp") {
		t.Errorf("newest = %+v, want the refused request", s)
	}
	scoped := list("scoped-secret-0123456789", "")
	if len(scoped.Signals) != 1 || scoped.Signals[0].Target != "192.0.2.10/32" {
		t.Errorf("scoped list = %+v, want only 192.0.2.10", scoped)
	}
	if l := list(readSecret, "?limit=1"); len(l.Signals) != 1 {
		t.Errorf("limit=1: %d", len(l.Signals))
	}
	if l := list(readSecret, "?source=other"); len(l.Signals) != 0 {
		t.Errorf("source=other: %d", len(l.Signals))
	}
}

// `ribkeeper signals` over TCP shows what the detectors sent, the reason
// of a refusal included, and only the token's prefixes for a scoped one.
func TestSignalsCLI(t *testing.T) {
	t.Setenv("RIBKEEPER_URL", "")
	t.Setenv("RIBKEEPER_TOKEN", "")
	t.Setenv("RIBKEEPER_TOKEN_FILE", "")
	t.Setenv("RIBKEEPER_CACERT", "")
	ts, _ := startSignals(t)
	in := `{"signals": [{"target": "192.0.2.10", "state": "start", "protocol": "udp", "dst_ports": [53, 123], "pps": 250000}]}`
	out := `{"signals": [{"target": "198.51.100.1", "state": "end"}]}`
	for _, b := range []string{in, out} {
		if code, body := ts.signal(t, b, sign(b)); code != 200 {
			t.Fatalf("signed signal: %d %s", code, body)
		}
	}
	h := sign(in)
	h[ingest.HeaderSignature] = "sha256=" + strings.Repeat("0", 64)
	if code, _ := ts.signal(t, in, h); code != 401 {
		t.Fatalf("bad signature: %d", code)
	}
	code, stdout, stderr := clientMain(t, "signals", "--url", ts.url, "--token-file", tokenFile(t, readSecret))
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[0], "TIME ") ||
		!strings.Contains(lines[1], "refused: wrong signature") ||
		!strings.Contains(lines[2], "198.51.100.1/32") || !strings.Contains(lines[2], "end") ||
		!strings.Contains(lines[3], "udp dst 53,123") || !strings.Contains(lines[3], "250000") || !strings.Contains(lines[3], "accepted") {
		t.Fatalf("signals: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = clientMain(t, "signals", "--json", "--url", ts.url, "--token-file", tokenFile(t, "scoped-secret-0123456789"))
	var l api.SignalList
	if code != 0 || json.Unmarshal([]byte(stdout), &l) != nil || len(l.Signals) != 1 || l.Signals[0].Target != "192.0.2.10/32" {
		t.Fatalf("signals --json, scoped: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// The signal routes' answers match api/openapi.json: accepted, refused by
// the sink, each kind of error, and the list.
func TestOpenAPISignalAnswers(t *testing.T) {
	doc := loadOpenAPI(t)
	ops := documented(doc)
	ts, sink := startSignals(t)
	sink.refuse = "198.51.100.1/32"
	ok := `{"signals": [{"target": "192.0.2.10", "state": "start", "protocol": "udp", "dst_ports": [53], "pps": 250000}]}`
	mixed := `{"signals": [{"target": "192.0.2.11", "state": "start"}, {"target": "198.51.100.1", "state": "start"}]}`
	bad := `{"signals": [{"target": "192.0.2.300", "state": "start"}]}`
	many := `{"signals": [` + strings.TrimSuffix(strings.Repeat(`{"target": "192.0.2.1", "state": "end"},`, 11), ",") + `]}`
	replayed := sign(ok)
	check := func(route string, status int, body []byte) {
		t.Helper()
		resp, found := ops[route]["responses"].(map[string]any)[strconv.Itoa(status)]
		if !found {
			t.Errorf("%s answered %d, which api/openapi.json does not document: %s", route, status, body)
			return
		}
		schema := resolve(t, doc, resp).(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"]
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: %v", route, err)
		}
		for _, e := range schemaCheck(t, doc, schema, v, fmt.Sprintf("%s (%d)", route, status)) {
			t.Errorf("%s\n  answer: %s", e, body)
		}
	}
	seen := map[int]bool{}
	for _, c := range []struct {
		body   string
		header map[string]string
		want   int
	}{
		{ok, replayed, 200},
		{ok, replayed, 409},
		{mixed, sign(mixed), 422},
		{bad, sign(bad), 400},
		{many, sign(many), 413},
		{ok, nil, 401},
	} {
		code, body := ts.signal(t, c.body, c.header)
		if code != c.want {
			t.Errorf("answered %d, want %d: %s", code, c.want, body)
		}
		seen[code] = true
		check("POST /v1/signals/{source}", code, body)
	}
	status, body, _ := ts.do(t, writeSecret, "POST", "/v1/signals/nope", ok)
	if status != 404 {
		t.Errorf("unknown source: %d %s", status, body)
	}
	check("POST /v1/signals/{source}", status, body)
	status, body, _ = ts.do(t, readSecret, "GET", "/v1/signals", "")
	check("GET /v1/signals", status, body)
	status, body, _ = ts.do(t, readSecret, "GET", "/v1/signals?limit=0", "")
	check("GET /v1/signals", status, body)
}
