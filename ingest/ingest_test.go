package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/ingest"
	"github.com/ribkeeper/ribkeeper/signals"
)

const (
	hookSecret = "0123456789abcdef-hook"
	amSecret   = "0123456789abcdef-am"
	fnmSecret  = "0123456789abcdef-fnm"
)

// sink is a small stateful Sink: it keeps what it accepted, and refuses
// targets in refuse.
type sink struct {
	mu     sync.Mutex
	got    []signals.Signal
	refuse map[string]bool
}

func (s *sink) Accept(_ context.Context, sig signals.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse[sig.Target.String()] {
		return errors.New("target outside the source's prefixes")
	}
	s.got = append(s.got, sig)
	return nil
}

func (s *sink) signals() []signals.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]signals.Signal(nil), s.got...)
}

type rig struct {
	t      *testing.T
	in     *ingest.Ingest
	sink   *sink
	recent *signals.Recent
	clock  *clock.Fake
	mux    *http.ServeMux
	limit  int64 // body limit, as the API's
}

func sources() []config.Source {
	hook := config.Source{Name: "hook", Kind: config.SourceWebhook, Secret: hookSecret,
		TimestampWindow: 5 * time.Minute, ReplayCache: 100, MaxSignalsPerRequest: 4}
	am := config.Source{Name: "am", Kind: config.SourceAlertmanager, Secret: amSecret,
		MaxSignalsPerRequest: 10, Labels: config.DefaultAlertLabels}
	fnm := config.Source{Name: "fnm", Kind: config.SourceFastNetMon, Secret: fnmSecret}
	gobgp := config.Source{Name: "fnm-gobgp", Kind: config.SourceGoBGP}
	return []config.Source{hook, am, fnm, gobgp}
}

func newRig(t *testing.T) *rig {
	r := &rig{t: t, sink: &sink{refuse: map[string]bool{}}, recent: signals.NewRecent(16),
		clock: clock.NewFake(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)), limit: 4096}
	in, err := ingest.New(nil, sources(), r.sink, r.recent, r.clock)
	if err != nil {
		t.Fatal(err)
	}
	r.in = in
	r.mux = http.NewServeMux()
	r.mux.Handle("POST /v1/signals/{source}", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		req.Body = http.MaxBytesReader(w, req.Body, r.limit)
		in.ServeHTTP(w, req)
	}))
	return r
}

type answer struct {
	Accepted int             `json:"accepted"`
	Refused  int             `json:"refused"`
	Results  []ingest.Result `json:"results"`
	Error    *ingest.Error   `json:"error"`
	raw      string
	code     int
	header   http.Header
}

func (r *rig) post(source string, header http.Header, body string) answer {
	r.t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/signals/"+source, strings.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	r.mux.ServeHTTP(w, req)
	a := answer{raw: w.Body.String(), code: w.Code, header: w.Header()}
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
		r.t.Fatalf("answer is not JSON: %v: %s", err, w.Body)
	}
	return a
}

// signed is the headers of body signed at ts with secret.
func signed(secret string, ts time.Time, body string) http.Header {
	return http.Header{
		ingest.HeaderTimestamp: {strconv.FormatInt(ts.Unix(), 10)},
		ingest.HeaderSignature: {ingest.Sign([]byte(secret), ts.Unix(), []byte(body))},
	}
}

const oneSignal = `{"signals": [{"target": "192.0.2.10", "state": "start", "protocol": "udp", "dst_ports": [53], "pps": 250000, "confidence": 0.9, "attack_id": "a1"}]}`

func TestWebhookGoodSignatureAccepted(t *testing.T) {
	r := newRig(t)
	a := r.post("hook", signed(hookSecret, r.clock.Now(), oneSignal), oneSignal)
	if a.code != http.StatusOK || a.Accepted != 1 {
		t.Fatalf("answer %d %s, want 200 with one accepted", a.code, a.raw)
	}
	got := r.sink.signals()
	if len(got) != 1 {
		t.Fatalf("sink got %d signals, want 1", len(got))
	}
	s := got[0]
	if s.Source != "hook" || s.Target.String() != "192.0.2.10/32" || s.State != signals.Start || s.Vector.Protocol != "udp" ||
		len(s.Vector.DstPorts) != 1 || s.Vector.DstPorts[0] != 53 || s.PPS != 250000 || s.Confidence != 0.9 || s.AttackID != "a1" || !s.At.Equal(r.clock.Now()) {
		t.Errorf("signal = %+v", s)
	}
	rec := r.recent.List(nil, 0)
	if len(rec) != 1 || !rec[0].Accepted || rec[0].Via != "webhook" {
		t.Errorf("recent = %+v", rec)
	}
	// A timestamp inside the window, either way, is fine.
	for _, d := range []time.Duration{-4 * time.Minute, 4 * time.Minute} {
		ts := r.clock.Now().Add(d)
		if a := r.post("hook", signed(hookSecret, ts, oneSignal), oneSignal); a.code != http.StatusOK {
			t.Errorf("timestamp %s off: %d %s", d, a.code, a.raw)
		}
	}
}

