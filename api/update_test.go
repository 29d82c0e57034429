package api_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/api"

	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/store"
)

// sqliteServer serves the API over a real SQLite store.
func sqliteServer(t *testing.T) (*testServer, *store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "rk.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return startServerOver(t, st), st
}

// The README's tour: a second rule add of the same match without --reason
// keeps the reason; only what is given changes; --reason "" clears it;
// and updates take no ids.
func TestUpdateChangesOnlyWhatWasGiven(t *testing.T) {
	ts, st := sqliteServer(t)
	ctx := context.Background()
	add := func(args ...string) int64 {
		t.Helper()
		code, out, errOut := runCLI(t, ts.sock, append([]string{"rule", "add"}, args...)...)
		if code != 0 {
			t.Fatalf("rule add %q: exit %d, %s", args, code, errOut)
		}
		id, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		if err != nil {
			t.Fatalf("rule add %q: stdout %q", args, out)
		}
		return id
	}
	const match = "match destination 203.0.113.7/32 protocol udp source-port ==53"
	id := add("--ttl", "10m", "--reason", "DNS amplification", "--sites", "default", match+" then discard")
	first, _ := st.Get(ctx, id)
	if id2 := add("--ttl", "30m", match+" then rate-limit 125000"); id2 != id {
		t.Fatalf("update got id %d, want %d", id2, id)
	}
	r, _ := st.Get(ctx, id)
	if r.Reason != "DNS amplification" || len(r.Sites) != 1 || !r.ExpiresAt.After(first.ExpiresAt.Add(19*time.Minute)) ||
		r.Rule.Action.String() != "rate-limit 125000" {
		t.Fatalf("after an update with --ttl only: %+v", r)
	}
	// Nothing but a new action: the expiry stays too.
	add(match + " then discard")
	if r2, _ := st.Get(ctx, id); !r2.ExpiresAt.Equal(r.ExpiresAt) || r2.Reason != "DNS amplification" {
		t.Fatalf("after an update with no flags: %+v", r2)
	}
	// Explicitly empty: cleared.
	add("--reason", "", "--sites", "", "--ttl", "never", match+" then discard")
	r, _ = st.Get(ctx, id)
	if r.Reason != "" || len(r.Sites) != 0 || !r.ExpiresAt.IsZero() {
		t.Fatalf("after --reason '' --sites '' --ttl never: %+v", r)
	}
	code, out, _ := runCLI(t, ts.sock, "rule", "history", strconv.FormatInt(id, 10))
	if code != 0 || !strings.Contains(out, `reason: DNS amplification -> ""`) {
		t.Errorf("history does not show the reason cleared once:\n%s", out)
	}
	// The same over JSON: an absent field is kept, "" clears.
	ts.do(t, "POST", "/v1/rules", `{"text":"`+match+` then discard","reason":"again"}`)
	ts.do(t, "POST", "/v1/rules", `{"text":"`+match+` then discard","ttl":"5m"}`)
	if r, _ = st.Get(ctx, id); r.Reason != "again" || r.ExpiresAt.IsZero() {
		t.Fatalf("JSON update without reason: %+v", r)
	}
	// Ids are dense: new rules only take one.
	id3 := add("match destination 198.51.100.1/32 then discard")
	add("--reason", "x", "match destination 198.51.100.1/32 then discard")
	id4 := add("match destination 198.51.100.2/32 then discard")
	if id3 != id+1 || id4 != id+2 {
		t.Errorf("ids %d, %d, %d: want consecutive", id, id3, id4)
	}
}

