package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
)

const (
	custSecret = "cust-secret-0123456789"
	nocSecret  = "noc-secret-0123456789"
	viewSecret = "view-secret-0123456789"
)

// scopedServer is the TCP API's handler over a real SQLite store behind
// the guardrails, with three tokens: "cust" (write, scoped to
// 192.0.2.0/24 and 2001:db8:c::/48, discard/rate-limit/rtbh, at most 3
// rules of its own), "noc" (write, unscoped) and "view" (read, scoped to
// 192.0.2.0/25).
type scopedServer struct {
	h     http.Handler
	st    *store.Store
	rib   *fakeRIB
	diffs *fakePreview
}

type fakePreview struct {
	fakePasses
	plan reconcile.Plan
}

func (f *fakePreview) Preview(context.Context) (reconcile.Plan, error) { return f.plan, nil }

func newScopedServer(t *testing.T, g config.Guardrails) *scopedServer {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "rk.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ss := &scopedServer{st: st, rib: newFakeRIB(), diffs: &fakePreview{}}
	srv := api.New(nil, st, newGate(st, admit.Config{Guardrails: g}), ss.rib, api.WithReconciler(ss.diffs))
	h, err := srv.TCPHandler([]api.Token{
		{Name: "cust", Role: api.RoleWrite, Secret: custSecret,
			Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8:c::/48")},
			Actions:  []string{"discard", "rate-limit", "blackhole"}, MaxActiveRules: 3},
		{Name: "noc", Role: api.RoleWrite, Secret: nocSecret},
		{Name: "view", Role: api.RoleRead, Secret: viewSecret, Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/25")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ss.h = h
	return ss
}

func (ss *scopedServer) do(t *testing.T, secret, method, path, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, "http://rk"+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	ss.h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// add stores text with secret's token and returns the rule id, failing the
// test unless it was accepted.
func (ss *scopedServer) add(t *testing.T, secret, text string) int64 {
	t.Helper()
	code, body := ss.do(t, secret, "POST", "/v1/rules", fmt.Sprintf(`{"text":%q}`, text))
	if code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("add %q: %d %s", text, code, body)
	}
	var r api.Rule
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	return r.ID
}

// refused checks a 403 out_of_scope whose message holds every one of want.
func refused(t *testing.T, what string, code int, body string, want ...string) {
	t.Helper()
	if code != http.StatusForbidden || !strings.Contains(body, `"code":"`+api.CodeOutOfScope+`"`) {
		t.Errorf("%s: %d %s, want 403 %s", what, code, body, api.CodeOutOfScope)
		return
	}
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("%s: %s lacks %q", what, body, w)
		}
	}
}

// A scoped token adds rules whose destination lies wholly inside one of
// its prefixes, IPv4 and IPv6; a wider or overlapping destination, one
// outside, or none at all is refused with 403 naming the prefixes.
func TestScopedTokenPrefixes(t *testing.T) {
	ss := newScopedServer(t, config.Guardrails{})
	for _, text := range []string{
		"match destination 192.0.2.7/32 protocol udp then discard",
		"match destination 192.0.2.0/24 protocol tcp then rate-limit 125000",
		"match destination 2001:db8:c:1::/64 then discard",
	} {
		ss.add(t, custSecret, text)
	}
	for _, c := range []struct{ text, dest string }{
		{"match destination 192.0.0.0/16 then discard", "destination 192.0.0.0/16, outside them"},        // contains the token's /24
		{"match destination 10.0.0.0/8 then discard", "destination 10.0.0.0/8, outside them"},            // a /16 token cannot act on a /8
		{"match destination 192.0.3.0/24 then discard", "destination 192.0.3.0/24, outside them"},        // next to it
		{"match destination 2001:db8::/32 then discard", "destination 2001:db8::/32, outside them"},      // wider IPv6
		{"match destination 2001:db8:d::1/128 then discard", "destination 2001:db8:d::1/128, outside"},   // other IPv6
		{"match destination ::ffff:192.0.2.7/128 then discard", "destination ::ffff:192.0.2.7/128, out"}, // IPv4-mapped is IPv6
		{"route 198.51.100.1/32 then blackhole", "destination 198.51.100.1/32, outside them"},
		{"match protocol udp source-port ==53 then discard", "no destination prefix"},
	} {
		code, body := ss.do(t, custSecret, "POST", "/v1/rules", fmt.Sprintf(`{"text":%q}`, c.text))
		refused(t, c.text, code, body, `token \"cust\" may act only on destinations inside 192.0.2.0/24, 2001:db8:c::/48`, c.dest)
	}
	// In a batch, the field names the rule at fault and nothing is stored.
	code, body := ss.do(t, custSecret, "POST", "/v1/rules/batch",
		`{"rules":[{"text":"match destination 192.0.2.9/32 then discard"},{"text":"match destination 198.51.100.0/24 then discard"}]}`)
	refused(t, "batch", code, body, `"field":"rules[1].text"`, "198.51.100.0/24")
	if n, _ := ss.st.QuotaCounts(context.Background(), store.QuotaQuery{Total: true}); n.Active != 3 {
		t.Errorf("%d active rules after refusals, want 3", n.Active)
	}
	// The unscoped token may add anywhere.
	ss.add(t, nocSecret, "match destination 10.0.0.0/8 then discard")
}

// A scoped token uses only its actions, named as rule text names them.
func TestScopedTokenActions(t *testing.T) {
	ss := newScopedServer(t, config.Guardrails{})
	ss.add(t, custSecret, "match destination 192.0.2.7/32 then rate-limit 1000")
	ss.add(t, custSecret, "route 192.0.2.8/32 then blackhole")
	for _, c := range []struct{ text, action string }{
		{"match destination 192.0.2.9/32 then redirect 65000:100", "redirect"},
		{"match destination 192.0.2.9/32 then rate-limit 1000 action sample", "action"},
		{"match destination 192.0.2.9/32 then rate-limit-packets 10", "rate-limit-packets"},
	} {
		code, body := ss.do(t, custSecret, "POST", "/v1/rules", fmt.Sprintf(`{"text":%q}`, c.text))
		refused(t, c.text, code, body, `token \"cust\" may not use action `+c.action+`; it may use discard, rate-limit, rtbh`)
	}
}

// A scoped token's quota counts only the rules it wrote; updating its own
// rule is free; the guardrails apply on top.
func TestScopedTokenQuota(t *testing.T) {
	ss := newScopedServer(t, config.Guardrails{MaxActiveRules: 5})
	// The noc's rules inside the token's prefixes do not count against it.
	ss.add(t, nocSecret, "match destination 192.0.2.100/32 then discard")
	for i := range 3 {
		ss.add(t, custSecret, fmt.Sprintf("match destination 192.0.2.%d/32 then discard", i+1))
	}
	ss.add(t, custSecret, "match destination 192.0.2.1/32 then rate-limit 1000") // update
	code, body := ss.do(t, custSecret, "POST", "/v1/rules", `{"text":"match destination 192.0.2.4/32 then discard"}`)
	refused(t, "fourth rule", code, body, `token \"cust\" would have 4 active rules; its max_active_rules is 3`, "withdraw some of its rules first")
	// The noc's rule inside its prefixes is not the token's to change
	// (no others_rules): turning a discard into rate-limit 5 would let
	// traffic through.
	code, body = ss.do(t, custSecret, "POST", "/v1/rules", `{"text":"match destination 192.0.2.100/32 then rate-limit 5"}`)
	refused(t, "taking over the noc's rule", code, body, `rule 1 was written by \"noc\"`, "others_rules")
	// Withdrawing one frees a place.
	code, body = ss.do(t, custSecret, "DELETE", "/v1/rules/2", "")
	if code != http.StatusAccepted {
		t.Fatalf("withdraw own rule: %d %s", code, body)
	}
	ss.add(t, custSecret, "match destination 192.0.2.4/32 then discard")
	// The guardrails still apply: 5 active rules in total.
	ss.add(t, nocSecret, "match destination 10.0.0.1/32 then discard")
	code, body = ss.do(t, nocSecret, "POST", "/v1/rules", `{"text":"match destination 10.0.0.2/32 then discard"}`)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "max_active_rules") {
		t.Errorf("guardrail on top: %d %s", code, body)
	}
}

