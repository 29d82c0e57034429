package flowspec

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Vectors: RFC 8955 §4.2.3 examples 1 and 2, RFC 8956 §3.8 examples,
// and hand-checked encodings.
var wireTests = []struct {
	fam   Family
	text  string // canonical
	wire  string // NLRI with length prefix
	alias []string
}{
	// RFC 8955 example 1.
	{IPv4, "destination 192.0.2.0/24 protocol ==tcp port ==25", "0b 01 18 c0 00 02 03 81 06 04 81 19",
		[]string{"port 25 destination 192.0.2.0/24 protocol tcp", "match destination 192.0.2.0/24 protocol '==6' port =25"}},
	// RFC 8955 example 2.
	{IPv4, "destination 192.0.2.0/24 source 203.0.113.0/24 port ==137 ==139 ==8080", "12 01 18 c0 00 02 02 18 cb 00 71 04 01 89 01 8b 91 1f 90",
		[]string{"source 203.0.113.0/24 destination 192.0.2.0/24 port '==137 ==139 ==8080'"}},
	{IPv4, "destination 203.0.113.7/32 protocol ==udp source-port ==53", "0c 01 20 cb 00 71 07 03 81 11 06 81 35",
		[]string{"match destination 203.0.113.7 protocol 17 source-port ==53"}},
	// A protocol without a name, and an operator other than == and !=,
	// print as numbers.
	{IPv4, "protocol ==23 >=200", "05 03 01 17 83 c8", nil},
	{IPv4, "destination-port >=1024&<=2048 ==80", "09 05 13 04 00 55 08 00 81 50", []string{"destination-port '>=1024&<=2048 ==80'"}},
	// RFC 8955 Table 1: true is lt|gt|eq = 111, false is 000.
	{IPv4, "port !=0 true false", "07 04 06 00 07 00 80 00", nil},
	{IPv4, "destination 10.21.4.0/24 port true", "08 01 18 0a 15 04 04 87 00", nil},
	{IPv4, "destination 0.0.0.0/0", "02 01 00", nil},
	{IPv6, "destination 2001:db8::/32", "07 01 20 00 20 01 0d b8", nil},
	{IPv6, "destination 2001:db8::/32 source ::1:0:0/96 offset 64 protocol ==tcp", "11 01 20 00 20 01 0d b8 02 60 40 00 00 00 01 03 81 06", nil},
	{IPv6, "protocol ==ipv6-icmp icmp-type ==128 label ==1048575", "0c 03 81 3a 07 81 80 0d a1 00 0f ff ff", []string{"next-header ==58 icmp-type ==128 label ==1048575"}},
	// The flow label is always 4 octets (RFC 8956 §3.7: SHOULD).
	{IPv6, "label ==5 >=256&<=65536 true", "15 0d 21 00 00 00 05 23 00 00 01 00 65 00 01 00 00 a7 00 00 00 00", nil},
	{IPv4, "tcp-flags =S&!=A !R 0x100", "0a 09 01 02 43 10 02 04 90 01 00", nil},
	{IPv4, "fragment dont-fragment !is-fragment =first-fragment+last-fragment", "07 0c 00 01 02 02 81 0c", nil},
	{IPv4, "icmp-type ==3 icmp-code ==1 packet-length >1400 dscp ==46", "0d 07 81 03 08 81 01 0a 92 05 78 0b 81 2e", nil},
}

func TestWire(t *testing.T) {
	for _, tt := range wireTests {
		want := unhex(t, tt.wire)
		for _, s := range append([]string{tt.text}, tt.alias...) {
			m, err := ParseMatch(tt.fam, s)
			if err != nil {
				t.Errorf("ParseMatch(%q): %v", s, err)
				continue
			}
			if got := m.AppendTo(nil); !bytes.Equal(got, want) {
				t.Errorf("ParseMatch(%q) = % x, want % x", s, got, want)
			}
			if got := m.String(); got != tt.text {
				t.Errorf("ParseMatch(%q).String() = %q, want %q", s, got, tt.text)
			}
			if m.Len() != len(want) {
				t.Errorf("Len = %d, want %d", m.Len(), len(want))
			}
		}
		d, n, err := DecodeMatch(tt.fam, append(want, 0xff))
		if err != nil || n != len(want) {
			t.Errorf("DecodeMatch(% x) = %v, %d, %v", want, d, n, err)
			continue
		}
		if d.String() != tt.text || d.Family() != tt.fam {
			t.Errorf("DecodeMatch(% x).String() = %q", want, d.String())
		}
		// Parse without family must infer it from the prefixes/label.
		if strings.Contains(tt.text, "/") || strings.Contains(tt.text, "label") {
			r, err := Parse("match " + tt.text + " then discard")
			if err != nil || r.Match != d {
				t.Errorf("Parse(%q) = %v, %v", tt.text, r, err)
			}
		}
	}
}

