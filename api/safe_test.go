package api_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/guard"
)

// A rule added without a TTL is stored with the default TTL, also in a
// batch; an update without one keeps the expiry; "never" is refused.
func TestDefaultTTLStored(t *testing.T) {
	ts, _, st := guardedServer(t, config.Guardrails{})
	before := time.Now()
	status, body := ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleDiscard+`"}`)
	if status != 201 {
		t.Fatalf("%d %s", status, body)
	}
	r := decode[api.Rule](t, body)
	if r.ExpiresAt == nil || r.ExpiresAt.Before(before.Add(time.Hour-time.Second)) || r.ExpiresAt.After(time.Now().Add(time.Hour)) {
		t.Fatalf("new rule without a ttl expires %v, want in an hour", r.ExpiresAt)
	}
	status, body = ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleLimit+`","reason":"update"}`)
	if up := decode[api.Rule](t, body); status != 200 || up.ExpiresAt == nil || !up.ExpiresAt.Equal(*r.ExpiresAt) {
		t.Errorf("update without a ttl: %d %s, want the expiry kept (%v)", status, body, r.ExpiresAt)
	}
	status, body = ts.do(t, "POST", "/v1/rules/batch", `{"rules":[{"text":"match destination 203.0.113.8/32 then discard"},{"text":"match destination 203.0.113.9/32 then discard","ttl":"5m"}]}`)
	l := decode[api.RuleList](t, body)
	if status != 200 || len(l.Rules) != 2 || l.Rules[0].ExpiresAt == nil || l.Rules[1].ExpiresAt == nil || !l.Rules[1].ExpiresAt.Before(*l.Rules[0].ExpiresAt) {
		t.Errorf("batch: %d %s", status, body)
	}
	status, body = ts.do(t, "POST", "/v1/rules", `{"text":"match destination 203.0.113.10/32 then discard","ttl":"never"}`)
	if e := wantError(t, status, body, 422, api.CodeGuardrailViolation); e.Field != "ttl" || !strings.Contains(e.Message, "guardrail never_expire") || !strings.Contains(e.Message, "allow_never_expire") {
		t.Errorf("ttl never: %+v", e)
	}
	rs, _ := st.List(context.Background(), "")
	for _, r := range rs {
		if r.ExpiresAt.IsZero() {
			t.Errorf("rule %d (%s) never expires", r.ID, r.Text)
		}
	}
}

// POST /v1/validate, rule validate and rule add --dry-run name the
// guardrail a rule breaks, say when it would expire, warn about what is
// allowed but dangerous, and store nothing.
func TestValidateGuardrails(t *testing.T) {
	ts, _, st := guardedServer(t, config.Guardrails{
		Protected: config.Protected{Own: []netip.Addr{netip.MustParseAddr("192.0.2.1")}, Neighbors: []netip.Addr{netip.MustParseAddr("192.0.2.2")}, Ports: []uint16{179}},
	})
	for _, c := range []struct{ body, guardrail, field, msg string }{
		{`{"text":"match destination 10.0.0.0/7 then discard"}`, guard.PrefixLength, "text", "prefix_lengths.ipv4_flowspec"},
		{`{"text":"match destination ::/0 then discard"}`, guard.PrefixLength, "text", "prefix_lengths.ipv6_flowspec"},
		// Broad and covering the appliance: the guardrail nothing opens.
		{`{"text":"match destination 0.0.0.0/0 then discard"}`, guard.ProtectedAddress, "text", "own address 192.0.2.1"},
		{`{"text":"match protocol udp then discard"}`, guard.DestinationRequired, "text", "allow_no_destination"},
		{`{"text":"match destination-port ==179 protocol tcp then discard"}`, guard.BGPSession, "text", "port 179"},
		{`{"text":"route 192.0.2.2/32 then blackhole"}`, guard.ProtectedAddress, "text", "neighbor 192.0.2.2"},
		{`{"text":"` + ruleDiscard + `","ttl":"never"}`, guard.NeverExpire, "ttl", "allow_never_expire"},
	} {
		status, body := ts.do(t, "POST", "/v1/validate", c.body)
		v := decode[api.Validation](t, body)
		if status != 200 || v.Valid || v.Guardrail == nil || v.Guardrail.Name != c.guardrail || v.Guardrail.Field != c.field || !strings.Contains(v.Guardrail.Message, c.msg) {
			t.Errorf("validate %s: %d %s", c.body, status, body)
		}
	}
	before := time.Now()
	status, body := ts.do(t, "POST", "/v1/validate", `{"text":"`+ruleDiscard+`"}`)
	v := decode[api.Validation](t, body)
	if status != 200 || !v.Valid || !v.DefaultTTL || v.ExpiresAt == nil || v.ExpiresAt.Before(before.Add(time.Hour-time.Second)) || len(v.Warnings) != 0 {
		t.Errorf("validate without a ttl: %d %s", status, body)
	}
	status, body = ts.do(t, "POST", "/v1/validate", `{"text":"`+ruleDiscard+`","ttl":"72h"}`)
	if v := decode[api.Validation](t, body); status != 200 || !v.Valid || len(v.Warnings) != 1 || !strings.Contains(v.Warnings[0], "longer than a day") {
		t.Errorf("validate with a long ttl: %d %s", status, body)
	}

	code, out, errOut := runCLI(t, ts.sock, "rule", "add", "--dry-run", "match destination 0.0.0.0/0 then discard")
	if code != 1 || !strings.Contains(errOut, "refused by guardrail protected_address") || !strings.Contains(errOut, "nothing stored") || !strings.Contains(out, "0.0.0.0/0") {
		t.Errorf("rule add --dry-run 0.0.0.0/0: exit %d, %q %q", code, out, errOut)
	}
	code, _, errOut = runCLI(t, ts.sock, "rule", "validate", "--ttl", "72h", ruleDiscard)
	if code != 0 || !strings.Contains(errOut, "warning: the rule lives 72h0m0s, longer than a day") || !strings.Contains(errOut, "valid ipv4-flowspec rule (would expire") {
		t.Errorf("rule validate --ttl 72h: exit %d, %q", code, errOut)
	}
	code, _, errOut = runCLI(t, ts.sock, "rule", "add", "--dry-run", ruleDiscard)
	if code != 0 || !strings.Contains(errOut, ", the default TTL)") {
		t.Errorf("rule add --dry-run without a ttl: exit %d, %q", code, errOut)
	}
	if rs, _ := st.List(context.Background(), ""); len(rs) != 0 {
		t.Errorf("validate stored %d rules", len(rs))
	}
	// An update without a ttl keeps the stored expiry.
	if status, body := ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleDiscard+`","ttl":"10m"}`); status != 201 {
		t.Fatalf("%d %s", status, body)
	}
	code, _, errOut = runCLI(t, ts.sock, "rule", "validate", ruleLimit)
	if code != 0 || !strings.Contains(errOut, "keeps its expiry, ") {
		t.Errorf("rule validate of an update: exit %d, %q", code, errOut)
	}
}
