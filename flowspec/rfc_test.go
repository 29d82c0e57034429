package flowspec

import (
	"bytes"
	"testing"
)

// rfc8955Table1 is RFC 8955 §4.2.1.1 Table 1, written by hand from the
// RFC: the lt, gt and eq bits of a numeric operator and the operation they
// select. It is the oracle for the numeric operators; nothing in it is
// derived from this package. below/equal/above say whether a packet value
// below, equal to or above the item's value matches.
var rfc8955Table1 = []struct {
	lt, gt, eq          byte
	text                string // this package's text ("" + value, or the word)
	below, equal, above bool
}{
	{0, 0, 0, "false", false, false, false}, // false (independent of the value)
	{0, 0, 1, "==", false, true, false},     // == (equal)
	{0, 1, 0, ">", false, false, true},      // > (greater than)
	{0, 1, 1, ">=", false, true, true},      // >= (greater than or equal)
	{1, 0, 0, "<", true, false, false},      // < (less than)
	{1, 0, 1, "<=", true, true, false},      // <= (less than or equal)
	{1, 1, 0, "!=", true, false, true},      // != (not equal value)
	{1, 1, 1, "true", true, true, true},     // true (independent of the value)
}

// TestRFC8955Table1 checks every numeric operator against the RFC table:
// the text ribkeeper prints and parses, the operator byte on the wire
// (hand-built from the table's bits), and the meaning Compare/Covers use.
func TestRFC8955Table1(t *testing.T) {
	for _, row := range rfc8955Table1 {
		op := 0x80 | row.lt<<2 | row.gt<<1 | row.eq // end-of-list, 1 octet
		text := "port " + row.text + "80"
		value := byte(80)
		if row.text == "true" || row.text == "false" {
			text, value = "port "+row.text, 0 // the value is ignored: canonical 0
		}
		wire := []byte{3, 4, op, value}

		m, err := ParseMatch(IPv4, text)
		if err != nil {
			t.Errorf("ParseMatch(%q): %v", text, err)
			continue
		}
		if got := m.AppendTo(nil); !bytes.Equal(got, wire) {
			t.Errorf("%q encodes as % x, want % x (lt=%d gt=%d eq=%d)", text, got, wire, row.lt, row.gt, row.eq)
		}
		d, _, err := DecodeMatch(IPv4, wire)
		if err != nil || d != m || d.String() != text {
			t.Errorf("DecodeMatch(% x) = %q, %v; want %q", wire, d, err, text)
		}
		c, _ := m.Component(Port)
		for _, probe := range []struct {
			v    uint32
			want bool
		}{{79, row.below}, {80, row.equal}, {81, row.above}} {
			if got := evalNumeric(c.b, probe.v); got != probe.want {
				t.Errorf("%q at port %d: %v, RFC says %v", text, probe.v, got, probe.want)
			}
		}
	}
}

// TestTrueFalseWire pins the NLRI bytes of rules with true and false,
// written by hand from RFC 8955: type 1 /24 prefix, then type 4 with one
// item whose operator is end-of-list 0x80 | length 1 octet 0x00 |
// lt|gt|eq (111 = 0x07 true, 000 false).
func TestTrueFalseWire(t *testing.T) {
	tests := []struct {
		rule string
		nlri string
	}{
		// The rule: ribkeeper sent 08 01 18 0a 15 04 04 80 00,
		// which BIRD and ExaBGP read as "port false".
		{"match destination 10.21.4.0/24 port true then discard", "08 01 18 0a 15 04 04 87 00"},
		{"match destination 10.21.4.0/24 port false then discard", "08 01 18 0a 15 04 04 80 00"},
		{"match destination 10.21.4.0/24 port ==80 true then discard", "0a 01 18 0a 15 04 04 01 50 87 00"},
		{"match destination 10.21.4.0/24 port ==80&true then discard", "0a 01 18 0a 15 04 04 01 50 c7 00"},
		{"match destination 10.21.4.0/24 protocol false port true then discard", "0b 01 18 0a 15 04 03 80 00 04 87 00"},
		// IPv6: the flow label's true at its 4 octets (0xa7 = end,
		// 4 octets, lt|gt|eq).
		{"match destination 2001:db8::/32 label true then discard", "0d 01 20 00 20 01 0d b8 0d a7 00 00 00 00"},
		{"match destination 2001:db8::/32 label false then discard", "0d 01 20 00 20 01 0d b8 0d a0 00 00 00 00"},
	}
	for _, tt := range tests {
		r, err := Parse(tt.rule)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.rule, err)
			continue
		}
		want := unhex(t, tt.nlri)
		if got := r.Match.AppendTo(nil); !bytes.Equal(got, want) {
			t.Errorf("%s\n  nlri % x\n  want % x", tt.rule, got, want)
		}
		if r.String() != tt.rule {
			t.Errorf("String = %q, want %q", r.String(), tt.rule)
		}
		d, _, err := DecodeMatch(r.Match.Family(), want)
		if err != nil || d != r.Match {
			t.Errorf("DecodeMatch(%s) = %v, %v", tt.nlri, d, err)
		}
	}
}

