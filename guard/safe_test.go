package guard

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// The zero Guardrails are the shipped defaults: FlowSpec destinations no
// broader than /8 (IPv4) or /32 (IPv6), a destination required.
func TestDefaultDestinations(t *testing.T) {
	st := openStore(t)
	g := New(config.Guardrails{})
	cases := []struct {
		text, guard string
	}{
		{"match destination 0.0.0.0/0 then discard", PrefixLength},
		{"match destination ::/0 then discard", PrefixLength},
		{"match destination 10.0.0.0/7 then discard", PrefixLength},
		{"match destination 10.0.0.0/8 then discard", ""},
		{"match destination 2001:db8::/31 then discard", PrefixLength},
		{"match destination 2001:db8::/32 then discard", ""},
		{"match protocol udp then discard", DestinationRequired},
		{"match source 198.51.100.0/24 protocol udp then discard", DestinationRequired},
		{"ipv6-flowspec match protocol udp then discard", DestinationRequired},
		{"match destination ::1:0:0/96 offset 64 then discard", DestinationRequired}, // an offset pattern is no destination
		{"match protocol udp then accept", DestinationRequired},
	}
	for _, cs := range cases {
		v := checkOne(t, g, st, rule(t, cs.text), time.Minute)
		got := ""
		if v != nil {
			got = v.Guardrail
		}
		if got != cs.guard {
			t.Errorf("%s: guardrail %q, want %q (%v)", cs.text, got, cs.guard, v)
		}
	}
	v := checkOne(t, g, st, rule(t, "match destination 0.0.0.0/0 then discard"), time.Minute)
	if v == nil || !strings.Contains(v.Msg, "prefix_lengths.ipv4_flowspec") {
		t.Errorf("the refusal does not name the setting that opens it: %v", v)
	}
	v = checkOne(t, g, st, rule(t, "match protocol udp then discard"), time.Minute)
	if v == nil || !strings.Contains(v.Msg, "allow_no_destination") {
		t.Errorf("the refusal does not name the setting that opens it: %v", v)
	}
	// Each opens with its setting.
	open := New(config.Guardrails{AllowNoDestination: true,
		PrefixLengths: map[flowspec.Family]config.Range{flowspec.IPv4: {Min: 0, Max: 32}}})
	for _, text := range []string{"match protocol udp then discard", "match destination 0.0.0.0/0 then discard"} {
		if v := checkOne(t, open, st, rule(t, text), time.Minute); v != nil {
			t.Errorf("%s with the guardrail opened: %v", text, v)
		}
	}
}

