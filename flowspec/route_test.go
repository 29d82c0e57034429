package flowspec

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"unsafe"
)

func TestRouteTextRoundTrip(t *testing.T) {
	cases := []struct{ in, want string }{
		{"route 203.0.113.7/32 then blackhole", "route 203.0.113.7/32 then blackhole"},
		{"route 203.0.113.7 then blackhole", "route 203.0.113.7/32 then blackhole"},
		{"route 2001:db8::7 then blackhole", "route 2001:db8::7/128 then blackhole"},
		{"ipv4-unicast route 198.51.100.0/24 then community 65535:666 community no-export", "route 198.51.100.0/24 then blackhole"},
		{"route 203.0.113.7/32 then blackhole community 64500:1 next-hop 192.0.2.1", "route 203.0.113.7/32 then blackhole community 64500:1 next-hop 192.0.2.1"},
		{"route 203.0.113.7/32 then community 65535:666", "route 203.0.113.7/32 then community 65535:666"},
		{"route 2001:db8::/48 then next-hop 100::1", "route 2001:db8::/48 then next-hop 100::1"},
	}
	for _, c := range cases {
		r, err := Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if !r.IsValid() || !r.Match.Family().IsRoute() {
			t.Errorf("Parse(%q) = %+v: not a valid route", c.in, r)
		}
		if got := r.String(); got != c.want {
			t.Errorf("Parse(%q).String() = %q, want %q", c.in, got, c.want)
		}
		r2, err := Parse(r.String())
		if err != nil || r2 != r {
			t.Errorf("round trip of %q: %v %v", r.String(), r2, err)
		}
	}
}

func TestRouteParseErrors(t *testing.T) {
	cases := []struct{ in, word, msg string }{
		{"route 203.0.113.7/24 then blackhole", "203.0.113.7/24", "host bits"},
		{"route nope then blackhole", "nope", "prefix"},
		{"route 203.0.113.7/32", "", "then"},
		{"route 203.0.113.7/32 then discard", "discard", "FlowSpec action"},
		{"route 203.0.113.7/32 then community 70000:1", "70000:1", "AS:N"},
		{"route 203.0.113.7/32 then next-hop 2001:db8::1", "", "family"},
		{"match destination 203.0.113.7/32 then blackhole", "blackhole", "route action"},
		{"route 203.0.113.7/32 then next-hop 192.0.2.1 next-hop 192.0.2.2", "next-hop", "one next-hop"},
	}
	for _, c := range cases {
		_, err := Parse(c.in)
		se, ok := err.(*SyntaxError)
		if !ok {
			t.Errorf("Parse(%q) = %v, want *SyntaxError", c.in, err)
			continue
		}
		if se.Word != c.word || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("Parse(%q): word %q msg %q; want word %q msg containing %q", c.in, se.Word, se.Msg, c.word, c.msg)
		}
	}
	if _, err := ParseIn(IPv6Unicast, "route 203.0.113.7/32 then blackhole"); err == nil {
		t.Error("ParseIn(IPv6Unicast, IPv4 prefix) succeeded")
	}
}

func TestRouteWireAndStore(t *testing.T) {
	for _, s := range []string{
		"route 203.0.113.7/32 then blackhole",
		"route 10.0.0.0/8 then community 64500:7 next-hop 192.0.2.1",
		"route 0.0.0.0/0 then blackhole",
		"route 2001:db8:2::/47 then blackhole next-hop 100::1",
		"route ::/0 then blackhole",
	} {
		r, err := Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		b := r.Match.AppendTo(nil)
		if len(b) != r.Match.Len() {
			t.Errorf("%s: Len %d, AppendTo %d bytes", s, r.Match.Len(), len(b))
		}
		m, n, err := DecodeMatch(r.Match.Family(), b)
		if err != nil || n != len(b) || m != r.Match {
			t.Errorf("%s: DecodeMatch = %v %d %v", s, m, n, err)
		}
		st, _ := r.Action.AppendBinary(nil)
		a, err := DecodeStoredAction(r.Match.Family(), st)
		if err != nil || a != r.Action {
			t.Errorf("%s: stored action %x = %v %v", s, st, a, err)
		}
		p, ok := r.Match.Destination()
		if !ok || p.String() != strings.Fields(s)[1] {
			t.Errorf("%s: Destination = %v %v", s, p, ok)
		}
		if len(r.Match.ComponentBytes()) != 0 {
			t.Errorf("%s: components", s)
		}
		wire := r.Action.AppendCommunities(nil)
		nh, _ := r.Action.NextHop()
		a2, err := DecodeRouteAction(wire, nh)
		if err != nil || a2 != r.Action {
			t.Errorf("%s: DecodeRouteAction = %v %v", s, a2, err)
		}
	}
	// FlowSpec actions keep their stored form: the extended communities.
	fs, _ := Discard().AppendBinary(nil)
	if !bytes.Equal(fs, Discard().AppendExtCommunities(nil)) {
		t.Errorf("FlowSpec stored action = %x", fs)
	}
}