func TestRuleRoundTrip(t *testing.T) {
	for _, s := range []string{
		"match destination 203.0.113.7/32 protocol ==udp source-port ==53 then discard",
		"match destination 10.0.0.0/24 then rate-limit 1000",
		"match destination 10.0.0.0/24 then rate-limit 1.5 as 65000",
		"match destination 10.0.0.0/24 then rate-limit-packets 500",
		"match destination 10.0.0.0/24 then accept",
		"match destination 10.0.0.0/24 then action sample-terminal",
		"match destination 10.0.0.0/24 then redirect-ip 192.0.2.1 discard action sample redirect 65000:100 mark 10",
		"match destination 10.0.0.0/24 then redirect 192.0.2.1:100",
		"match destination 10.0.0.0/24 then redirect 0.65000:100",
		"match destination 10.0.0.0/24 then redirect 4200000000:7",
		"match destination 2001:db8::/32 then redirect-ip 2001:db8::1",
		"ipv6-flowspec match protocol ==tcp then discard",
		"match protocol !=udp then ext 0x0102030405060708 discard",
	} {
		r, err := Parse(s)
		if err != nil {
			t.Errorf("Parse(%q): %v", s, err)
			continue
		}
		if got := r.String(); got != s {
			t.Errorf("Parse(%q).String() = %q", s, got)
		}
		r2, err := Parse(r.String())
		if err != nil || r2 != r {
			t.Errorf("round trip of %q: %v %v", s, r2, err)
		}
		if !r.IsValid() {
			t.Errorf("%q not valid", s)
		}
	}
}

func TestActionWire(t *testing.T) {
	tests := []struct {
		a    Action
		text string
		wire string
	}{
		{Discard(), "discard", "8006 0000 00000000"},
		{RateLimit(1000), "rate-limit 1000", "8006 0000 447a0000"},
		{RateLimitPackets(500), "rate-limit-packets 500", "800c 0000 43fa0000"},
		{TrafficAction(true, false), "action sample", "8007 0000 00000002"},
		{TrafficAction(false, true), "action terminal", "8007 0000 00000001"},
		{RedirectAS2(65000, 100), "redirect 65000:100", "8008 fde8 00000064"},
		{Mark(10), "mark 10", "8009 0000 0000000a"},
		{Combine(Mark(10), Discard()), "discard mark 10", "8006 0000 00000000 8009 0000 0000000a"},
	}
	for _, tt := range tests {
		want := unhex(t, tt.wire)
		if got := tt.a.AppendExtCommunities(nil); !bytes.Equal(got, want) {
			t.Errorf("%s: % x, want % x", tt.text, got, want)
		}
		if tt.a.String() != tt.text {
			t.Errorf("String = %q, want %q", tt.a.String(), tt.text)
		}
		a, err := ParseAction(tt.text)
		if err != nil || a != tt.a {
			t.Errorf("ParseAction(%q) = %v, %v", tt.text, a, err)
		}
		d, err := DecodeAction(want)
		if err != nil || d != tt.a {
			t.Errorf("DecodeAction(% x) = %v, %v", want, d, err)
		}
	}
	// Unknown communities are kept verbatim and sorted.
	d, err := DecodeAction(unhex(t, "0102030405060708 8006000000000000 0102030405060708"))
	if err != nil || d.String() != "ext 0x0102030405060708 discard" {
		t.Errorf("DecodeAction unknown: %v %v", d, err)
	}
	for _, bad := range []string{"", "01020304"} {
		if _, err := DecodeAction(unhex(t, bad)); err == nil {
			t.Errorf("DecodeAction(%s) succeeded", bad)
		}
	}
}

func TestSyntaxErrors(t *testing.T) {
	tests := []struct{ in, word, msg string }{
		{"match destination 10.0.0.1/32 foo 1 then discard", "foo", "unknown match component; expected one of destination, source, protocol"},
		{"match destination 10.0.0.1/24 then discard", "10.0.0.1/24", "did you mean 10.0.0.0/24"},
		{"match destination-port >=1024&<=70000 then discard", "70000", "out of range 0..65535"},
		{"match destination-port &==80 then discard", "==80", "cannot be ANDed"},
		{"match protocol foo then discard", "foo", "not a protocol"},
		{"match destination 10.0.0.0/8 then", "", "expected an action"},
		{"match destination 10.0.0.0/8", "", "expected \"then\""},
		{"match destination 10.0.0.0/8 then discard rate-limit 5", "rate-limit", "only one traffic-rate"},
		{"match destination 10.0.0.0/8 source 2001:db8::/32 then discard", "2001:db8::/32", "not of the rule's family"},
		{"match port ==80 port ==81 then discard", "port", "duplicate component"},
		{"match tcp-flags X then discard", "X", "unknown TCP flag"},
		{"match fragment not-a-fragment then discard", "not-a-fragment", "!is-fragment"},
		{"match destination 2001:db8::/32 fragment dont-fragment then discard", "dont-fragment", "not defined for ipv6"},
		{"match label ==1 destination 10.0.0.0/8 then discard", "label", "only defined for ipv6"},
		{"match destination 10.0.0.0/8 then rate-limit -1", "-1", "non-negative"},
		{"match destination 10.0.0.0/8 then mark 64", "64", "0..63"},
		{"match destination 10.0.0.0/8 then redirect 1:2:3", "1:2:3", "IPv6 route targets"},
		{"match destination 2001:db8::1:0/112 offset 96 then discard", "2001:db8::1:0/112", "write them as zero"},
		{"match then discard", "then", "at least one match component"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.in)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) = %v, want *SyntaxError", tt.in, err)
			continue
		}
		if se.Word != tt.word || !strings.Contains(se.Msg, tt.msg) {
			t.Errorf("Parse(%q): word %q msg %q; want word %q msg ~%q", tt.in, se.Word, se.Msg, tt.word, tt.msg)
		}
		if se.Word != "" && tt.in[se.Offset:se.Offset+len(se.Word)] != se.Word {
			t.Errorf("Parse(%q): offset %d does not point at %q", tt.in, se.Offset, se.Word)
		}
	}
	_, err := Parse("match destination 10.0.0.1/32 foo then discard")
	want := `rule text: "foo" (column 31): unknown match component; expected one of destination, source, protocol, port,`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Error() = %q, want prefix %q", err, want)
	}
}