func TestWebhookRefusalsPassNothing(t *testing.T) {
	r := newRig(t)
	now := r.clock.Now()
	good := signed(hookSecret, now, oneSignal)
	if a := r.post("hook", good, oneSignal); a.code != http.StatusOK {
		t.Fatalf("first request: %d %s", a.code, a.raw)
	}
	before := len(r.sink.signals())
	for _, tc := range []struct {
		name   string
		header http.Header
		code   int
		want   string
	}{
		{"wrong secret", signed("another-secret-0123456789", now, oneSignal), 401, "wrong signature"},
		{"other body", signed(hookSecret, now, oneSignal+" "), 401, "wrong signature"},
		{"missing", http.Header{}, 401, "missing X-Ribkeeper-Timestamp or X-Ribkeeper-Signature"},
		{"missing signature", http.Header{ingest.HeaderTimestamp: {strconv.FormatInt(now.Unix(), 10)}}, 401, "missing"},
		{"not hex", http.Header{ingest.HeaderTimestamp: {strconv.FormatInt(now.Unix(), 10)}, ingest.HeaderSignature: {"sha256=zz"}}, 401, "64 hex digits"},
		{"timestamp not a number", http.Header{ingest.HeaderTimestamp: {"yesterday"}, ingest.HeaderSignature: good[ingest.HeaderSignature]}, 401, "not Unix seconds"},
		{"stale", signed(hookSecret, now.Add(-6*time.Minute), oneSignal), 401, "stale timestamp"},
		{"future", signed(hookSecret, now.Add(6*time.Minute), oneSignal), 401, "timestamp_window"},
		{"replay", good, 409, "replay"},
	} {
		a := r.post("hook", tc.header, oneSignal)
		if a.code != tc.code || a.Error == nil || !strings.Contains(a.Error.Message, tc.want) {
			t.Errorf("%s: %d %s, want %d with %q", tc.name, a.code, a.raw, tc.code, tc.want)
		}
	}
	if n := len(r.sink.signals()); n != before {
		t.Errorf("the sink got %d signals from refused requests", n-before)
	}
	// Every refusal is recorded, with its reason.
	refused := r.recent.List(func(rec signals.Record) bool { return !rec.Accepted }, 0)
	if len(refused) != 9 || !strings.Contains(refused[0].Reason, "replay") || refused[0].Signal.Source != "hook" {
		t.Errorf("recorded refusals = %+v", refused)
	}
	// An unknown source and a gobgp source are told where to send.
	if a := r.post("nope", good, oneSignal); a.code != 404 || !strings.Contains(a.Error.Message, "[[source]]") {
		t.Errorf("unknown source: %d %s", a.code, a.raw)
	}
	if a := r.post("fnm-gobgp", good, oneSignal); a.code != 404 || !strings.Contains(a.Error.Message, "kind gobgp") {
		t.Errorf("gobgp source: %d %s", a.code, a.raw)
	}
}