// Listing, showing, history, withdrawing, the RIB and the diff show a
// scoped token only the rules inside its prefixes; acting on another
// scope's rule is refused naming the prefix.
func TestScopedTokenSeesOnlyItsScope(t *testing.T) {
	ss := newScopedServer(t, config.Guardrails{AllowNoDestination: true})
	mine := ss.add(t, custSecret, "match destination 192.0.2.7/32 then discard")
	upper := ss.add(t, custSecret, "match destination 192.0.2.200/32 then discard")
	other := ss.add(t, nocSecret, "match destination 198.51.100.7/32 then discard")
	wide := ss.add(t, nocSecret, "match destination 192.0.0.0/16 then discard")
	global := ss.add(t, nocSecret, "match protocol gre then discard")
	ids := func(body string) []int64 {
		var l api.RuleList
		if err := json.Unmarshal([]byte(body), &l); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		var out []int64
		for _, r := range l.Rules {
			out = append(out, r.ID)
		}
		return out
	}
	for _, c := range []struct {
		secret, path string
		want         []int64
	}{
		{custSecret, "/v1/rules", []int64{upper, mine}},
		{custSecret, "/v1/rules?order=precedence", []int64{mine, upper}},
		{custSecret, "/v1/rules?limit=2", []int64{upper, mine}},
		{custSecret, "/v1/rules?limit=1", []int64{upper}},
		{custSecret, fmt.Sprintf("/v1/rules?limit=1&after=%d", upper), []int64{mine}},
		{viewSecret, "/v1/rules?state=active", []int64{mine}},
		{nocSecret, "/v1/rules", []int64{global, wide, other, upper, mine}},
	} {
		code, body := ss.do(t, c.secret, "GET", c.path, "")
		if got := ids(body); code != http.StatusOK || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("GET %s: %d %v, want %v", c.path, code, got, c.want)
		}
	}
	// Another scope's rule is indistinguishable from one that does not
	// exist: the same status and the same body, with its id in place of
	// the unknown one, and nothing about its destination.
	_, unknown := ss.do(t, custSecret, "GET", "/v1/rules/999999", "")
	for _, c := range []struct {
		secret, method, path string
		id                   int64
	}{
		{custSecret, "GET", "/v1/rules/%d", other},
		{custSecret, "GET", "/v1/rules/%d/history", wide},
		{viewSecret, "GET", "/v1/rules/%d", upper},
		{custSecret, "DELETE", "/v1/rules/%d", wide},
		{custSecret, "DELETE", "/v1/rules/%d", global},
	} {
		code, body := ss.do(t, c.secret, c.method, fmt.Sprintf(c.path, c.id), "")
		want := strings.ReplaceAll(unknown, "999999", fmt.Sprint(c.id))
		if code != http.StatusNotFound || body != want {
			t.Errorf("%s %s: %d %s, want 404 %s", c.method, fmt.Sprintf(c.path, c.id), code, body, want)
		}
	}
	var code int
	var body string
	if code, body := ss.do(t, custSecret, "GET", fmt.Sprintf("/v1/rules/%d/history", mine), ""); code != http.StatusOK || !strings.Contains(body, `"actor":"cust"`) {
		t.Errorf("history of its own rule: %d %s", code, body)
	}
	// Withdrawing another scope's rule by text is refused naming the
	// caller's own text, nothing stored.
	code, body = ss.do(t, custSecret, "POST", "/v1/rules/withdraw", `{"text":"match destination 198.51.100.7/32 then discard"}`)
	refused(t, "withdraw by text", code, body, "198.51.100.7/32")
	if r, _ := ss.st.Get(context.Background(), wide); r.WithdrawRequested {
		t.Error("a refused withdrawal withdrew the rule")
	}
	code, body = ss.do(t, custSecret, "DELETE", fmt.Sprintf("/v1/rules/%d", mine), "")
	if code != http.StatusAccepted || !strings.Contains(body, `"actor":"cust"`) {
		t.Errorf("withdraw its own rule: %d %s", code, body)
	}
	// The RIB and the diff.
	for _, text := range []string{"match destination 192.0.2.7/32 then discard", "match destination 198.51.100.7/32 then discard"} {
		ss.rib.announce(mustParse(t, text))
	}
	code, body = ss.do(t, custSecret, "GET", "/v1/rib", "")
	if code != http.StatusOK || !strings.Contains(body, "192.0.2.7/32") || strings.Contains(body, "198.51.100.7") {
		t.Errorf("rib: %d %s", code, body)
	}
	ss.diffs.plan = reconcile.Plan{
		Add:      []reconcile.Item{{ID: upper, Match: mustParse(t, "match destination 192.0.2.200/32 then discard").Match}},
		Withdraw: []reconcile.Item{{Match: mustParse(t, "match destination 198.51.100.9/32 then discard").Match}},
		Adopt:    []reconcile.Item{{ID: other, Match: mustParse(t, "match destination 198.51.100.7/32 then discard").Match}},
	}
	code, body = ss.do(t, custSecret, "GET", "/v1/diff", "")
	var d api.Diff
	if err := json.Unmarshal([]byte(body), &d); code != http.StatusOK || err != nil || len(d.Add) != 1 || len(d.Withdraw) != 0 || d.Adopted != 0 {
		t.Errorf("diff: %d %s", code, body)
	}
}

