package bgp

import (
	"bytes"
	"strings"
	"testing"

	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// nlriOfLen builds an IPv4 FlowSpec NLRI (length prefix included) with a
// body of n bytes: protocol ==6, then a destination-port component of
// two-octet values (3 bytes each) and one-octet values (2 bytes each).
func nlriOfLen(n int) []byte {
	rest := n - 4 // protocol component (3) and the port component's type
	ones := 0
	for (rest-2*ones)%3 != 0 {
		ones++
	}
	twos := (rest - 2*ones) / 3
	body := []byte{3, 0x81, 6, 5}
	for i := range twos {
		op := byte(0x11) // ==, two-octet value
		if i == twos-1 && ones == 0 {
			op |= 0x80
		}
		body = append(body, op, 0x10, byte(i))
	}
	for i := range ones {
		op := byte(0x01)
		if i == ones-1 {
			op |= 0x80
		}
		body = append(body, op, byte(i))
	}
	if n < 240 {
		return append([]byte{byte(n)}, body...)
	}
	return append([]byte{0xf0 | byte(n>>8), byte(n)}, body...)
}

// TestGoBGPRoundTripLimits measures what the pinned GoBGP carries: a rule
// is Sendable exactly when GoBGP's NLRI parser reads every component
// ribkeeper encoded (none left as "unknown", as many as ours) and its
// encoder gives back the same bytes. This is the evidence behind
// MaxNLRILen and the IPv6 offset refusal; rerun it after any GoBGP
// upgrade.
func TestGoBGPRoundTripLimits(t *testing.T) {
	type tc struct {
		name string
		fam  flowspec.Family
		b    []byte
	}
	cases := []tc{
		// GoBGP sizes an IPv6 prefix pattern by its length alone, not
		// length minus offset (RFC 8956 §3.1): alone the bytes happen to
		// come back, followed by another component they are misread.
		{"ipv6 offset 8, then a port", flowspec.IPv6, []byte{13, 1, 64, 8, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 5, 0x81, 53}},
		{"ipv6 offset 61, then a port", flowspec.IPv6, []byte{12, 1, 103, 61, 0x12, 0x34, 0x56, 0x78, 0x80, 0x00, 5, 0x81, 53}},
		{"ipv6 offset 0, then a port", flowspec.IPv6, []byte{14, 1, 64, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 5, 0x81, 53}},
		{"ipv6 mapped ipv4", flowspec.IPv6, []byte{19, 1, 128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1}},
	}
	for _, n := range []int{200, 237, 238, 239, 240, 241, 300} {
		cases = append(cases, tc{name: "ipv4 body " + itoa(n), fam: flowspec.IPv4, b: nlriOfLen(n)})
	}
	for _, text := range []string{
		"match destination 10.0.0.1/32 protocol udp destination-port ==53",
		"match source 192.0.2.0/24 port '>=1024&<=2048 ==80' tcp-flags S",
		"match destination 2001:db8::/32 next-header tcp",
	} {
		r, err := flowspec.Parse(text + " then discard")
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, tc{name: text, fam: r.Match.Family(), b: r.Match.AppendTo(nil)})
	}
	sendable := 0
	for _, c := range cases {
		m, k, err := flowspec.DecodeMatch(c.fam, c.b)
		if err != nil || k != len(c.b) {
			t.Fatalf("%s: flowspec cannot decode the test NLRI %x: %v", c.name, c.b, err)
		}
		n, err := gobgp.NLRIFromSlice(gobgpFamily(c.fam), m.AppendTo(nil))
		same := false
		if err == nil {
			got, err := n.Serialize()
			fs, _ := n.(*gobgp.FlowSpecNLRI)
			same = err == nil && bytes.Equal(got, m.AppendTo(nil)) && fs != nil &&
				len(fs.Value) == countComponents(m) && !strings.Contains(n.String(), "unknown")
		}
		ok := Sendable(m) == nil
		if ok != same {
			t.Errorf("%s (%d bytes): Sendable = %v but GoBGP round trip exact = %v", c.name, m.Len(), Sendable(m), same)
		}
		if ok {
			sendable++
		}
	}
	if sendable == 0 || sendable == len(cases) {
		t.Fatalf("%d of %d cases sendable: the cases no longer straddle the limit", sendable, len(cases))
	}
}

func itoa(n int) string {
	var b []byte
	for n > 0 || len(b) == 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

func countComponents(m flowspec.Match) int {
	n := 0
	for range m.All() {
		n++
	}
	return n
}