// An update that keeps the stored expiry passes the TTL guardrails with
// the TTL the rule has left.
func TestGuardrailTTLOnUpdateKeepingExpiry(t *testing.T) {
	ts, _, _ := guardedServer(t, config.Guardrails{RequireTTL: true, MaxTTL: time.Hour})
	if code, _, errOut := runCLI(t, ts.sock, "rule", "add", "--ttl", "30m", ruleDiscard); code != 0 {
		t.Fatalf("add: %s", errOut)
	}
	if code, _, errOut := runCLI(t, ts.sock, "rule", "add", "--reason", "more", ruleLimit); code != 0 {
		t.Fatalf("update keeping the expiry refused: %s", errOut)
	}
	if code, _, errOut := runCLI(t, ts.sock, "rule", "add", "--ttl", "never", ruleLimit); code != 1 || !strings.Contains(errOut, "ttl_required") {
		t.Fatalf("update to never: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, ts.sock, "rule", "add", ruleOther); code != 1 || !strings.Contains(errOut, "ttl_required") {
		t.Fatalf("new rule without ttl: exit %d, %s", code, errOut)
	}
}

// A mistyped site is refused with the known ones, unless the operator
// says it is deliberate.
func TestUnknownSitesRefused(t *testing.T) {
	ts, st := sqliteServer(t) // registers site "default"
	code, out, errOut := runCLI(t, ts.sock, "rule", "add", "--sites", "defualt", ruleDiscard)
	if code != 1 || out != "" || !strings.Contains(errOut, `unknown site "defualt"`) || !strings.Contains(errOut, "known sites are default") ||
		!strings.Contains(errOut, "--allow-unknown-sites") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("unknown site: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	status, body := ts.do(t, "POST", "/v1/rules/batch", `{"rules":[{"text":"`+ruleOther+`"},{"text":"`+ruleDiscard+`","sites":["nowhere"]}]}`)
	if e := wantError(t, status, body, 400, api.CodeInvalidInput); e.Field != "rules[1].sites" {
		t.Errorf("batch: field %q", e.Field)
	}
	if all, _ := st.List(t.Context(), ""); len(all) != 0 {
		t.Fatalf("refused rules stored: %d", len(all))
	}
	if code, _, errOut := runCLI(t, ts.sock, "rule", "add", "--sites", "default", ruleDiscard); code != 0 {
		t.Fatalf("known site: %s", errOut)
	}
	if code, _, errOut := runCLI(t, ts.sock, "route", "add", "--sites", "lon9", "--allow-unknown-sites", "--blackhole", "203.0.113.9/32"); code != 0 {
		t.Fatalf("deliberate unknown site: %s", errOut)
	}
	status, body = ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleOther+`","sites":["lon9"],"allow_unknown_sites":true}`)
	if status != 201 {
		t.Fatalf("JSON allow_unknown_sites: %d %s", status, body)
	}
}

// A static rule (declared in a configuration) cannot be changed or
// withdrawn through the API: 409 saying where it comes from.
func TestStaticRuleRefused(t *testing.T) {
	ts, st := sqliteServer(t)
	r, _, err := st.Upsert(t.Context(), store.Input{Rule: mustParse(t, ruleDiscard), Actor: "config", Origin: "config:default"})
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range [][2]string{
		{"DELETE", "/v1/rules/" + itoa(r.ID)},
		{"POST", "/v1/rules"},
		{"POST", "/v1/rules/withdraw"},
		{"POST", "/v1/rules/batch"},
	} {
		body := ""
		switch req[1] {
		case "/v1/rules", "/v1/rules/withdraw":
			body = `{"text":"` + ruleLimit + `"}`
		case "/v1/rules/batch":
			body = `{"rules":[{"text":"` + ruleLimit + `"}]}`
		}
		status, resp := ts.do(t, req[0], req[1], body)
		if e := wantError(t, status, resp, 409, api.CodeDeclared); !strings.Contains(e.Message, "configuration of site default") || !strings.Contains(e.Message, "reload") {
			t.Errorf("%s %s: %s", req[0], req[1], e.Message)
		}
	}
	if g, _ := st.Get(t.Context(), r.ID); g.WithdrawRequested || g.Rule != mustParse(t, ruleDiscard) {
		t.Fatalf("the static rule changed: %+v", g)
	}
	code, out, _ := runCLI(t, ts.sock, "rule", "show", itoa(r.ID))
	if code != 0 || !strings.Contains(out, "declared in:  config:default") {
		t.Errorf("rule show:\n%s", out)
	}
	if code, _, errOut := runCLI(t, ts.sock, "rule", "withdraw", itoa(r.ID)); code != 1 || !strings.Contains(errOut, "comes from the configuration") {
		t.Errorf("rule withdraw: exit %d, %q", code, errOut)
	}
}
