package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/config"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/flowspec"
)

const (
	ruleDiscard = "match destination 203.0.113.7/32 then discard"
	ruleLimit   = "match destination 203.0.113.7/32 then rate-limit 125000"
	ruleOther   = "match destination 198.51.100.0/24 then discard"
)

type testServer struct {
	sock  string
	rules *fakeRules
	rib   *fakeRIB
	hc    *http.Client
	stop  func() error // cancels Serve and returns its error
	// logs receives the server's log lines (dropped when full).
	logs chan string
}

// startServer serves a Server over fakes on a real unix socket.
func startServer(t *testing.T) *testServer {
	t.Helper()
	rules := newFakeRules()
	ts := startServerOver(t, rules)
	ts.rules = rules
	return ts
}

// startServerOver serves a Server over rules, written through an
// admission gate with the default guardrails but for allow_never_expire
// (these tests exercise "ttl": "never" as the operator's own choice), and
// a fake RIB, on a real unix socket.
func startServerOver(t *testing.T, rules testStore, opts ...api.Option) *testServer {
	t.Helper()
	return startServerGate(t, rules, newGate(rules, admit.Config{Guardrails: config.Guardrails{AllowNeverExpire: true}}), opts...)
}

// startServerGate serves a Server that reads rules and writes through
// gate, and a fake RIB, on a real unix socket.
func startServerGate(t *testing.T, rules api.Rules, gate api.Gate, opts ...api.Option) *testServer {
	t.Helper()
	ts := &testServer{
		sock: filepath.Join(t.TempDir(), "run", "rk.sock"),
		rib:  newFakeRIB(),
		logs: make(chan string, 64),
	}
	log := hclog.New(&hclog.LoggerOptions{Output: io.MultiWriter(tWriter{t}, chanWriter(ts.logs)), Level: hclog.Info})
	srv := api.New(log, rules, gate, ts.rib, append([]api.Option{api.WithMaxBodyBytes(4096)}, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx, ts.sock) }()
	var once bool
	var serveErr error
	ts.stop = func() error {
		if !once {
			once = true
			cancel()
			serveErr = <-errc
		}
		return serveErr
	}
	t.Cleanup(func() { ts.stop() })
	waitListening(t, ts.sock, errc)
	ts.hc = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", ts.sock)
		},
	}}
	return ts
}

// tWriter sends the server's log to the test's log, shown on failure.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func waitListening(t *testing.T, sock string, errc chan error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-errc:
			t.Fatalf("Serve returned early: %v", err)
		default:
		}
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("server did not listen on %s", sock)
}

// do sends a raw request and returns the status and the body.
func (ts *testServer) do(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	return ts.doHeader(t, method, path, body)
}

// doHeader is do with request headers, given as name, value pairs.
func (ts *testServer) doHeader(t *testing.T, method, path, body string, header ...string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://rk"+path, r)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := ts.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	return resp.StatusCode, b
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return v
}

// wantError checks an error response's status and code and returns it.
func wantError(t *testing.T, status int, body []byte, wantStatus int, wantCode string) *api.Error {
	t.Helper()
	eb := decode[api.ErrorBody](t, body)
	if status != wantStatus || eb.Error == nil || eb.Error.Code != wantCode {
		t.Fatalf("got %d %s, want %d with code %q", status, body, wantStatus, wantCode)
	}
	if eb.Error.Message == "" {
		t.Errorf("error without a message: %s", body)
	}
	return eb.Error
}

func mustParse(t *testing.T, text string) flowspec.Rule {
	t.Helper()
	r, err := flowspec.Parse(text)
	if err != nil {
		t.Fatalf("flowspec.Parse(%q): %v", text, err)
	}
	return r
}

func TestAddThenUpdateSameMatch(t *testing.T) {
	ts := startServer(t)
	before := time.Now()
	status, body := ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleDiscard+`","ttl":"10m","reason":"ddos ticket 42"}`)
	if status != http.StatusCreated {
		t.Fatalf("first add: %d %s, want 201", status, body)
	}
	first := decode[api.Rule](t, body)
	if first.ID == 0 || first.State != "active" || first.Actor != "cli" || first.Reason != "ddos ticket 42" ||
		first.Family != "ipv4-flowspec" || first.Action != "discard" || first.Text != mustParse(t, ruleDiscard).String() {
		t.Errorf("first add returned %+v", first)
	}
	if first.ExpiresAt == nil || first.ExpiresAt.Before(before.Add(10*time.Minute)) || first.ExpiresAt.After(time.Now().Add(10*time.Minute)) {
		t.Errorf("expires_at %v, want now+10m", first.ExpiresAt)
	}

	// Same match, new action and ttl "never": the same rule, updated.
	status, body = ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleLimit+`","ttl":"never"}`)
	if status != http.StatusOK {
		t.Fatalf("second add: %d %s, want 200", status, body)
	}
	second := decode[api.Rule](t, body)
	if second.ID != first.ID {
		t.Errorf("same match got id %d, want %d", second.ID, first.ID)
	}
	if second.Action != mustParse(t, ruleLimit).Action.String() || second.ExpiresAt != nil {
		t.Errorf("update returned %+v", second)
	}
	if n := ts.rules.count(); n != 1 {
		t.Errorf("store holds %d rules, want 1", n)
	}

	status, body = ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleOther+`"}`)
	if status != http.StatusCreated || decode[api.Rule](t, body).ID == first.ID {
		t.Errorf("other match: %d %s, want 201 with a new id", status, body)
	}
}

