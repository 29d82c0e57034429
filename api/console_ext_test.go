package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/config"
)

// Validation parses and checks as adding does, with the same errors, and
// stores nothing.
func TestValidate(t *testing.T) {
	rules := newFakeRules()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	srv := api.New(nil, rules, newGate(rules, admit.Config{Clock: clock.NewFake(now)}), newFakeRIB())
	post := func(body string) (int, []byte) {
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, httptest.NewRequest("POST", "/v1/validate", strings.NewReader(body)))
		return w.Code, w.Body.Bytes()
	}
	code, body := post(`{"text": "match destination 203.0.113.7/32 protocol udp then discard", "ttl": "10m"}`)
	var v api.Validation
	if err := json.Unmarshal(body, &v); err != nil || code != 200 {
		t.Fatalf("valid rule: %d %s", code, body)
	}
	if !v.Valid || v.Family != "ipv4-flowspec" || v.Text != "match destination 203.0.113.7/32 protocol ==udp then discard" ||
		v.ExpiresAt == nil || !v.ExpiresAt.Equal(now.Add(10*time.Minute)) {
		t.Errorf("validation = %+v", v)
	}

	code, body = post(`{"text": "match destinaton 203.0.113.7/32 then discard"}`)
	e := wantError(t, code, body, 400, api.CodeInvalidRule)
	if e.Column != 7 || e.Field != "text" || !strings.Contains(e.Message, "destinaton") {
		t.Errorf("typo: %+v, want field text, column 7, the word", e)
	}
	code, body = post(`{"text": "` + ruleDiscard + `", "ttl": "soon"}`)
	if e := wantError(t, code, body, 400, api.CodeInvalidTTL); e.Field != "ttl" {
		t.Errorf("bad ttl: field %q", e.Field)
	}
	code, body = post(`{"text": "` + ruleDiscard + `", "sites": ["nowhere"]}`)
	if e := wantError(t, code, body, 400, api.CodeInvalidInput); e.Field != "sites" || !strings.Contains(e.Message, "default") {
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
	srv := newAPI(nil, newFakeRules(), newFakeRIB(), api.WithConsole(http.StripPrefix("/ui/", http.FileServerFS(pages))))
	h, err := srv.TCPHandler(testTokens)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
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
		role        api.Role
	}{{readSecret, "grafana", api.RoleRead}, {writeSecret, "fastnetmon", api.RoleWrite}} {
		code, body, _ := get("/v1/whoami", tc.token)
		var w api.Whoami
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
		if code != 0 || out != "match destination 203.0.113.7/32 protocol ==udp then discard\n" || !strings.Contains(errOut, "nothing stored") {
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

// A scoped token's validation refuses what adding would: a rule outside
// its prefixes or with an action it may not use.
func TestValidateScoped(t *testing.T) {
	ss := newScopedServer(t, config.Guardrails{})
	code, body := ss.do(t, custSecret, "POST", "/v1/validate", `{"text": "match destination 192.0.2.7/32 then discard"}`)
	if code != http.StatusOK {
		t.Errorf("in scope: %d %s", code, body)
	}
	code, body = ss.do(t, custSecret, "POST", "/v1/validate", `{"text": "match destination 198.51.100.7/32 then discard"}`)
	refused(t, "outside the prefixes", code, body, "192.0.2.0/24")
	code, body = ss.do(t, custSecret, "POST", "/v1/validate", `{"text": "match destination 192.0.2.7/32 then redirect 65000:1"}`)
	refused(t, "an action it may not use", code, body, "redirect")
}
