package config

import (
	"net/netip"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

func rule(t *testing.T, s string) flowspec.Rule {
	t.Helper()
	r, err := flowspec.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCheckRule(t *testing.T) {
	c := Guardrails{
		Safelist:      []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8:ffff::/48")},
		PrefixLengths: map[flowspec.Family]Range{flowspec.IPv4: {16, 32}, flowspec.IPv4Unicast: {24, 32}},
		RequireTTL:    true,
		MaxTTL:        time.Hour,
	}
	cases := []struct {
		text  string
		ttl   time.Duration
		guard string
	}{
		{"match destination 203.0.113.0/24 then discard", time.Minute, ""},
		{"match destination 192.0.2.7/32 then discard", time.Minute, GuardSafelist},
		{"match destination 192.0.0.0/16 then discard", time.Minute, GuardSafelist},
		{"match protocol udp then discard", time.Minute, GuardSafelist},
		{"match protocol udp then accept", time.Minute, ""},
		{"match destination 192.0.2.7/32 then accept", time.Minute, ""},
		{"match destination 10.0.0.0/8 then discard", time.Minute, GuardPrefixLength},
		{"route 203.0.113.7/32 then blackhole", time.Minute, ""},
		{"route 203.0.113.0/24 then blackhole", time.Minute, ""},
		{"route 203.0.112.0/23 then blackhole", time.Minute, GuardPrefixLength},
		{"route 2001:db8::/64 then blackhole", time.Minute, GuardPrefixLength}, // default /128 only
		{"route 2001:db8:ffff::1/128 then blackhole", time.Minute, GuardSafelist},
		{"route 192.0.2.1/32 then blackhole", time.Minute, GuardSafelist},
		{"route 203.0.113.7/32 then blackhole", 0, GuardTTLRequired},
		{"route 203.0.113.7/32 then blackhole", 2 * time.Hour, GuardMaxTTL},
	}
	for _, cs := range cases {
		v := c.CheckRule(GuardInput{Rule: rule(t, cs.text), TTL: cs.ttl})
		got := ""
		if v != nil {
			got = v.Guardrail
			if v.Rule != rule(t, cs.text).String() || v.Msg == "" {
				t.Errorf("%s: violation %+v does not name the rule", cs.text, v)
			}
		}
		if got != cs.guard {
			t.Errorf("%s ttl %s: guardrail %q, want %q (%v)", cs.text, cs.ttl, got, cs.guard, v)
		}
	}
	var zero Guardrails
	if v := zero.CheckRule(GuardInput{Rule: rule(t, "route 203.0.113.0/24 then blackhole")}); v == nil || v.Guardrail != GuardPrefixLength {
		t.Errorf("zero config allows a /24 blackhole: %v", v)
	}
}

func TestQuotas(t *testing.T) {
	c := Guardrails{MaxActiveRules: 3, MaxRulesPerDestination: 2}
	a := rule(t, "match destination 203.0.113.7/32 protocol udp then discard")
	b := rule(t, "match destination 203.0.113.7/32 protocol tcp then discard")
	d := rule(t, "match destination 203.0.113.7/32 protocol icmp then discard")
	e := rule(t, "route 198.51.100.1/32 then blackhole")
	f := rule(t, "route 198.51.100.2/32 then blackhole")
	active := []flowspec.Match{a.Match, b.Match}
	if v := c.Check([]GuardInput{{Rule: d}}, active); v == nil || v.Guardrail != GuardMaxPerDest {
		t.Errorf("third rule on one destination: %v", v)
	}
	if v := c.Check([]GuardInput{{Rule: a}, {Rule: e}}, active); v != nil {
		t.Errorf("update + one new: %v", v)
	}
	if v := c.Check([]GuardInput{{Rule: e}, {Rule: f}}, active); v == nil || v.Guardrail != GuardMaxActive || v.Index != 1 {
		t.Errorf("fourth active rule: %+v", v)
	}
	if n := NewRules([]GuardInput{{Rule: a}, {Rule: e}, {Rule: e}}, active); n != 1 {
		t.Errorf("NewRules = %d", n)
	}
}

func TestCheckActive(t *testing.T) {
	c := Guardrails{Safelist: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}, RequireTTL: true, MaxTTL: time.Hour}
	r := rule(t, "route 198.51.100.1/32 then blackhole")
	if v := c.CheckActive(r, 10*time.Minute); v != nil {
		t.Error(v)
	}
	if v := c.CheckActive(r, 0); v == nil || v.Guardrail != GuardTTLRequired {
		t.Errorf("never expiring: %v", v)
	}
	if v := c.CheckActive(r, 2*time.Hour); v == nil || v.Guardrail != GuardMaxTTL {
		t.Errorf("too long: %v", v)
	}
	if v := c.CheckActive(rule(t, "route 203.0.113.9/32 then blackhole"), time.Minute); v == nil || v.Guardrail != GuardSafelist {
		t.Errorf("safelisted: %v", v)
	}
}

func TestLimiter(t *testing.T) {
	var l RateLimiter
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		if ok, _ := l.Allow(t0.Add(time.Duration(i)*time.Second), 1, 3); !ok {
			t.Fatalf("rule %d refused", i)
		}
	}
	ok, wait := l.Allow(t0.Add(10*time.Second), 1, 3)
	if ok || wait != 50*time.Second {
		t.Errorf("fourth in a minute: %v, retry in %s", ok, wait)
	}
	if ok, _ := l.Allow(t0.Add(61*time.Second), 2, 3); !ok {
		t.Error("after the window moved: refused")
	}
	if ok, _ := l.Allow(t0, 5, 3); ok {
		t.Error("batch above the limit allowed")
	}
	if ok, _ := l.Allow(t0, 100, 0); !ok {
		t.Error("no limit refused")
	}
}