func TestWebhookBadSignalRefusesTheRequestWhole(t *testing.T) {
	r := newRig(t)
	for _, tc := range []struct{ body, field, want string }{
		{`{"signals": [{"target": "192.0.2.1", "state": "start"}, {"target": "192.0.2.300", "state": "start"}]}`, "signals[1]", "not an IP address"},
		{`{"signals": [{"target": "192.0.2.1", "state": "begun"}]}`, "signals[0]", "state"},
		{`{"signals": [{"target": "192.0.2.1/24", "state": "start"}]}`, "signals[0]", "host bits"},
		{`{"signals": [{"target": "192.0.2.1", "state": "start", "colour": "red"}]}`, "signals[0]", "colour"},
		{`{"signals": [{"target": "192.0.2.1", "state": "start", "pps": "lots"}]}`, "signals[0]", "pps"},
		{`{"signals": []}`, "", "no signals"},
		{`{"signal": []}`, "signal", "unknown"},
		{`[]`, "", "not a JSON object"},
		{`{"signals": [{"target": "192.0.2.1", "state": "start"}]} {}`, "", "data after"},
	} {
		a := r.post("hook", signed(hookSecret, r.clock.Now(), tc.body), tc.body)
		if a.code != 400 || a.Error == nil || a.Error.Field != tc.field || !strings.Contains(a.Error.Message, tc.want) {
			t.Errorf("%s: %d %s, want 400 field %q with %q", tc.body, a.code, a.raw, tc.field, tc.want)
		}
	}
	if n := len(r.sink.signals()); n != 0 {
		t.Errorf("the sink got %d signals from refused requests", n)
	}
}

func TestWebhookBounds(t *testing.T) {
	r := newRig(t)
	// More signals than max_signals_per_request (4): refused, none taken.
	var many []string
	for i := range 5 {
		many = append(many, fmt.Sprintf(`{"target": "192.0.2.%d", "state": "start"}`, i+1))
	}
	body := `{"signals": [` + strings.Join(many, ",") + `]}`
	a := r.post("hook", signed(hookSecret, r.clock.Now(), body), body)
	if a.code != http.StatusRequestEntityTooLarge || a.Error.Code != ingest.CodeTooMany || !strings.Contains(a.Error.Message, "max_signals_per_request") {
		t.Errorf("5 signals: %d %s", a.code, a.raw)
	}
	// A body over the API's limit.
	big := `{"signals": [{"target": "192.0.2.1", "state": "start", "detail": "` + strings.Repeat("x", int(r.limit)) + `"}]}`
	if a := r.post("hook", signed(hookSecret, r.clock.Now(), big), big); a.code != http.StatusRequestEntityTooLarge || a.Error.Code != ingest.CodeBodyTooLarge {
		t.Errorf("big body: %d %s", a.code, a.raw)
	}
	if n := len(r.sink.signals()); n != 0 {
		t.Fatalf("the sink got %d signals from refused requests", n)
	}
	// With a replay cache of 3 signatures, the fourth request within the
	// window is refused, and told when to retry.
	small := sources()
	small[0].ReplayCache = 3
	if err := r.in.SetSources(small); err != nil {
		t.Fatal(err)
	}
	start := r.clock.Now()
	for i := range 3 {
		ts := start.Add(time.Duration(i) * time.Second)
		if a := r.post("hook", signed(hookSecret, ts, oneSignal), oneSignal); a.code != 200 {
			t.Fatalf("request %d: %d %s", i+1, a.code, a.raw)
		}
	}
	ts := start.Add(3 * time.Second)
	a = r.post("hook", signed(hookSecret, ts, oneSignal), oneSignal)
	if a.code != http.StatusTooManyRequests || a.Error.Code != ingest.CodeReplayFull || !strings.Contains(a.Error.Message, "replay_cache") ||
		a.header.Get("Retry-After") != "300" {
		t.Fatalf("fourth request: %d %s Retry-After %q", a.code, a.raw, a.header.Get("Retry-After"))
	}
	// Once the oldest leaves the window, there is room again.
	r.clock.Advance(5*time.Minute + time.Second)
	ts = r.clock.Now()
	if a := r.post("hook", signed(hookSecret, ts, oneSignal), oneSignal); a.code != 200 {
		t.Fatalf("after the window: %d %s", a.code, a.raw)
	}
	if n := len(r.sink.signals()); n != 4 {
		t.Errorf("the sink got %d signals, want 4", n)
	}
}

func TestSinkRefusalAnswers422(t *testing.T) {
	r := newRig(t)
	r.sink.refuse["192.0.2.2/32"] = true
	body := `{"signals": [{"target": "192.0.2.1", "state": "start"}, {"target": "192.0.2.2", "state": "start"}]}`
	a := r.post("hook", signed(hookSecret, r.clock.Now(), body), body)
	if a.code != 422 || a.Accepted != 1 || a.Refused != 1 || a.Error.Code != ingest.CodeRefused ||
		!strings.Contains(a.Error.Message, "outside the source's prefixes") || a.Results[1].Accepted {
		t.Fatalf("answer %d %s", a.code, a.raw)
	}
	rec := r.recent.List(nil, 0)
	if len(rec) != 2 || rec[0].Accepted || rec[0].Reason != "target outside the source's prefixes" || !rec[1].Accepted {
		t.Errorf("recent = %+v", rec)
	}
}