func TestRouteDecodeErrors(t *testing.T) {
	for _, c := range []struct {
		f Family
		b []byte
	}{
		{IPv4Unicast, nil},
		{IPv4Unicast, []byte{33, 1, 2, 3, 4, 5}},
		{IPv4Unicast, []byte{24, 1, 2}},
		{IPv4Unicast, []byte{23, 1, 2, 3}}, // bit after /23 set
		{IPv6Unicast, []byte{129}},
	} {
		if _, _, err := DecodeMatch(c.f, c.b); err == nil {
			t.Errorf("DecodeMatch(%v, %x) succeeded", c.f, c.b)
		}
	}
	for _, b := range [][]byte{nil, {0}, {3, 1, 2, 3}, {0, 1, 2}} {
		if _, err := DecodeStoredAction(IPv4Unicast, b); err == nil {
			t.Errorf("DecodeStoredAction(%x) succeeded", b)
		}
	}
}

func TestRouteRuleValidity(t *testing.T) {
	m, _ := RouteMatch(netip.MustParsePrefix("203.0.113.7/32"))
	fs, _ := Parse("match destination 203.0.113.7/32 then discard")
	cases := []struct {
		r    Rule
		want bool
	}{
		{Rule{m, Blackhole()}, true},
		{Rule{m, Blackhole().WithNextHop(netip.MustParseAddr("192.0.2.1"))}, true},
		{Rule{m, Blackhole().WithNextHop(netip.MustParseAddr("100::1"))}, false},
		{Rule{m, Discard()}, false},
		{Rule{m, Combine(Discard(), Blackhole())}, false},
		{Rule{fs.Match, Blackhole()}, false},
		{fs, true},
	}
	for i, c := range cases {
		if got := c.r.IsValid(); got != c.want {
			t.Errorf("%d: %v IsValid = %v", i, c.r, got)
		}
	}
	if _, err := RouteMatch(netip.MustParsePrefix("::ffff:203.0.113.7/128")); err != nil {
		t.Errorf("mapped prefix: %v", err)
	}
	if Compare(m, fs.Match) <= 0 {
		t.Error("routes must sort after FlowSpec rules")
	}
	if fs.Shadows(Rule{m, Blackhole()}) || Covers(m, m) {
		t.Error("routes have no FlowSpec precedence")
	}
}

func TestRouteNoAllocs(t *testing.T) {
	r, _ := Parse("route 203.0.113.7/32 then blackhole")
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() {
		buf = r.Match.AppendTo(buf[:0])
		buf = r.Action.AppendCommunities(buf)
	}); n != 0 {
		t.Errorf("allocs = %v", n)
	}
}

// A FlowSpec action with an IPv6 redirect-ip community survives the stored
// form, and the stored form of one without stays a plain community list.
func TestStoredActionIPv6ExtCommunities(t *testing.T) {
	for _, text := range []string{
		"match destination 2001:db8::1/128 then redirect-ip 2001:db8::99",
		"match destination 2001:db8::1/128 then rate-limit 1000 redirect-ip 2001:db8::99",
		"match destination 2001:db8::1/128 then discard",
	} {
		r, err := Parse(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		b, err := r.Action.AppendBinary(nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Action.AppendIPv6ExtCommunities(nil)) == 0 && len(b)%8 != 0 {
			t.Errorf("%s: plain action stored as %d bytes", text, len(b))
		}
		got, err := DecodeStoredAction(r.Match.Family(), b)
		if err != nil {
			t.Fatalf("%s: decode stored %x: %v", text, b, err)
		}
		if got != r.Action {
			t.Errorf("%s: stored action came back as %s", text, got)
		}
	}
	for _, bad := range [][]byte{{0xE6}, {1, 2, 3}, {0xE6, 0}, append(make([]byte, 20), 0xE6, 2)} {
		if _, err := DecodeStoredAction(IPv6, bad); err == nil {
			t.Errorf("DecodeStoredAction(%x) accepted", bad)
		}
	}
}

// TestMatchClone: a clone is the same Match in memory of its own.
func TestMatchClone(t *testing.T) {
	m, err := RouteMatch(netip.MustParsePrefix("192.0.2.1/32"))
	if err != nil {
		t.Fatal(err)
	}
	c := m.Clone()
	if c != m || c.String() != m.String() {
		t.Fatalf("clone %v differs from %v", c, m)
	}
	if unsafe.StringData(c.k) == unsafe.StringData(m.k) {
		t.Fatal("the clone shares the original's bytes")
	}
	if (Match{}).Clone() != (Match{}) {
		t.Fatal("the zero Match's clone is not zero")
	}
}
