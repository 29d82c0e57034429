package guard

import (
	"context"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

func rule(t *testing.T, s string) flowspec.Rule {
	t.Helper()
	r, err := flowspec.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "rk.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// checkOne runs Check on one rule with an explicit ttl (0: "never",
// with the permission to) against st.
func checkOne(t *testing.T, g *Guard, st Counter, r flowspec.Rule, ttl time.Duration) *Violation {
	t.Helper()
	in := Input{Rule: r, MayNeverExpire: true}
	if ttl > 0 {
		in.ExpiresAt = g.now().Add(ttl)
	}
	_, v, err := g.Check(context.Background(), st, []Input{in}, Quota{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestCheckRule(t *testing.T) {
	st := openStore(t)
	g := New(config.Guardrails{
		Safelist:           []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8:ffff::/48")},
		PrefixLengths:      map[flowspec.Family]config.Range{flowspec.IPv4: {Min: 16, Max: 32}, flowspec.IPv4Unicast: {Min: 24, Max: 32}},
		RequireTTL:         true,
		MaxTTL:             time.Hour,
		AllowNoDestination: true,
	})
	cases := []struct {
		text  string
		ttl   time.Duration
		guard string
	}{
		{"match destination 203.0.113.0/24 then discard", time.Minute, ""},
		{"match destination 192.0.2.7/32 then discard", time.Minute, Safelist},
		{"match destination 192.0.0.0/16 then discard", time.Minute, Safelist},
		{"match protocol udp then discard", time.Minute, Safelist},
		{"match protocol udp then accept", time.Minute, ""},
		{"match destination 192.0.2.7/32 then accept", time.Minute, ""},
		{"match destination 10.0.0.0/8 then discard", time.Minute, PrefixLength},
		{"route 203.0.113.7/32 then blackhole", time.Minute, ""},
		{"route 203.0.113.0/24 then blackhole", time.Minute, ""},
		{"route 203.0.112.0/23 then blackhole", time.Minute, PrefixLength},
		{"route 2001:db8::/64 then blackhole", time.Minute, PrefixLength}, // default /128 only
		{"route 2001:db8:ffff::1/128 then blackhole", time.Minute, Safelist},
		{"route 192.0.2.1/32 then blackhole", time.Minute, Safelist},
		{"route 203.0.113.7/32 then blackhole", 0, TTLRequired},
		{"route 203.0.113.7/32 then blackhole", 2 * time.Hour, MaxTTL},
	}
	for _, cs := range cases {
		v := checkOne(t, g, st, rule(t, cs.text), cs.ttl)
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
	if v := checkOne(t, New(config.Guardrails{}), st, rule(t, "route 203.0.113.0/24 then blackhole"), time.Minute); v == nil || v.Guardrail != PrefixLength {
		t.Errorf("zero config allows a /24 blackhole: %v", v)
	}
}

// Quotas are counted by the store: in total, per destination, and a
// token's own rules; updates are free except when another writer's rule
// becomes the token's.
func TestQuotas(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	a := rule(t, "match destination 203.0.113.7/32 protocol udp then discard")
	b := rule(t, "match destination 203.0.113.7/32 protocol tcp then discard")
	d := rule(t, "match destination 203.0.113.7/32 protocol icmp then discard")
	e := rule(t, "route 198.51.100.1/32 then blackhole")
	f := rule(t, "route 198.51.100.2/32 then blackhole")
	for _, r := range []flowspec.Rule{a, b} {
		if _, _, err := st.Upsert(ctx, store.Input{Rule: r, Actor: "noc"}); err != nil {
			t.Fatal(err)
		}
	}
	g := New(config.Guardrails{MaxActiveRules: 3, MaxRulesPerDestination: 2})
	check := func(q Quota, rs ...flowspec.Rule) *Violation {
		t.Helper()
		ins := make([]Input, len(rs))
		for i, r := range rs {
			ins[i] = Input{Rule: r, KeepExpiry: true}
		}
		_, v, err := g.Check(ctx, st, ins, q)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := check(Quota{}, d); v == nil || v.Guardrail != MaxPerDest {
		t.Errorf("third rule on one destination: %v", v)
	}
	if v := check(Quota{}, a, e); v != nil {
		t.Errorf("update + one new: %v", v)
	}
	if v := check(Quota{}, e, f); v == nil || v.Guardrail != MaxActive || v.Index != 1 {
		t.Errorf("fourth active rule: %+v", v)
	}
	if v := check(Quota{}, e, e); v != nil {
		t.Errorf("the same new rule twice in one write counts once: %v", v)
	}
	// A token with a quota of 1: one new rule is fine, and so is
	// updating it; taking over noc's rule makes two.
	q := Quota{Actor: "cust", Max: 1}
	if v := check(q, e); v != nil {
		t.Errorf("token's first rule: %v", v)
	}
	if _, _, err := st.Upsert(ctx, store.Input{Rule: e, Actor: "cust"}); err != nil {
		t.Fatal(err)
	}
	if v := check(q, e); v != nil {
		t.Errorf("token updating its own rule: %v", v)
	}
	if v := check(q, a); v == nil || v.Guardrail != TokenMaxActive || !strings.Contains(v.Msg, `token "cust" would have 2`) {
		t.Errorf("token taking over another writer's rule beyond its quota: %v", v)
	}
	if v := check(Quota{Actor: "other", Max: 1}, a); v != nil {
		t.Errorf("another token's quota counts only its own rules: %v", v)
	}
}

// A write that keeps the stored expiry is checked with the TTL the rule
// has left.
func TestKeepExpiry(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	r := rule(t, "match destination 203.0.113.7/32 then discard")
	if _, _, err := st.Upsert(ctx, store.Input{Rule: r}); err != nil {
		t.Fatal(err)
	}
	g := New(config.Guardrails{RequireTTL: true})
	_, v, err := g.Check(ctx, st, []Input{{Rule: r, KeepExpiry: true}}, Quota{})
	if err != nil || v == nil || v.Guardrail != TTLRequired {
		t.Errorf("keeping no expiry under require_ttl: %v, %v", v, err)
	}
	_, v, err = g.Check(ctx, st, []Input{{Rule: r, ExpiresAt: time.Now().Add(time.Hour)}}, Quota{})
	if err != nil || v != nil {
		t.Errorf("giving a TTL: %v, %v", v, err)
	}
}

func TestRateLimit(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := New(config.Guardrails{MaxNewRulesPerMinute: 2}).WithClock(func() time.Time { return now })
	add := func(text string) *Violation {
		t.Helper()
		_, v, err := g.Check(ctx, st, []Input{{Rule: rule(t, text), KeepExpiry: true}}, Quota{})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if add("match destination 10.0.0.1/32 then discard") != nil || add("match destination 10.0.0.2/32 then discard") != nil {
		t.Fatal("first two new rules refused")
	}
	now = now.Add(10 * time.Second)
	if v := add("match destination 10.0.0.3/32 then discard"); v == nil || v.Guardrail != MaxNewPerMinute || !strings.Contains(v.Msg, "retry in 50s") || !strings.Contains(v.Msg, "max_new_rules_per_minute") {
		t.Errorf("third in a minute: %v", v)
	}
	// The limit changes on reload; the window survives.
	g.Set(config.Guardrails{MaxNewRulesPerMinute: 3})
	if v := add("match destination 10.0.0.3/32 then discard"); v != nil {
		t.Errorf("after raising the limit: %v", v)
	}
	now = now.Add(time.Minute)
	if v := add("match destination 10.0.0.4/32 then discard"); v != nil {
		t.Errorf("after the window moved: %v", v)
	}
}

func TestLimiter(t *testing.T) {
	var l rateLimiter
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		if ok, _ := l.allow(t0.Add(time.Duration(i)*time.Second), 1, 3, true); !ok {
			t.Fatalf("rule %d refused", i)
		}
	}
	ok, wait := l.allow(t0.Add(10*time.Second), 1, 3, true)
	if ok || wait != 50*time.Second {
		t.Errorf("fourth in a minute: %v, retry in %s", ok, wait)
	}
	if ok, _ := l.allow(t0.Add(61*time.Second), 2, 3, true); !ok {
		t.Error("after the window moved: refused")
	}
	if ok, _ := l.allow(t0, 5, 3, true); ok {
		t.Error("batch above the limit allowed")
	}
	if ok, _ := l.allow(t0, 100, 0, true); !ok {
		t.Error("no limit refused")
	}
}

func TestCheckActive(t *testing.T) {
	l := &config.Guardrails{Safelist: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}, RequireTTL: true, MaxTTL: time.Hour}
	r := rule(t, "route 198.51.100.1/32 then blackhole")
	if v := CheckActive(l, r, 10*time.Minute); v != nil {
		t.Error(v)
	}
	if v := CheckActive(l, r, 0); v == nil || v.Guardrail != TTLRequired {
		t.Errorf("never expiring: %v", v)
	}
	if v := CheckActive(l, r, 2*time.Hour); v == nil || v.Guardrail != MaxTTL {
		t.Errorf("too long: %v", v)
	}
	if v := CheckActive(l, rule(t, "route 203.0.113.9/32 then blackhole"), time.Minute); v == nil || v.Guardrail != Safelist {
		t.Errorf("safelisted: %v", v)
	}
}

// A rule that breaks no guardrail costs no allocation: the start checks
// every active rule (a million on a large appliance).
func TestCheckActiveNoAllocs(t *testing.T) {
	l := &config.Guardrails{Safelist: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}, RequireTTL: true, MaxTTL: time.Hour,
		Protected: config.Protected{
			Own:              []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")},
			Neighbors:        []netip.Addr{netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("2001:db8::2")},
			NeighborPrefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.128/25")},
			Ports:            []uint16{179},
		}}
	for _, text := range []string{
		"route 198.51.100.1/32 then blackhole",
		"match destination 10.1.2.3/32 protocol ==17 destination-port ==53 then discard",
		"match destination 2001:db8:1::/48 protocol ==6 then rate-limit 1000",
	} {
		r := rule(t, text)
		if n := testing.AllocsPerRun(100, func() {
			if CheckActive(l, r, 10*time.Minute) != nil {
				t.Fatalf("%s breaks a guardrail", text)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per check, want 0", text, n)
		}
	}
}

// Static rules get the safelist and prefix lengths, never the TTL rules.
func TestCheckStatic(t *testing.T) {
	l := &config.Guardrails{Safelist: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}, RequireTTL: true, MaxTTL: time.Hour}
	vs := CheckStatic(l, []config.StaticRule{
		{Rule: rule(t, "match destination 198.51.100.0/24 then discard")},
		{Rule: rule(t, "match destination 203.0.113.7/32 then discard")},
	})
	if len(vs) != 1 || vs[0].Index != 1 || vs[0].Guardrail != Safelist {
		t.Errorf("static rules: %+v", vs)
	}
}

// Breaking finds every rule that breaks a per-rule guardrail, with the
// reason extended; static rules and rules within the limits stay. It
// writes nothing.
func TestBreaking(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	now := time.Now()
	put := func(text, reason, origin string, ttl time.Duration) store.Rule {
		t.Helper()
		in := store.Input{Rule: rule(t, text), Reason: reason, Actor: "noc", Origin: origin}
		if ttl > 0 {
			in.ExpiresAt = now.Add(ttl)
		}
		r, _, err := st.Upsert(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	put("match destination 198.51.100.1/32 then discard", "", "", 10*time.Minute)
	safe := put("match destination 203.0.113.7/32 then discard", "ddos", "", 10*time.Minute)
	long := put("match destination 198.51.100.2/32 then discard", "", "", 3*time.Hour)
	put("match destination 203.0.113.8/32 then discard", "", "config:a", 0)
	l := &config.Guardrails{Safelist: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}, MaxTTL: time.Hour}
	ws, err := Breaking(ctx, st, l, now)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{safe.ID: "ddos [withdrawn by guardrail safelist: ", long.ID: "withdrawn by guardrail max_ttl: "}
	if len(ws) != len(want) {
		t.Fatalf("breaking %+v, want rules %d and %d", ws, safe.ID, long.ID)
	}
	for _, w := range ws {
		if w.Item.ID != w.Rule.ID || !strings.HasPrefix(w.Item.Reason, want[w.Rule.ID]) || !w.Item.UpdatedAt.Equal(w.Rule.UpdatedAt) {
			t.Errorf("rule %d: item %+v, want reason %q...", w.Rule.ID, w.Item, want[w.Rule.ID])
		}
		got, err := st.Get(ctx, w.Rule.ID)
		if err != nil || got.WithdrawRequested {
			t.Errorf("rule %d was written: withdraw requested %v, %v", w.Rule.ID, got.WithdrawRequested, err)
		}
	}
	// The store is walked (EachActive); a Reader that cannot walk is
	// read whole, with the same outcome.
	whole, err := Breaking(ctx, struct{ Reader }{st}, l, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole) != len(ws) {
		t.Fatalf("read whole: %d breaking, walked: %d", len(whole), len(ws))
	}
	for i := range ws {
		if whole[i].Item != ws[i].Item {
			t.Errorf("read whole: %+v; walked: %+v", whole[i].Item, ws[i].Item)
		}
	}
}