// The appliance's addresses, its neighbors and their BGP sessions are
// protected whatever the settings.
func TestProtected(t *testing.T) {
	st := openStore(t)
	p := config.Protected{
		Own:              []netip.Addr{netip.MustParseAddr("10.255.255.1"), netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("2001:db8::1")},
		Neighbors:        []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("2001:db8::2")},
		NeighborPrefixes: []netip.Prefix{netip.MustParsePrefix("10.99.0.0/24")},
		Ports:            []uint16{179, 1790},
	}
	// Everything else open: only the protection refuses.
	g := New(config.Guardrails{Protected: p, AllowNoDestination: true, AllowNeverExpire: true,
		PrefixLengths: map[flowspec.Family]config.Range{
			flowspec.IPv4: {Min: 0, Max: 32}, flowspec.IPv6: {Min: 0, Max: 128},
			flowspec.IPv4Unicast: {Min: 0, Max: 32}, flowspec.IPv6Unicast: {Min: 0, Max: 128}}})
	cases := []struct {
		text, guard string
	}{
		// What a destination covers.
		{"route 127.0.0.2/32 then blackhole", ProtectedAddress},
		{"route 10.255.255.1/32 then blackhole", ProtectedAddress},
		{"route 127.0.0.0/8 then blackhole", ProtectedAddress},
		{"route 127.0.0.2/32 then next-hop 192.0.2.9", ProtectedAddress},
		{"route 2001:db8::2/128 then blackhole", ProtectedAddress},
		{"route 10.99.0.7/32 then blackhole", ProtectedAddress},
		{"route 203.0.113.7/32 then blackhole", ""},
		{"match destination 127.0.0.2/32 then discard", ProtectedAddress},
		{"match destination 127.0.0.0/24 protocol udp then discard", ProtectedAddress},
		{"match destination 127.0.0.2/32 then rate-limit 1000", ProtectedAddress},
		{"match destination 127.0.0.2/32 then redirect 65000:1", ProtectedAddress},
		{"match destination 127.0.0.2/32 then redirect-ip 192.0.2.9", ProtectedAddress},
		{"match destination 127.0.0.2/32 then mark 0", ProtectedAddress},
		{"match destination 10.99.0.128/25 then discard", ProtectedAddress},
		{"match destination 0.0.0.0/0 then discard", ProtectedAddress},
		{"match destination ::/0 then discard", ProtectedAddress},
		{"match destination ::2/128 offset 64 then discard", ProtectedAddress},     // bits 64-127 = ::2, first 64 free: 2001:db8::2 is one
		{"match destination ::3/128 offset 64 then discard", ""},                   // no protected address ends in ::3
		{"match destination 198.51.100.0/24 then discard", ""},                     // not protected
		{"match destination 127.0.0.2/32 then accept", ""},                         // filters nothing
		{"match destination 127.0.0.2/32 then action sample-terminal", ""},         // filters nothing
		{"match destination 198.51.100.0/24 source 127.0.0.2/32 then discard", ""}, // not BGP: the destination is no appliance's
		// BGP between the appliance and its routers, without a destination.
		{"match destination-port ==179 protocol tcp then discard", BGPSession},
		{"match port ==179 then discard", BGPSession},
		{"match source-port ==179 then discard", BGPSession},
		{"match destination-port ==1790 protocol tcp then discard", BGPSession}, // the listen port
		{"match destination-port >=1024 protocol tcp then discard", BGPSession}, // the opening side's ephemeral port
		{"match protocol tcp then discard", BGPSession},
		{"match protocol tcp then rate-limit 1000000", BGPSession},
		{"match source 127.0.0.2/32 then discard", BGPSession},
		{"match source 10.99.0.0/16 protocol tcp then discard", BGPSession},
		{"match tcp-flags =S then discard", BGPSession},
		{"match protocol tcp destination-port ==179 packet-length >=1000 then discard", BGPSession},
		{"match protocol tcp destination-port ==179 dscp ==48 then discard", BGPSession},
		{"ipv6-flowspec match protocol tcp destination-port ==179 then discard", BGPSession},
		{"match protocol udp then discard", ""},
		{"match protocol tcp destination-port ==443 then discard", ""},     // 443 is neither BGP's nor ephemeral
		{"match destination-port ==443 source-port ==80 then discard", ""}, // no side is a BGP port
		{"match protocol tcp destination-port ==179 source-port <1024 then discard", ""},
		{"match source 198.51.100.0/24 protocol tcp then discard", ""}, // no appliance or router sends from there
		{"match source 127.0.0.2/32 protocol udp then discard", ""},
		{"match icmp-type ==8 then discard", ""},
		{"match protocol tcp destination-port ==179 dscp ==48&==49 then discard", ""}, // matches no packet at all
		{"match protocol tcp destination-port ==179 then accept", ""},
		{"match destination 203.0.113.0/24 protocol tcp destination-port ==179 then discard", ""},
	}
	for _, cs := range cases {
		v := checkOne(t, g, st, rule(t, cs.text), time.Minute)
		got := ""
		if v != nil {
			got = v.Guardrail
		}
		if got != cs.guard {
			t.Errorf("%s: guardrail %q, want %q (%v)", cs.text, got, cs.guard, v)
		}
	}
	// The refusals say what they protect and what to do.
	v := checkOne(t, g, st, rule(t, "route 10.255.255.1/32 then blackhole"), time.Minute)
	if v == nil || !strings.Contains(v.Msg, "own address 10.255.255.1") || !strings.Contains(v.Msg, "narrow the destination") {
		t.Errorf("router id: %v", v)
	}
	v = checkOne(t, g, st, rule(t, "match destination-port ==179 protocol tcp then discard"), time.Minute)
	if v == nil || !strings.Contains(v.Msg, "port 179") || !strings.Contains(v.Msg, "179 or 1790") {
		t.Errorf("bgp: %v", v)
	}
	// Nothing opens them, and static rules get them too.
	vs := CheckStatic(g.Limits(), []config.StaticRule{
		{Rule: rule(t, "match destination-port ==179 protocol tcp then discard")},
		{Rule: rule(t, "match destination 198.51.100.0/24 then discard")},
		{Rule: rule(t, "route 127.0.0.1/32 then blackhole")},
	})
	if len(vs) != 2 || vs[0].Index != 0 || vs[0].Guardrail != BGPSession || vs[1].Index != 2 || vs[1].Guardrail != ProtectedAddress {
		t.Errorf("static rules: %+v", vs)
	}
}