func amBody(alerts ...string) string {
	return `{"version": "4", "groupKey": "{}:{}", "truncatedAlerts": 0, "status": "firing", "receiver": "ribkeeper",
 "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {}, "externalURL": "http://am", "alerts": [` + strings.Join(alerts, ",") + `]}`
}

func amAlert(status, fingerprint, labels string) string {
	return `{"status": "` + status + `", "labels": {` + labels + `}, "annotations": {"summary": "UDP flood"},
 "startsAt": "2026-11-25T12:00:00Z", "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "", "fingerprint": "` + fingerprint + `"}`
}

func TestAlertmanager(t *testing.T) {
	r := newRig(t)
	auth := http.Header{"Authorization": {"Bearer " + amSecret}}
	firing := amBody(amAlert("firing", "f1", `"alertname": "DDoS", "instance": "198.51.100.7:9100", "protocol": "udp", "dst_port": "53,123", "pps": "1.5e6"`))
	for _, h := range []http.Header{{}, {"Authorization": {"Bearer wrong-secret-0123456789"}}, {"Authorization": {"Bearer " + hookSecret}}} {
		if a := r.post("am", h, firing); a.code != 401 {
			t.Errorf("auth %v: %d %s", h, a.code, a.raw)
		}
	}
	if n := len(r.sink.signals()); n != 0 {
		t.Fatalf("unauthenticated alerts reached the sink: %d", n)
	}
	for i, want := range []signals.State{signals.Start, signals.Ongoing} {
		if a := r.post("am", auth, firing); a.code != 200 || a.Accepted != 1 {
			t.Fatalf("firing %d: %d %s", i+1, a.code, a.raw)
		}
		s := r.sink.signals()[i]
		if s.State != want || s.Source != "am" || s.Target.String() != "198.51.100.7/32" || s.Vector.Protocol != "udp" ||
			len(s.Vector.DstPorts) != 2 || s.PPS != 1500000 || s.AttackID != "f1" || s.Detail != "UDP flood" {
			t.Errorf("firing %d: signal %+v", i+1, s)
		}
	}
	resolved := amBody(amAlert("resolved", "f1", `"alertname": "DDoS", "instance": "198.51.100.7:9100"`))
	if a := r.post("am", auth, resolved); a.code != 200 {
		t.Fatalf("resolved: %d %s", a.code, a.raw)
	}
	if s := r.sink.signals()[2]; s.State != signals.End || s.Target.String() != "198.51.100.7/32" {
		t.Errorf("resolved: %+v", s)
	}
	// Firing again after the end is a new start.
	if a := r.post("am", auth, firing); a.code != 200 || r.sink.signals()[3].State != signals.Start {
		t.Errorf("firing after resolved: %d %s", a.code, a.raw)
	}
	// An alert without a target is refused, with the labels to set; the
	// others of the notification are taken.
	mixed := amBody(amAlert("firing", "f2", `"alertname": "NoTarget"`), amAlert("firing", "f3", `"alertname": "DDoS", "target": "2001:db8::7"`))
	a := r.post("am", auth, mixed)
	if a.code != 422 || a.Accepted != 1 || a.Refused != 1 || !strings.Contains(a.Error.Message, "target, instance") {
		t.Errorf("mixed: %d %s", a.code, a.raw)
	}
	if s := r.sink.signals(); len(s) != 5 || s[4].Target.String() != "2001:db8::7/128" {
		t.Errorf("mixed: sink has %+v", s)
	}
	// Too many alerts, and a body that is not a notification.
	var many []string
	for i := range 11 {
		many = append(many, amAlert("firing", fmt.Sprint(i), `"target": "192.0.2.1"`))
	}
	if a := r.post("am", auth, amBody(many...)); a.code != 413 || !strings.Contains(a.Error.Message, "max_alerts") {
		t.Errorf("11 alerts: %d %s", a.code, a.raw)
	}
	if a := r.post("am", auth, `{"version": "3", "alerts": []}`); a.code != 400 || a.Error.Field != "version" {
		t.Errorf("version 3: %d %s", a.code, a.raw)
	}
	if n := len(r.sink.signals()); n != 5 {
		t.Errorf("sink has %d signals, want 5", n)
	}
}