// TestTrueFalseOrder: precedence and coverage read true as matching
// everything. "port true" covers "port ==80" (a later rule can only see
// what an earlier true lets through), "port false" covers nothing.
func TestTrueFalseOrder(t *testing.T) {
	tru := mustMatch(t, IPv4, "destination 10.0.0.0/8 port true")
	fal := mustMatch(t, IPv4, "destination 10.0.0.0/8 port false")
	eq := mustMatch(t, IPv4, "destination 10.0.0.0/8 port ==80")
	// RFC 8955 §5.1 memcmp of the component bytes: false 80 00 < ==80
	// 81 50 < true 87 00.
	if Compare(fal, eq) >= 0 || Compare(eq, tru) >= 0 {
		t.Errorf("order: false %d ==80, ==80 %d true", Compare(fal, eq), Compare(eq, tru))
	}
	noPort := mustMatch(t, IPv4, "destination 10.0.0.0/8")
	if !universal(IPv4, mustComponent(t, tru, Port).b) || universal(IPv4, mustComponent(t, fal, Port).b) {
		t.Error("universal: port true must match every port, port false none")
	}
	if !Covers(tru, noPort) {
		t.Error("a rule with port true must cover the same rule without a port component")
	}
	if Covers(fal, noPort) {
		t.Error("a rule with port false covers nothing")
	}
}

func mustComponent(t *testing.T, m Match, ct ComponentType) Component {
	t.Helper()
	c, ok := m.Component(ct)
	if !ok {
		t.Fatalf("%s has no %s", m, ct)
	}
	return c
}