// A new rule without a TTL gets the default TTL; an update without one
// keeps the stored expiry; the decision is what is stored.
func TestDefaultTTL(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	now := time.Now().Truncate(time.Second)
	g := New(config.Guardrails{}).WithClock(func() time.Time { return now })
	r := rule(t, "match destination 203.0.113.7/32 then discard")
	ds, v, err := g.Check(ctx, st, []Input{{Rule: r, KeepExpiry: true}}, Quota{})
	if err != nil || v != nil {
		t.Fatal(v, err)
	}
	if d := ds[0]; !d.ExpiresAt.Equal(now.Add(config.DefaultRuleTTL)) || !d.DefaultTTL || d.KeepExpiry {
		t.Fatalf("new rule without a TTL: %+v", d)
	}
	in := store.Input{Rule: r, Keep: store.KeepExpiry}
	ds[0].Apply(&in)
	stored, _, err := st.Upsert(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if !stored.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("stored expiry %v, want %v", stored.ExpiresAt, now.Add(time.Hour))
	}
	// An update without a TTL keeps the expiry, however much time passed.
	now = now.Add(40 * time.Minute)
	ds, v, err = g.Check(ctx, st, []Input{{Rule: r, KeepExpiry: true}}, Quota{})
	if err != nil || v != nil {
		t.Fatal(v, err)
	}
	if d := ds[0]; !d.ExpiresAt.Equal(stored.ExpiresAt) || !d.KeepExpiry || d.DefaultTTL {
		t.Fatalf("update without a TTL: %+v", d)
	}
	in = store.Input{Rule: r, Reason: "still", Keep: store.KeepExpiry}
	ds[0].Apply(&in)
	if up, _, err := st.Upsert(ctx, in); err != nil || !up.ExpiresAt.Equal(stored.ExpiresAt) {
		t.Fatalf("update stored %v (%v), want %v", up.ExpiresAt, err, stored.ExpiresAt)
	}
	// Withdrawn between the check and the write, the rule is created
	// afresh, with the default TTL, not without an expiry.
	if _, err := st.Withdraw(ctx, stored.ID, "noc"); err != nil {
		t.Fatal(err)
	}
	if err := st.Finish(ctx, stored.ID, store.Withdrawn); err != nil {
		t.Fatal(err)
	}
	in = store.Input{Rule: r, Keep: store.KeepExpiry}
	ds[0].Apply(&in)
	if again, created, err := st.Upsert(ctx, in); err != nil || !created || !again.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("created again with expiry %v (created %v, %v), want %v", again.ExpiresAt, created, err, now.Add(time.Hour))
	}
	// A configured default; "never" makes rules without a TTL need the
	// permission; require_ttl refuses them.
	g.Set(config.Guardrails{DefaultTTL: 10 * time.Minute})
	n := rule(t, "match destination 203.0.113.8/32 then discard")
	if ds, _, _ := g.Check(ctx, st, []Input{{Rule: n, KeepExpiry: true}}, Quota{}); len(ds) != 1 || !ds[0].ExpiresAt.Equal(now.Add(10*time.Minute)) {
		t.Errorf("default_ttl 10m: %+v", ds)
	}
	g.Set(config.Guardrails{DefaultTTL: config.Unlimited})
	if _, v, _ := g.Check(ctx, st, []Input{{Rule: n, KeepExpiry: true}}, Quota{}); v == nil || v.Guardrail != NeverExpire || v.Field != "ttl" {
		t.Errorf("default_ttl never, no permission: %v", v)
	}
	if ds, v, _ := g.Check(ctx, st, []Input{{Rule: n, KeepExpiry: true, MayNeverExpire: true}}, Quota{}); v != nil || !ds[0].ExpiresAt.IsZero() {
		t.Errorf("default_ttl never, with the permission: %+v %v", ds, v)
	}
	g.Set(config.Guardrails{RequireTTL: true})
	if _, v, _ := g.Check(ctx, st, []Input{{Rule: n, KeepExpiry: true}}, Quota{}); v == nil || v.Guardrail != TTLRequired {
		t.Errorf("require_ttl: %v", v)
	}
}

