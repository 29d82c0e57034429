package api_test

import (
	"context"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/guard"
	"github.com/ribkeeper/ribkeeper/store"
)

// guardedServer serves the API over a real SQLite store behind guardrails.
func guardedServer(t *testing.T, c config.Guardrails) (*testServer, *admit.Gate, *store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "rk.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	g := newGate(st, admit.Config{Guardrails: c})
	return startServerGate(t, st, g), g, st
}

// Each guardrail refuses with 422 guardrail_violation, naming the rule and
// the guardrail, and stores nothing.
func TestGuardrailsRefuse(t *testing.T) {
	cases := []struct {
		name  string
		cfg   config.Guardrails
		setup []string // bodies stored first
		body  string
		guard string
		field string
	}{
		{"safelist", config.Guardrails{Safelist: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}},
			nil, `{"text":"` + ruleDiscard + `"}`, guard.Safelist, "text"},
		{"safelist blackhole", config.Guardrails{Safelist: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}},
			nil, `{"text":"route 203.0.113.7/32 then blackhole"}`, guard.Safelist, "text"},
		{"safelist no destination", config.Guardrails{Safelist: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}, AllowNoDestination: true},
			nil, `{"text":"match protocol udp source-port 53 then discard"}`, guard.Safelist, "text"},
		{"prefix length flowspec", config.Guardrails{PrefixLengths: map[flowspec.Family]config.Range{flowspec.IPv4: {Min: 24, Max: 32}}},
			nil, `{"text":"match destination 10.0.0.0/8 then discard"}`, guard.PrefixLength, "text"},
		{"blackhole shorter than /32 by default", config.Guardrails{},
			nil, `{"text":"route 203.0.113.0/24 then blackhole"}`, guard.PrefixLength, "text"},
		{"ttl required", config.Guardrails{RequireTTL: true},
			nil, `{"text":"` + ruleDiscard + `"}`, guard.TTLRequired, "ttl"},
		{"max ttl", config.Guardrails{MaxTTL: time.Hour},
			nil, `{"text":"` + ruleDiscard + `","ttl":"2h"}`, guard.MaxTTL, "ttl"},
		{"max active", config.Guardrails{MaxActiveRules: 1},
			[]string{`{"text":"` + ruleOther + `"}`}, `{"text":"` + ruleDiscard + `"}`, guard.MaxActive, "text"},
		{"per destination", config.Guardrails{MaxRulesPerDestination: 1},
			[]string{`{"text":"match destination 203.0.113.7/32 protocol udp then discard"}`}, `{"text":"` + ruleDiscard + `"}`, guard.MaxPerDest, "text"},
		{"rate", config.Guardrails{MaxNewRulesPerMinute: 1},
			[]string{`{"text":"` + ruleOther + `"}`}, `{"text":"` + ruleDiscard + `"}`, guard.MaxNewPerMinute, "text"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts, _, st := guardedServer(t, c.cfg)
			for _, b := range c.setup {
				if status, body := ts.do(t, "POST", "/v1/rules", b); status != 201 {
					t.Fatalf("setup %s: %d %s", b, status, body)
				}
			}
			status, body := ts.do(t, "POST", "/v1/rules", c.body)
			e := wantError(t, status, body, 422, api.CodeGuardrailViolation)
			if e.Field != c.field || !strings.Contains(e.Message, "guardrail "+c.guard) || !strings.Contains(e.Message, "rule \"") {
				t.Errorf("error %+v: want field %s and a message naming the rule and guardrail %s", e, c.field, c.guard)
			}
			rs, _ := st.List(context.Background(), "")
			if len(rs) != len(c.setup) {
				t.Errorf("store holds %d rules, want %d", len(rs), len(c.setup))
			}
		})
	}
}

// Updates of an active rule count against no quota; a batch names the
// offending element; a guardrail change applies to the next request.
func TestGuardrailsUpdatesBatchReload(t *testing.T) {
	ts, h, _ := guardedServer(t, config.Guardrails{MaxActiveRules: 1, MaxNewRulesPerMinute: 1})
	if status, body := ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleDiscard+`"}`); status != 201 {
		t.Fatalf("%d %s", status, body)
	}
	if status, body := ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleLimit+`"}`); status != 200 {
		t.Fatalf("update under quota: %d %s", status, body)
	}
	status, body := ts.do(t, "POST", "/v1/rules/batch", `{"rules":[{"text":"`+ruleLimit+`"},{"text":"`+ruleOther+`"}]}`)
	if e := wantError(t, status, body, 422, api.CodeGuardrailViolation); e.Field != "rules[1].text" {
		t.Errorf("batch field %q", e.Field)
	}
	h.SetGuardrails(config.Guardrails{})
	if status, body := ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleOther+`"}`); status != 201 {
		t.Errorf("after lifting the guardrails: %d %s", status, body)
	}
	// The CLI prints the refusal and exits 1.
	h.SetGuardrails(config.Guardrails{RequireTTL: true})
	code, _, errOut := runCLI(t, ts.sock, "route", "add", "198.51.100.9/32", "--blackhole")
	if code != 1 || !strings.Contains(errOut, "guardrail ttl_required") {
		t.Errorf("route add without ttl: exit %d, %q", code, errOut)
	}
}

// route add builds the RTBH rule text; route list shows routes only.
func TestRouteCLI(t *testing.T) {
	ts, _, _ := guardedServer(t, config.Guardrails{})
	code, out, errOut := runCLI(t, ts.sock, "route", "add", "203.0.113.7/32", "--blackhole", "--ttl", "30m", "--reason", "ddos")
	if code != 0 || !strings.Contains(errOut, "route 203.0.113.7/32 then blackhole") {
		t.Fatalf("route add: exit %d, %q %q", code, out, errOut)
	}
	code, _, errOut = runCLI(t, ts.sock, "route", "add", "2001:db8::7", "--blackhole", "--community", "64500:1", "--next-hop", "100::1")
	if code != 0 || !strings.Contains(errOut, "route 2001:db8::7/128 then blackhole community 64500:1 next-hop 100::1") {
		t.Fatalf("route add v6: exit %d, %q", code, errOut)
	}
	ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleDiscard+`"}`)
	code, out, _ = runCLI(t, ts.sock, "route", "list")
	if code != 0 || strings.Count(out, "\n") != 3 || strings.Contains(out, "discard") || !strings.Contains(out, "ddos") {
		t.Errorf("route list: exit %d\n%s", code, out)
	}
	if code, _, _ := runCLI(t, ts.sock, "route", "add", "203.0.113.7/32"); code != 2 {
		t.Errorf("route add without an action: exit %d, want 2", code)
	}
	code, _, errOut = runCLI(t, ts.sock, "route", "add", "203.0.113.0/24", "--blackhole")
	if code != 1 || !strings.Contains(errOut, "prefix_length") {
		t.Errorf("route add /24: exit %d, %q", code, errOut)
	}
}