// unknownID is an id no rule has in these tests.
const unknownID = 999999

// unknown checks that GET path (a format of one rule id) of rule id
// answers secret's token exactly what it answers for an id no rule has:
// the same status, content type and body, the id aside.
func (ss *scopedServer) unknown(t *testing.T, secret, path string, id int64) {
	t.Helper()
	wantCode, want := ss.do(t, secret, "GET", fmt.Sprintf(path, unknownID), "")
	want = strings.ReplaceAll(want, fmt.Sprint(unknownID), fmt.Sprint(id))
	code, body := ss.do(t, secret, "GET", fmt.Sprintf(path, id), "")
	if wantCode != http.StatusNotFound || code != wantCode || body != want {
		t.Errorf("GET %s: %d %s\nwant what an unknown id gets: %d %s", fmt.Sprintf(path, id), code, body, wantCode, want)
	}
}

// A scoped read token walking rule ids learns nothing of other scopes'
// rules: each answers exactly as an id no rule has (no destination, no
// 403 that tells a rule is there), for the rule and its history alike,
// whether the rule is active, withdrawn or has no destination at all.
func TestScopedTokenWalkingIDsLearnsNothing(t *testing.T) {
	ss := newScopedServer(t, config.Guardrails{AllowNoDestination: true})
	var others []int64
	for _, text := range []string{
		"match destination 198.51.100.7/32 then discard",
		"match destination 192.0.2.200/32 then discard", // the view token's /24, not its /25
		"match destination 192.0.0.0/16 then discard",
		"match protocol gre then discard",
		"route 203.0.113.9/32 then blackhole",
	} {
		others = append(others, ss.add(t, nocSecret, text))
	}
	mine := ss.add(t, nocSecret, "match destination 192.0.2.7/32 then discard")
	if _, err := ss.st.Withdraw(context.Background(), others[0], "noc"); err != nil {
		t.Fatal(err)
	}
	for _, id := range others {
		for _, path := range []string{"/v1/rules/%d", "/v1/rules/%d/history"} {
			ss.unknown(t, viewSecret, path, id)
		}
	}
	// Its own rule is there.
	if code, body := ss.do(t, viewSecret, "GET", fmt.Sprintf("/v1/rules/%d", mine), ""); code != http.StatusOK || !strings.Contains(body, "192.0.2.7/32") {
		t.Errorf("GET its own rule: %d %s", code, body)
	}
}