func TestListShowWithdraw(t *testing.T) {
	ts := startServer(t)
	_, body := ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleDiscard+`"}`)
	a := decode[api.Rule](t, body)
	_, body = ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleOther+`","ttl":"1h"}`)
	b := decode[api.Rule](t, body)

	status, body := ts.do(t, "GET", "/v1/rules", "")
	list := decode[api.RuleList](t, body)
	if status != 200 || len(list.Rules) != 2 || list.Rules[0].ID != b.ID || list.Rules[1].ID != a.ID {
		t.Fatalf("list: %d %s, want both rules newest first", status, body)
	}

	status, body = ts.do(t, "GET", "/v1/rules/"+itoa(a.ID), "")
	if got := decode[api.Rule](t, body); status != 200 || got.ID != a.ID || got.Text != a.Text {
		t.Fatalf("show: %d %s", status, body)
	}

	status, body = ts.do(t, "DELETE", "/v1/rules/"+itoa(a.ID), "")
	if got := decode[api.Rule](t, body); status != http.StatusAccepted || got.State != api.StateWithdrawing {
		t.Fatalf("withdraw: %d %s, want 202 state withdrawing", status, body)
	}
	if r, _ := ts.rules.Get(context.Background(), a.ID); !r.WithdrawRequested {
		t.Error("withdraw did not reach the store")
	}

	for state, want := range map[string][]int64{
		"active":      {b.ID},
		"withdrawing": {a.ID},
		"withdrawn":   {},
		"":            {b.ID, a.ID},
	} {
		status, body = ts.do(t, "GET", "/v1/rules?state="+state, "")
		var ids []int64
		for _, r := range decode[api.RuleList](t, body).Rules {
			ids = append(ids, r.ID)
		}
		if status != 200 || len(ids) != len(want) || (len(ids) > 0 && ids[0] != want[0]) {
			t.Errorf("state=%s: %d %s, want ids %v", state, status, body, want)
		}
	}
	status, body = ts.do(t, "GET", "/v1/rules?state=gone", "")
	if e := wantError(t, status, body, 400, api.CodeInvalidState); e.Field != "state" {
		t.Errorf("field %q, want state", e.Field)
	}
}

func TestBadRuleTextStoresNothing(t *testing.T) {
	ts := startServer(t)
	status, body := ts.do(t, "POST", "/v1/rules", `{"text":"match destinaton 203.0.113.7/32 then discard"}`)
	e := wantError(t, status, body, 400, api.CodeInvalidRule)
	if e.Field != "text" || e.Column != 7 || !strings.Contains(e.Message, `"destinaton" (column 7)`) {
		t.Errorf("error %+v, want field text pointing at column 7", e)
	}
	status, body = ts.do(t, "POST", "/v1/rules", `{"text":"  "}`)
	wantError(t, status, body, 400, api.CodeInvalidRule)
	if n := ts.rules.count(); n != 0 {
		t.Errorf("store holds %d rules after bad input, want 0", n)
	}
}

func TestBadBodies(t *testing.T) {
	ts := startServer(t)
	for _, tc := range []struct {
		body, code, field string
	}{
		{`{"text":"` + ruleDiscard + `","ttl":"-5m"}`, api.CodeInvalidTTL, "ttl"},
		{`{"text":"` + ruleDiscard + `","ttl":"0s"}`, api.CodeInvalidTTL, "ttl"},
		{`{"text":"` + ruleDiscard + `","ttl":"soon"}`, api.CodeInvalidTTL, "ttl"},
		{`{"text":"` + ruleDiscard + `","ttl":600}`, api.CodeInvalidBody, "ttl"},
		{`{"text":"` + ruleDiscard + `","colour":"red"}`, api.CodeInvalidBody, "colour"},
		{`{"text":"` + ruleDiscard + `"} {}`, api.CodeInvalidBody, ""},
		{`{"text":`, api.CodeInvalidBody, ""},
		{`[1]`, api.CodeInvalidBody, ""},
		{``, api.CodeInvalidBody, ""},
		{"\x00\xff", api.CodeInvalidBody, ""},
	} {
		status, body := ts.do(t, "POST", "/v1/rules", tc.body)
		e := wantError(t, status, body, 400, tc.code)
		if e.Field != tc.field {
			t.Errorf("%s: field %q, want %q", tc.body, e.Field, tc.field)
		}
	}
	if n := ts.rules.count(); n != 0 {
		t.Errorf("store holds %d rules after bad input, want 0", n)
	}
}