// A rule that never expires comes only with the permission, or with
// allow_never_expire; require_ttl refuses it anyway. An active rule that
// never expires keeps that on an update without a TTL.
func TestNeverExpire(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	r := rule(t, "match destination 203.0.113.7/32 then discard")
	check := func(l config.Guardrails, in Input) ([]Decision, *Violation) {
		t.Helper()
		ds, v, err := New(l).Check(ctx, st, []Input{in}, Quota{})
		if err != nil {
			t.Fatal(err)
		}
		return ds, v
	}
	if _, v := check(config.Guardrails{}, Input{Rule: r}); v == nil || v.Guardrail != NeverExpire ||
		!strings.Contains(v.Msg, "allow_never_expire") || !strings.Contains(v.Msg, "[[rule]]") {
		t.Errorf("never without the permission: %v", v)
	}
	for _, c := range []struct {
		l  config.Guardrails
		in Input
	}{{config.Guardrails{}, Input{Rule: r, MayNeverExpire: true}}, {config.Guardrails{AllowNeverExpire: true}, Input{Rule: r}}} {
		ds, v := check(c.l, c.in)
		if v != nil || !ds[0].ExpiresAt.IsZero() || len(ds[0].Warnings) == 0 || !strings.Contains(ds[0].Warnings[0], "never expires") {
			t.Errorf("never with %+v %+v: %+v %v", c.l, c.in, ds, v)
		}
	}
	if _, v := check(config.Guardrails{RequireTTL: true}, Input{Rule: r, MayNeverExpire: true}); v == nil || v.Guardrail != TTLRequired {
		t.Errorf("never under require_ttl: %v", v)
	}
	if _, _, err := st.Upsert(ctx, store.Input{Rule: r, Actor: "config-era"}); err != nil {
		t.Fatal(err)
	}
	ds, v := check(config.Guardrails{}, Input{Rule: r, KeepExpiry: true})
	if v != nil || !ds[0].KeepExpiry || !ds[0].ExpiresAt.IsZero() || len(ds[0].Warnings) == 0 {
		t.Errorf("update keeping never: %+v %v", ds, v)
	}
}