// decodeLeniencies lists every input the decoder accepts although it is not
// in canonical form, with the RFC text that makes it acceptable and the
// canonical form it normalises to. Everything else the decoder accepts is
// canonical already (FuzzDecode checks that re-encoding is stable).
var decodeLeniencies = []struct {
	rfc   string // where the RFC says the decoder ignores it / only SHOULD
	fam   Family
	wire  string // as received
	canon string // DecodeMatch(...).AppendTo
	text  string
}{
	// Reserved operator bits: "MUST be set to 0 on NLRI encoding and MUST
	// be ignored during decoding".
	{"RFC 8955 §4.2.1.1 numeric reserved bit 0x08", IPv4, "03 03 89 06", "03 03 81 06", "protocol ==tcp"},
	{"RFC 8955 §4.2.1.2 bitmask reserved bits 0x0c", IPv4, "03 09 8d 02", "03 09 81 02", "tcp-flags =S"},
	{"RFC 8955 §4.2.1.2 bitmask reserved bits 0x0c, fragment", IPv4, "03 0c 86 02", "03 0c 82 02", "fragment !is-fragment"},
	// AND on the first operator: "MUST be treated as always unset on
	// decoding".
	{"RFC 8955 §4.2.1.1 AND bit on a first numeric operator", IPv4, "08 04 43 89 45 8b 91 1f 90", "08 04 03 89 45 8b 91 1f 90", "port >=137&<=139 ==8080"},
	{"RFC 8955 §4.2.1.2 AND bit on a first bitmask operator", IPv4, "03 09 c1 02", "03 09 81 02", "tcp-flags =S"},
	// Padding after a prefix: ignored (RFC 4271 §4.3: "the value of
	// trailing bits is irrelevant"; RFC 8956 §3.1: "MUST be ignored on
	// decoding").
	{"RFC 4271 §4.3 / RFC 8955 §4.2.2.1 IPv4 prefix padding", IPv4, "05 01 14 0a 15 0f", "05 01 14 0a 15 00", "destination 10.21.0.0/20"},
	{"RFC 8956 §3.1 IPv6 pattern padding", IPv6, "04 01 04 00 ff", "04 01 04 00 f0", "destination f000::/4"},
	{"RFC 8956 §3.1 IPv6 pattern padding with an offset", IPv6, "05 02 74 68 ab ff", "05 02 74 68 ab f0", "source ::ab:f000/116 offset 104"},
	// TCP flags: the 2-octet form "matches octets 13 and 14 of the TCP
	// header with the data offset (leftmost 4 bits) always treated as 0".
	{"RFC 8955 §4.2.2.9 TCP flags data-offset nibble", IPv4, "04 09 91 50 12", "03 09 81 12", "tcp-flags =SA"},
	{"RFC 8955 §4.2.2.9 TCP flags data-offset nibble, NS bit kept", IPv4, "06 09 11 f1 00 80 02", "06 09 11 01 00 80 02", "tcp-flags =0x100 S"},
	// Reserved fragment bits: "MUST be set to 0 on NLRI encoding and MUST
	// be ignored during decoding"; for IPv6 the DF position is reserved.
	{"RFC 8955 §4.2.2.12 reserved fragment bits", IPv4, "03 0c 81 f2", "03 0c 81 02", "fragment =is-fragment"},
	{"RFC 8956 §3.6 reserved fragment bits (DF position)", IPv6, "03 0c 81 03", "03 0c 81 02", "fragment =is-fragment"},
	// Widths the RFCs only recommend (SHOULD): accepted, re-encoded at the
	// canonical width.
	{"RFC 8955 §4.2.2.3 protocol in 2 octets (SHOULD 1)", IPv4, "04 03 91 00 06", "03 03 81 06", "protocol ==tcp"},
	{"RFC 8955 §4.2.2.3 protocol in 8 octets (SHOULD 1)", IPv4, "0a 03 b1 00 00 00 00 00 00 00 11", "03 03 81 11", "protocol ==udp"},
	{"RFC 8956 §3.3 next header in 4 octets (SHOULD 1)", IPv6, "06 03 a1 00 00 00 3a", "03 03 81 3a", "protocol ==ipv6-icmp"},
	{"RFC 8955 §4.2.2.4 port in 4 octets (SHOULD 1 or 2)", IPv4, "06 04 a1 00 00 00 50", "03 04 81 50", "port ==80"},
	{"RFC 8955 §4.2.2.4 port in 2 octets below 256 (minimal is canonical)", IPv4, "04 04 91 00 50", "03 04 81 50", "port ==80"},
	{"RFC 8955 §4.2.2.5 destination port in 4 octets (SHOULD 1 or 2)", IPv4, "06 05 a1 00 00 1f 90", "04 05 91 1f 90", "destination-port ==8080"},
	{"RFC 8955 §4.2.2.6 source port in 4 octets (SHOULD 1 or 2)", IPv4, "06 06 a3 00 00 04 00", "04 06 93 04 00", "source-port >=1024"},
	{"RFC 8955 §4.2.2.7 ICMP type in 2 octets (SHOULD 1)", IPv4, "04 07 91 00 08", "03 07 81 08", "icmp-type ==8"},
	{"RFC 8955 §4.2.2.8 ICMP code in 4 octets (SHOULD 1)", IPv4, "06 08 a1 00 00 00 03", "03 08 81 03", "icmp-code ==3"},
	{"RFC 8955 §4.2.2.10 packet length in 4 octets (SHOULD 1 or 2)", IPv4, "06 0a a1 00 00 05 dc", "04 0a 91 05 dc", "packet-length ==1500"},
	{"RFC 8956 §3.7 flow label in 1 octet (SHOULD 4)", IPv6, "03 0d 81 05", "06 0d a1 00 00 00 05", "label ==5"},
	{"RFC 8956 §3.7 flow label in 2 octets (SHOULD 4)", IPv6, "04 0d 91 30 39", "06 0d a1 00 00 30 39", "label ==12345"},
	// Table 1: true and false are "independent of the value".
	{"RFC 8955 §4.2.1.1 Table 1 value of true ignored", IPv4, "03 04 87 50", "03 04 87 00", "port true"},
	{"RFC 8955 §4.2.1.1 Table 1 value of false ignored, any width", IPv4, "06 04 a0 ff ff ff ff", "03 04 80 00", "port false"},
	// The NLRI length: "If the NLRI length is smaller than 240 (0xf0 hex)
	// octets, the length field can be encoded as a single octet."
	{"RFC 8955 §4.1 2-octet length form below 240", IPv4, "f0 06 01 08 0a 03 81 06", "06 01 08 0a 03 81 06", "destination 10.0.0.0/8 protocol ==tcp"},
}