// GET /v1/whoami says who the token is and what it may do.
func TestWhoami(t *testing.T) {
	ss := newScopedServer(t, config.Guardrails{})
	for secret, want := range map[string]api.Whoami{
		custSecret: {Name: "cust", Role: api.RoleWrite, Prefixes: []string{"192.0.2.0/24", "2001:db8:c::/48"}, Actions: []string{"discard", "rate-limit", "rtbh"}, MaxActiveRules: 3},
		nocSecret:  {Name: "noc", Role: api.RoleWrite, Prefixes: []string{}, Actions: []string{}},
		viewSecret: {Name: "view", Role: api.RoleRead, Prefixes: []string{"192.0.2.0/25"}, Actions: []string{}},
	} {
		code, body := ss.do(t, secret, "GET", "/v1/whoami", "")
		var got api.Whoami
		if err := json.Unmarshal([]byte(body), &got); code != http.StatusOK || err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("whoami %s: %d %s, want %+v", want.Name, code, body, want)
		}
		for _, field := range []string{`"name"`, `"role"`, `"prefixes"`, `"actions"`, `"max_active_rules"`} {
			if !strings.Contains(body, field) {
				t.Errorf("whoami %s: %s lacks %s", want.Name, body, field)
			}
		}
	}
	// The control socket is the local operator.
	ts := startServer(t)
	code, body := ts.do(t, "GET", "/v1/whoami", "")
	if code != http.StatusOK || !strings.Contains(string(body), `"name":"cli","role":"write","prefixes":[],"actions":[],"max_active_rules":0`) {
		t.Errorf("whoami over the socket: %d %s", code, body)
	}
}