// max_ttl: 7 days by default, for TTLs given and expiries kept; "none"
// lifts it.
func TestMaxTTLDefault(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	now := time.Now()
	g := New(config.Guardrails{}).WithClock(func() time.Time { return now })
	r := rule(t, "match destination 203.0.113.7/32 then discard")
	if v := checkOne(t, g, st, r, 8*24*time.Hour); v == nil || v.Guardrail != MaxTTL || !strings.Contains(v.Msg, "max_ttl") {
		t.Errorf("8d: %v", v)
	}
	if v := checkOne(t, g, st, r, 7*24*time.Hour); v != nil {
		t.Errorf("7d: %v", v)
	}
	if _, _, err := st.Upsert(ctx, store.Input{Rule: r, ExpiresAt: now.Add(30 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, v, _ := g.Check(ctx, st, []Input{{Rule: r, KeepExpiry: true}}, Quota{}); v == nil || v.Guardrail != MaxTTL {
		t.Errorf("keeping a 30d expiry: %v", v)
	}
	g.Set(config.Guardrails{MaxTTL: config.Unlimited})
	if v := checkOne(t, g, st, r, 365*24*time.Hour); v != nil {
		t.Errorf("a year with max_ttl none: %v", v)
	}
}

// Warnings name what is allowed but dangerous; an ordinary rule has none.
func TestWarnings(t *testing.T) {
	st := openStore(t)
	g := New(config.Guardrails{AllowNoDestination: true, MaxTTL: config.Unlimited,
		PrefixLengths: map[flowspec.Family]config.Range{flowspec.IPv4: {Min: 0, Max: 32}, flowspec.IPv4Unicast: {Min: 24, Max: 32}}})
	cases := []struct {
		text string
		ttl  time.Duration
		want string // "" for no warning
	}{
		{"match destination 203.0.113.7/32 protocol udp then discard", 30 * time.Minute, ""},
		{"match destination 198.51.0.0/16 then discard", 30 * time.Minute, ""},
		{"match destination 203.0.113.7/32 then discard", 72 * time.Hour, "longer than a day"},
		{"match destination 203.0.113.7/32 then discard", 0, "never expires"},
		{"match destination 10.0.0.0/8 then discard", 30 * time.Minute, "covers 16,777,216 addresses"},
		{"match destination 0.0.0.0/0 then discard", 30 * time.Minute, "covers 4,294,967,296 addresses"},
		{"match protocol udp source-port ==19 then discard", 30 * time.Minute, "no destination"},
		{"route 203.0.113.0/24 then blackhole", 30 * time.Minute, "blackholes all 256 addresses of 203.0.113.0/24"},
		{"match destination 203.0.113.7/32 then rate-limit-packets 0", 30 * time.Minute, "rate of 0"},
		{"match destination 203.0.113.7/32 then rate-limit 0 as 65000", 30 * time.Minute, "rate of 0"},
	}
	for _, cs := range cases {
		in := Input{Rule: rule(t, cs.text), MayNeverExpire: true}
		if cs.ttl > 0 {
			in.ExpiresAt = time.Now().Add(cs.ttl)
		}
		ds, v, err := g.Check(context.Background(), st, []Input{in}, Quota{})
		if err != nil || v != nil {
			t.Fatalf("%s: %v %v", cs.text, v, err)
		}
		ws := strings.Join(ds[0].Warnings, " | ")
		if cs.want == "" && ws != "" || !strings.Contains(ws, cs.want) {
			t.Errorf("%s ttl %s: warnings %q, want %q", cs.text, cs.ttl, ws, cs.want)
		}
	}
}

// Preview answers as Check would and records nothing.
func TestPreview(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	g := New(config.Guardrails{MaxNewRulesPerMinute: 1})
	in := []Input{{Rule: rule(t, "match destination 203.0.113.7/32 then discard"), KeepExpiry: true}}
	for range 3 {
		if ds, v, err := g.Preview(ctx, st, in, Quota{}); err != nil || v != nil || !ds[0].DefaultTTL {
			t.Fatalf("preview: %+v %v %v", ds, v, err)
		}
	}
	if _, v, err := g.Check(ctx, st, in, Quota{}); err != nil || v != nil {
		t.Fatalf("check after previews: %v %v", v, err)
	}
	other := []Input{{Rule: rule(t, "match destination 203.0.113.8/32 then discard"), KeepExpiry: true}}
	if _, v, _ := g.Preview(ctx, st, other, Quota{}); v == nil || v.Guardrail != MaxNewPerMinute {
		t.Errorf("preview past the rate: %v", v)
	}
	if _, v, _ := g.Preview(ctx, st, []Input{{Rule: rule(t, "match destination 0.0.0.0/0 then discard")}}, Quota{}); v == nil || v.Guardrail != PrefixLength {
		t.Errorf("preview of a broad rule: %v", v)
	}
}

// Active rules get every per-rule guardrail but never_expire (Breaking), whose
// permission is not known afterwards: on a reload or at start, rules
// that now break the protection or the destination rules are withdrawn,
// a rule that never expires stays.
func TestEnforceSafeDefaults(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	now := time.Now()
	put := func(text string, ttl time.Duration) store.Rule {
		t.Helper()
		in := store.Input{Rule: rule(t, text), Actor: "noc"}
		if ttl > 0 {
			in.ExpiresAt = now.Add(ttl)
		}
		r, _, err := st.Upsert(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	never := put("match destination 198.51.100.1/32 then discard", 0)
	neighbor := put("route 192.0.2.10/32 then blackhole", time.Hour)
	bgp := put("match protocol tcp destination-port ==179 then discard", time.Hour)
	broad := put("match destination 198.0.0.0/7 then discard", time.Hour)
	l := &config.Guardrails{Protected: config.Protected{Own: []netip.Addr{netip.MustParseAddr("192.0.2.1")},
		Neighbors: []netip.Addr{netip.MustParseAddr("192.0.2.10")}, Ports: []uint16{179}}}
	if v := CheckActive(l, never.Rule, 0); v != nil {
		t.Errorf("active rule that never expires: %v", v)
	}
	ws, err := Breaking(ctx, st, l, now)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]string{}
	for _, w := range ws {
		got[w.Rule.ID] = w.Violation.Guardrail
	}
	want := map[int64]string{neighbor.ID: ProtectedAddress, bgp.ID: BGPSession, broad.ID: PrefixLength}
	if len(got) != len(want) {
		t.Fatalf("withdrawn %v, want %v", got, want)
	}
	for id, g := range want {
		if got[id] != g {
			t.Errorf("rule %d withdrawn by %q, want %q", id, got[id], g)
		}
	}
}

// The example configuration writes the shipped defaults out, as they are.
func TestExampleShowsDefaults(t *testing.T) {
	cfg, err := config.Load("../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	var zero config.Guardrails
	ex := &cfg.Guardrails
	for _, f := range []flowspec.Family{flowspec.IPv4, flowspec.IPv6, flowspec.IPv4Unicast, flowspec.IPv6Unicast} {
		if Lengths(ex, f) != Lengths(&zero, f) {
			t.Errorf("%s: the example says %s, the default is %s", f, Lengths(ex, f), Lengths(&zero, f))
		}
	}
	if ex.TTLDefault() != zero.TTLDefault() || ex.TTLMax() != zero.TTLMax() || ex.AllowNeverExpire || ex.AllowNoDestination || ex.RequireTTL {
		t.Errorf("the example's TTL settings are not the defaults: %+v", ex)
	}
}