func TestFastNetMon(t *testing.T) {
	r := newRig(t)
	auth := http.Header{"Authorization": {"Bearer " + fnmSecret}}
	ban := `{"ip": "203.0.113.9", "direction": "incoming", "pps": 100500, "action": "ban", "details": "IP: 203.0.113.9\nAttack type: syn_flood\nAttack protocol: tcp\n"}`
	if a := r.post("fnm", http.Header{"Authorization": {"Bearer " + amSecret}}, ban); a.code != 401 {
		t.Errorf("another source's secret: %d %s", a.code, a.raw)
	}
	if a := r.post("fnm", auth, ban); a.code != 200 {
		t.Fatalf("ban: %d %s", a.code, a.raw)
	}
	unban := `{"ip": "203.0.113.9", "direction": "incoming", "pps": 0, "action": "unban"}`
	if a := r.post("fnm", auth, unban); a.code != 200 {
		t.Fatalf("unban: %d %s", a.code, a.raw)
	}
	got := r.sink.signals()
	// Ban and unban are one incident: the same target, no vector.
	if len(got) != 2 || got[0].State != signals.Start || got[0].Vector.Key() != got[1].Vector.Key() || got[0].PPS != 100500 ||
		!strings.Contains(got[0].Detail, "syn_flood") || !strings.Contains(got[0].Detail, "protocol tcp") ||
		got[1].State != signals.End || got[1].Target.String() != "203.0.113.9/32" {
		t.Fatalf("signals = %+v", got)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"ip": "203.0.113.9", "direction": "outgoing", "pps": 1, "action": "ban"}`, "only incoming"},
		{`{"ip": "203.0.113.9; rm -rf /", "direction": "incoming", "pps": 1, "action": "ban"}`, "not an IP address"},
		{`{"ip": "203.0.113.9", "direction": "incoming", "pps": 1, "action": "block"}`, "not ban, unban"},
		{`IP: 203.0.113.9`, "not a forwarded FastNetMon call"},
	} {
		if a := r.post("fnm", auth, tc.body); a.code/100 != 4 || !strings.Contains(a.Error.Message, tc.want) {
			t.Errorf("%s: %d %s", tc.body, a.code, a.raw)
		}
	}
	if n := len(r.sink.signals()); n != 2 {
		t.Errorf("refused calls reached the sink: %d", n-2)
	}
}

// A reload keeps a webhook source's replay cache: a request accepted
// before it is still a replay after it; a changed secret starts anew.
func TestReloadKeepsReplayCache(t *testing.T) {
	r := newRig(t)
	h := signed(hookSecret, r.clock.Now(), oneSignal)
	if a := r.post("hook", h, oneSignal); a.code != 200 {
		t.Fatal(a.raw)
	}
	if err := r.in.SetSources(sources()); err != nil {
		t.Fatal(err)
	}
	if a := r.post("hook", h, oneSignal); a.code != 409 {
		t.Errorf("replay after reload: %d %s", a.code, a.raw)
	}
	src := sources()
	src[0].Secret = "a-new-secret-0123456789"
	if err := r.in.SetSources(src); err != nil {
		t.Fatal(err)
	}
	if a := r.post("hook", h, oneSignal); a.code != 401 {
		t.Errorf("old secret after rotation: %d %s", a.code, a.raw)
	}
}

// Requests refused before they were authenticated cannot push a source's
// signals out of the ring: at most 10 of them a second are recorded.
func TestUnauthenticatedRefusalsRecordedWithinABound(t *testing.T) {
	r := newRig(t)
	if a := r.post("hook", signed(hookSecret, r.clock.Now(), oneSignal), oneSignal); a.code != 200 {
		t.Fatal(a.raw)
	}
	for range 100 {
		if a := r.post("hook", http.Header{}, oneSignal); a.code != 401 {
			t.Fatalf("unsigned: %d", a.code)
		}
	}
	rec := r.recent.List(nil, 0)
	if len(rec) != 11 || !rec[10].Accepted {
		t.Fatalf("ring holds %d records (want the signal and 10 refusals)", len(rec))
	}
	r.clock.Advance(time.Second)
	r.post("hook", http.Header{}, oneSignal)
	if n := len(r.recent.List(nil, 0)); n != 12 {
		t.Errorf("the next second: %d records, want 12", n)
	}
}
