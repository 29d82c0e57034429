package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
)

// A client too slow to take its events is dropped (it reconnects with
// Last-Event-ID); closing the stream ends every stream.
func TestEventsSlowClientAndClose(t *testing.T) {
	e := NewEvents(nil, nil, nil, nil)
	_, slow, _ := e.subscribe(0, false)
	_, fast, _ := e.subscribe(0, false)
	for i := range subscriberBuffer + 1 {
		e.emit(EventRules, rulesData{Changed: i})
		if i < subscriberBuffer {
			<-fast.ch
		}
	}
	select {
	case <-slow.gone:
	default:
		t.Fatalf("a client that took none of %d events is still subscribed", subscriberBuffer+1)
	}
	select {
	case <-fast.gone:
		t.Fatal("a client that keeps up was dropped")
	default:
	}
	e.close()
	<-fast.gone
	if _, _, ok := e.subscribe(0, false); ok {
		t.Error("subscribed to a closed stream")
	}
}

// The stream of a running daemon ends when the daemon stops, and every
// write through the API wakes the stream.
func TestEventsRunEndsStreams(t *testing.T) {
	feed := newFakeFeed()
	e := NewEvents(nil, feed, nil, nil)
	srv := New(nil, newFakeRules(), newFakeRIB(), WithEvents(e))
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	ctx, cancel := context.WithCancel(context.Background())
	// The state events start from, before Run (whose first poll may
	// come after the change below: it then finds the change itself).
	e.poll(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()

	s := openStream(t, hs.URL, "")
	s.next() // hello
	// A write through the API wakes Run, which finds the change.
	resp, err := http.Post(hs.URL+"/v1/rules", "application/json", strings.NewReader(`{"text": "`+ruleDiscard+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	feed.set(7, store.Active) // what the store would show for it
	e.Nudge()
	if ev := s.next(); ev.typ != EventRule || ruleOf(t, ev).ID != 7 {
		t.Fatalf("got %s %s, want the rule", ev.typ, ev.data)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := io.ReadAll(s.r); err != nil {
		t.Fatalf("the stream did not end cleanly when the daemon stopped: %v", err)
	}
}

// API writes wake the event stream at once.
func TestEventsNudgedByWrites(t *testing.T) {
	e := NewEvents(nil, nil, nil, nil)
	srv := New(nil, newFakeRules(), newFakeRIB(), WithEvents(e))
	for _, req := range []struct{ method, path, body string }{
		{"POST", "/v1/rules", `{"text": "` + ruleDiscard + `"}`},
		{"POST", "/v1/rules/batch", `{"rules": [{"text": "` + ruleDiscard + `"}]}`},
		{"DELETE", "/v1/rules/1", ""},
	} {
		for len(e.wake) > 0 {
			<-e.wake
		}
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, httptest.NewRequest(req.method, req.path, strings.NewReader(req.body)))
		if w.Code >= 300 {
			t.Fatalf("%s %s: %d %s", req.method, req.path, w.Code, w.Body)
		}
		if len(e.wake) != 1 {
			t.Errorf("%s %s did not wake the event stream", req.method, req.path)
		}
	}
}

type fakeCounts struct {
	counts []store.Count
	drift  reconcile.DriftCounts
}

func (f *fakeCounts) Counts(context.Context) ([]store.Count, error) { return f.counts, nil }
func (f *fakeCounts) Drift() reconcile.DriftCounts                  { return f.drift }

// The series keeps one point per sample, oldest first, bounded; drift
// repairs are counted per sample.
func TestSeries(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	src := &fakeCounts{}
	peers := &fakePeers{}
	se := NewSeries(nil, SeriesSources{Rules: src, Drift: src, Peers: peers}, time.Minute, 3, func() time.Time { return now })
	ctx := context.Background()

	src.counts = []store.Count{{State: store.Active, N: 5, Announced: true}, {State: store.Active, N: 2}, {State: store.Withdrawn, N: 9}}
	src.drift = reconcile.DriftCounts{Readded: 2, OrphansWithdrawn: 1}
	se.Sample(ctx)
	now = now.Add(time.Minute)
	src.drift.Replaced = 4
	se.Sample(ctx)
	now = now.Add(time.Minute)
	se.Sample(ctx)
	now = now.Add(time.Minute)
	src.counts = nil
	src.drift.Readded = 3
	se.Sample(ctx)

	srv := New(nil, newFakeRules(), newFakeRIB(), WithSeries(se))
	w := httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/v1/series", nil))
	var body SeriesBody
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != 200 {
		t.Fatalf("GET /v1/series: %d %s", w.Code, w.Body)
	}
	if body.IntervalSeconds != 60 || len(body.Points) != 3 {
		t.Fatalf("series: %+v, want 3 points a minute apart", body)
	}
	start := time.Date(2026, 11, 24, 12, 1, 0, 0, time.UTC)
	want := []SeriesPoint{
		{At: start, Active: 7, Announced: 5, DriftRepairs: 4},
		{At: start.Add(time.Minute), Active: 7, Announced: 5},
		{At: start.Add(2 * time.Minute), DriftRepairs: 1},
	}
	for i, p := range body.Points {
		if !p.At.Equal(want[i].At) || p.Active != want[i].Active || p.Announced != want[i].Announced || p.DriftRepairs != want[i].DriftRepairs {
			t.Errorf("point %d = %+v, want %+v", i, p, want[i])
		}
	}
}

// Validation parses and checks as adding does, with the same errors, and
// stores nothing.
func TestValidate(t *testing.T) {
	rules := newFakeRules()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	srv := New(nil, rules, newFakeRIB(), WithClock(func() time.Time { return now }))
	post := func(body string) (int, []byte) {
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, httptest.NewRequest("POST", "/v1/validate", strings.NewReader(body)))
		return w.Code, w.Body.Bytes()
	}
	code, body := post(`{"text": "match destination 203.0.113.7/32 protocol udp then discard", "ttl": "10m"}`)
	var v Validation
	if err := json.Unmarshal(body, &v); err != nil || code != 200 {
		t.Fatalf("valid rule: %d %s", code, body)
	}
	if !v.Valid || v.Family != "ipv4-flowspec" || v.Text != "match destination 203.0.113.7/32 protocol ==17 then discard" ||
		v.ExpiresAt == nil || !v.ExpiresAt.Equal(now.Add(10*time.Minute)) {
		t.Errorf("validation = %+v", v)
	}

	code, body = post(`{"text": "match destinaton 203.0.113.7/32 then discard"}`)
	e := wantError(t, code, body, 400, CodeInvalidRule)
	if e.Column != 7 || e.Field != "text" || !strings.Contains(e.Message, "destinaton") {
		t.Errorf("typo: %+v, want field text, column 7, the word", e)
	}
	code, body = post(`{"text": "` + ruleDiscard + `", "ttl": "soon"}`)
	if e := wantError(t, code, body, 400, CodeInvalidTTL); e.Field != "ttl" {
		t.Errorf("bad ttl: field %q", e.Field)
	}
	code, body = post(`{"text": "` + ruleDiscard + `", "sites": ["nowhere"]}`)
	if e := wantError(t, code, body, 400, CodeInvalidInput); e.Field != "sites" || !strings.Contains(e.Message, "default") {
		t.Errorf("unknown site: %+v, want field sites listing the known ones", e)
	}
	code, body = post(`{"text": "` + ruleDiscard + `", "sites": ["nowhere"], "allow_unknown_sites": true}`)
	if code != 200 {
		t.Errorf("unknown site allowed: %d %s", code, body)
	}
	if n := rules.count(); n != 0 {
		t.Errorf("validation stored %d rules", n)
	}
}

// Over TCP: the console's pages need no token (they hold no data), /
// leads to them, whoami says the token's name and role, and the API still
// needs a token.
func TestConsoleAndWhoamiOverTCP(t *testing.T) {
	pages := fstest.MapFS{"index.html": {Data: []byte("<!doctype html><title>console</title>")}}
	srv := New(nil, newFakeRules(), newFakeRIB(), WithConsole(http.StripPrefix("/ui/", http.FileServerFS(pages))))
	ts, err := newTokenSet(testTokens)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.tcpHandler(ts))
	defer hs.Close()
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path, token string) (int, string, http.Header) {
		req, _ := http.NewRequest("GET", hs.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	if code, _, h := get("/", ""); code != http.StatusFound || h.Get("Location") != "/ui/" {
		t.Errorf("GET /: %d to %q, want a redirect to /ui/", code, h.Get("Location"))
	}
	if code, body, _ := get("/ui/", ""); code != 200 || !strings.Contains(body, "console") {
		t.Errorf("GET /ui/ without a token: %d %q", code, body)
	}
	if code, _, _ := get("/v1/rules", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/rules without a token: %d, want 401", code)
	}
	if code, _, _ := get("/v1/whoami", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/whoami without a token: %d, want 401", code)
	}
	for _, tc := range []struct {
		token, name string
		role        Role
	}{{readSecret, "grafana", RoleRead}, {writeSecret, "fastnetmon", RoleWrite}} {
		code, body, _ := get("/v1/whoami", tc.token)
		var w Whoami
		if err := json.Unmarshal([]byte(body), &w); err != nil || code != 200 || w.Name != tc.name || w.Role != tc.role {
			t.Errorf("whoami as %s: %d %s", tc.name, code, body)
		}
	}

	// The control socket's whoami: the local operator, who may write.
	w := httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/v1/whoami", nil))
	if !strings.Contains(w.Body.String(), `"name":"cli"`) || !strings.Contains(w.Body.String(), `"role":"write"`) {
		t.Errorf("whoami over the socket: %s", w.Body)
	}
}

// rule validate (and rule add --dry-run) print the canonical text, or the
// parser's one-line error, and store nothing.
func TestCLIValidate(t *testing.T) {
	ts := startServer(t)
	for _, args := range [][]string{
		{"rule", "validate", "--ttl", "10m", "match destination 203.0.113.7/32 protocol udp then discard"},
		{"rule", "add", "--dry-run", "match destination 203.0.113.7/32 protocol udp then discard"},
	} {
		code, out, errOut := runCLI(t, ts.sock, args...)
		if code != 0 || out != "match destination 203.0.113.7/32 protocol ==17 then discard\n" || !strings.Contains(errOut, "nothing stored") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	code, out, errOut := runCLI(t, ts.sock, "rule", "validate", "match destinaton 203.0.113.7/32 then discard")
	if code != 1 || out != "" || !strings.HasPrefix(errOut, "ribkeeper rule validate: ") ||
		!strings.Contains(errOut, `"destinaton" (column 7)`) || strings.Count(errOut, "\n") != 1 {
		t.Errorf("typo: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if n := ts.rules.count(); n != 0 {
		t.Errorf("validation stored %d rules", n)
	}
}