func TestBodyTooLarge(t *testing.T) {
	ts := startServer(t)
	big := `{"text":"` + ruleDiscard + `","reason":"` + strings.Repeat("x", 8192) + `"}`
	status, body := ts.do(t, "POST", "/v1/rules", big)
	wantError(t, status, body, http.StatusRequestEntityTooLarge, api.CodeBodyTooLarge)

	// Without Content-Length the limit applies while reading.
	req, _ := http.NewRequest("POST", "http://rk/v1/rules", io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	resp, err := ts.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantError(t, resp.StatusCode, b, http.StatusRequestEntityTooLarge, api.CodeBodyTooLarge)
	if n := ts.rules.count(); n != 0 {
		t.Errorf("store holds %d rules, want 0", n)
	}
}

func TestNotFound(t *testing.T) {
	ts := startServer(t)
	for _, m := range []string{"GET", "DELETE"} {
		status, body := ts.do(t, m, "/v1/rules/99", "")
		wantError(t, status, body, 404, api.CodeNotFound)
	}
	status, body := ts.do(t, "GET", "/v1/rules/abc", "")
	wantError(t, status, body, 400, api.CodeInvalidID)
	status, body = ts.do(t, "GET", "/v1/nope", "")
	wantError(t, status, body, 404, api.CodeNotFound)
	status, body = ts.do(t, "PUT", "/v1/rules", "{}")
	wantError(t, status, body, 405, api.CodeMethodNotAllowed)
}

func TestPanicIs500(t *testing.T) {
	ts := startServer(t)
	ts.rules.mu.Lock()
	ts.rules.panicOnGet = 7
	ts.rules.mu.Unlock()
	status, body := ts.do(t, "GET", "/v1/rules/7", "")
	wantError(t, status, body, 500, api.CodeInternal)
	// The server survives.
	status, body = ts.do(t, "GET", "/v1/rules", "")
	if status != 200 {
		t.Errorf("after a panic: %d %s", status, body)
	}
}

func TestRIBAndPeers(t *testing.T) {
	ts := startServer(t)
	ts.rib.setReady(false)
	status, body := ts.do(t, "GET", "/v1/rib", "")
	wantError(t, status, body, 503, api.CodeUnavailable)

	ts.rib.setReady(true)
	ts.rib.announce(mustParse(t, ruleOther))
	ts.rib.announce(mustParse(t, ruleDiscard))
	ts.rib.announce(mustParse(t, "match destination 2001:db8::1/128 then discard"))
	status, body = ts.do(t, "GET", "/v1/rib", "")
	paths := decode[api.PathList](t, body).Paths
	if status != 200 || len(paths) != 3 {
		t.Fatalf("rib: %d %s", status, body)
	}
	if paths[0].Family != "ipv4-flowspec" || paths[2].Family != "ipv6-flowspec" || paths[0].Match > paths[1].Match {
		t.Errorf("rib not sorted by family then match: %s", body)
	}
	if paths[0].Text == "" || paths[0].Action != "discard" {
		t.Errorf("rib path %+v", paths[0])
	}

	ts.rib.setPeers([]bgp.PeerStatus{{Address: "192.0.2.1", ASN: 64512, State: "established", Uptime: 90 * time.Second, Families: []string{"ipv4-flowspec"}, Sent: 3}})
	status, body = ts.do(t, "GET", "/v1/peers", "")
	peers := decode[api.PeerList](t, body).Peers
	if status != 200 || len(peers) != 1 || peers[0].UptimeSeconds != 90 || peers[0].State != "established" {
		t.Errorf("peers: %d %s", status, body)
	}
}

func TestSocket(t *testing.T) {
	ts := startServer(t)
	fi, err := os.Stat(ts.sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&fs.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want a socket with 0600", fi.Mode())
	}

	// A second server refuses the live socket and leaves it working.
	err = newAPI(nil, newFakeRules(), newFakeRIB()).Serve(context.Background(), ts.sock)
	if err == nil || !strings.Contains(err.Error(), "another process is listening") {
		t.Errorf("second Serve on a live socket: %v", err)
	}
	if status, _ := ts.do(t, "GET", "/v1/rules", ""); status != 200 {
		t.Errorf("first server broken after the second one's attempt: %d", status)
	}

	if err := ts.stop(); err != nil {
		t.Errorf("Serve after cancel: %v", err)
	}
	if _, err := os.Lstat(ts.sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket file left after shutdown: %v", err)
	}
}

func TestSocketStaleAndNotASocket(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- newAPI(nil, newFakeRules(), newFakeRIB()).Serve(ctx, stale) }()
	waitListening(t, stale, errc)
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Serve over a stale socket: %v", err)
	}

	file := filepath.Join(dir, "precious")
	if err := os.WriteFile(file, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = newAPI(nil, newFakeRules(), newFakeRIB()).Serve(context.Background(), file)
	if err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Serve on a regular file: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "keep me" {
		t.Error("Serve clobbered a regular file")
	}
}

func itoa(id int64) string { return strconv.FormatInt(id, 10) }