func TestFamily(t *testing.T) {
	for _, s := range []string{"ipv4", "IPv4-FlowSpec"} {
		if f, err := ParseFamily(s); err != nil || f != IPv4 || f.String() != "ipv4-flowspec" || f.AFI() != 1 {
			t.Errorf("ParseFamily(%q) = %v %v", s, f, err)
		}
	}
	if f, err := ParseFamily("ipv6-flowspec"); err != nil || f != IPv6 || f.AFI() != 2 {
		t.Errorf("ipv6: %v %v", f, err)
	}
	if _, err := ParseFamily("l2vpn"); err == nil {
		t.Error("l2vpn accepted")
	}
}

func TestZeroValues(t *testing.T) {
	var m Match
	var a Action
	var r Rule
	if m.IsValid() || a.IsValid() || r.IsValid() || m.Len() != 0 || len(m.AppendTo(nil)) != 0 {
		t.Error("zero values must be invalid and encode to nothing")
	}
	if _, ok := m.Destination(); ok {
		t.Error("zero Match has a destination")
	}
	for _, a := range []Action{RateLimit(-1), Mark(64)} {
		if a.IsValid() {
			t.Errorf("%v valid", a)
		}
	}
}

func TestDestination(t *testing.T) {
	r, err := Parse("match destination 203.0.113.7 source 198.51.100.0/24 then discard")
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := r.Match.Destination(); !ok || p.String() != "203.0.113.7/32" {
		t.Errorf("Destination = %v %v", p, ok)
	}
	if p, ok := r.Match.Source(); !ok || p.String() != "198.51.100.0/24" {
		t.Errorf("Source = %v %v", p, ok)
	}
	m, _ := ParseMatch(IPv6, "destination ::1:0:0/96 offset 64")
	if _, ok := m.Destination(); ok {
		t.Error("offset prefix reported as destination")
	}
}

// Matches evaluates a numeric or bitmask component against one value:
// items OR'ed, AND binding tighter; prefixes never match a value.
func TestComponentMatches(t *testing.T) {
	cases := []struct {
		match string
		typ   ComponentType
		yes   []uint32
		no    []uint32
	}{
		{"destination-port ==179", DestinationPort, []uint32{179}, []uint32{0, 178, 180, 65535}},
		{"port >=1024&<=2048 ==80", Port, []uint32{80, 1024, 2048}, []uint32{79, 1023, 2049}},
		{"protocol tcp udp", Protocol, []uint32{6, 17}, []uint32{1, 7}},
		{"source-port !=53", SourcePort, []uint32{0, 52, 54}, []uint32{53}},
		{"tcp-flags =S", TCPFlags, []uint32{0x02, 0x12}, []uint32{0x10, 0}},
		{"tcp-flags !=SA", TCPFlags, []uint32{0x02, 0x10, 0}, []uint32{0x12}},
		{"fragment is-fragment", Fragment, []uint32{FragIsFragment, FragIsFragment | FragLastFragment}, []uint32{0, FragDontFragment}},
		{"destination 192.0.2.0/24", DestinationPrefix, nil, []uint32{0, 0xc0000201}},
	}
	for _, cs := range cases {
		m, err := ParseMatch(IPv4, cs.match)
		if err != nil {
			t.Fatalf("%s: %v", cs.match, err)
		}
		c, ok := m.Component(cs.typ)
		if !ok {
			t.Fatalf("%s: no %s component", cs.match, cs.typ)
		}
		for _, v := range cs.yes {
			if !c.Matches(v) {
				t.Errorf("%s does not match %#x", cs.match, v)
			}
		}
		for _, v := range cs.no {
			if c.Matches(v) {
				t.Errorf("%s matches %#x", cs.match, v)
			}
		}
	}
}