func TestDecodeLeniencies(t *testing.T) {
	for _, tt := range decodeLeniencies {
		t.Run(tt.rfc, func(t *testing.T) {
			in, canon := unhex(t, tt.wire), unhex(t, tt.canon)
			if bytes.Equal(in, canon) {
				t.Fatal("test row is canonical already")
			}
			m, n, err := DecodeMatch(tt.fam, append(in, 0xee))
			if err != nil {
				t.Fatalf("DecodeMatch(% x): %v", in, err)
			}
			if n != len(in) {
				t.Errorf("consumed %d bytes, want %d", n, len(in))
			}
			if got := m.AppendTo(nil); !bytes.Equal(got, canon) || m.Len() != len(canon) {
				t.Errorf("normalised to % x (Len %d), want % x", got, m.Len(), canon)
			}
			if m.String() != tt.text {
				t.Errorf("text %q, want %q", m.String(), tt.text)
			}
			// The canonical form is one key: it decodes, and parses from
			// the text, to the same Match.
			c, _, err := DecodeMatch(tt.fam, canon)
			if err != nil || c != m {
				t.Errorf("canonical bytes decode to %v, %v", c, err)
			}
			p, err := ParseMatch(tt.fam, tt.text)
			if err != nil || p != m {
				t.Errorf("ParseMatch(%q) = %v, %v", tt.text, p, err)
			}
		})
	}
}

// Normalising can lengthen an NLRI (a flow label grows to 4 octets): a
// rule that no longer fits the 2-byte length form is refused, not cut.
func TestDecodeNormalisedTooLong(t *testing.T) {
	body := []byte{byte(FlowLabel)}
	for i := range 1500 {
		body = append(body, OpEQ, byte(i)) // 1-octet labels
	}
	body[len(body)-2] |= OpEnd
	b := append([]byte{0xf0 | byte(len(body)>>8), byte(len(body))}, body...)
	_, _, err := DecodeMatch(IPv6, b)
	if err == nil || !bytesContains(err.Error(), "canonical width") {
		t.Fatalf("DecodeMatch of %d bytes growing past 4095: %v", len(b), err)
	}
}

func bytesContains(s, sub string) bool { return bytes.Contains([]byte(s), []byte(sub)) }

// The parser refuses what the decoder refuses.
func TestParseRFCLimits(t *testing.T) {
	for _, tt := range []struct{ text, want string }{
		{"destination ::1:0:0/96 offset 96", "equals the prefix length"},
		{"destination 2001:db8::/32 offset 32", "RFC 8956 §3.1"},
		{"tcp-flags 0x1002", "TCP data offset"},
		{"ipv6-flowspec match fragment dont-fragment", "not defined for ipv6-flowspec"},
	} {
		_, err := ParseMatch(0, tt.text)
		if err == nil || !bytesContains(err.Error(), tt.want) {
			t.Errorf("ParseMatch(%q) = %v; want an error with %q", tt.text, err, tt.want)
		}
	}
	// Offset 0 with length 0 matches every address and stays valid.
	if _, err := ParseMatch(IPv6, "destination ::/0 offset 0"); err != nil {
		t.Error(err)
	}
}