// Tokens with a bad scope are refused when the listener is set up.
func TestTokenScopeChecked(t *testing.T) {
	for _, tok := range []api.Token{
		{Name: "a", Role: api.RoleWrite, Secret: custSecret, Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.1/24")}},
		{Name: "a", Role: api.RoleWrite, Secret: custSecret, Actions: []string{"drop"}},
		{Name: "a", Role: api.RoleWrite, Secret: custSecret, MaxActiveRules: -1},
	} {
		if err := api.CheckTokens([]api.Token{tok}); err == nil {
			t.Errorf("token %+v accepted", tok)
		}
	}
}

// The gate's refusals keep their meaning over HTTP: a batch beyond
// [limits] is 413 too_many_rules, a scoped token's rate 429 rate_limited
// with Retry-After.
func TestGateRefusalsOverHTTP(t *testing.T) {
	st, err := store.Open(context.Background(), store.Config{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "rk.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := api.New(nil, st, newGate(st, admit.Config{Limits: admit.Limits{MaxBatchRules: 2, ScopedNewRulesPerMinute: 1}}), newFakeRIB())
	h, err := srv.TCPHandler([]api.Token{{Name: "cust", Role: api.RoleWrite, Secret: custSecret,
		Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}})
	if err != nil {
		t.Fatal(err)
	}
	do := func(path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "http://127.0.0.1"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+custSecret)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	rec := do("/v1/rules/batch", `{"rules":[{"text":"route 192.0.2.1/32 then blackhole"},{"text":"route 192.0.2.2/32 then blackhole"},{"text":"route 192.0.2.3/32 then blackhole"}]}`)
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), `"too_many_rules"`) || !strings.Contains(rec.Body.String(), "max_batch_rules") {
		t.Errorf("batch of 3 with max 2: %d %s", rec.Code, rec.Body)
	}
	if rec := do("/v1/rules", `{"text":"route 192.0.2.1/32 then blackhole","ttl":"10m"}`); rec.Code != http.StatusCreated {
		t.Fatalf("first rule: %d %s", rec.Code, rec.Body)
	}
	rec = do("/v1/rules", `{"text":"route 192.0.2.2/32 then blackhole","ttl":"10m"}`)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "scoped_new_rules_per_minute") {
		t.Errorf("second new rule in a minute: %d %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
}
