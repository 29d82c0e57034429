package flowspec

import (
	"testing"

	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// The same rules, encoded by this package and by GoBGP v4.8.0's
// pkg/packet/bgp. Run: go test ./flowspec -run '^$' -bench . -benchmem
var benchRules = []struct {
	name string
	fam  Family
	text string
}{
	{"ipv4-dst32-proto-port", IPv4, "destination 203.0.113.7/32 protocol ==6 destination-port ==80"},
	{"ipv6-6components", IPv6, "destination 2001:db8:1::/48 source 2001:db8:2::/48 protocol ==6 destination-port >=1024&<=2048 tcp-flags =S&!=A packet-length <1500"},
}

// gobgpFamily is GoBGP's FlowSpec family of fam.
func gobgpFamily(fam Family) bgp.Family {
	if fam == IPv4 {
		return bgp.RF_FS_IPv4_UC
	}
	return bgp.RF_FS_IPv6_UC
}

func benchSetup(b *testing.B, fam Family, text string) (Match, []byte, bgp.NLRI) {
	m, err := ParseMatch(fam, text)
	if err != nil {
		b.Fatal(err)
	}
	wire := m.AppendTo(nil)
	g, err := bgp.NLRIFromSlice(gobgpFamily(fam), wire)
	if err != nil {
		b.Fatal(err)
	}
	if out, err := g.Serialize(); err != nil || string(out) != string(wire) {
		b.Fatalf("GoBGP disagrees: % x vs % x (%v)", out, wire, err)
	}
	return m, wire, g
}

func BenchmarkEncode(b *testing.B) {
	for _, r := range benchRules {
		m, _, g := benchSetup(b, r.fam, r.text)
		b.Run("ours/"+r.name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 64)
			for b.Loop() {
				buf = m.AppendTo(buf[:0])
			}
		})
		b.Run("gobgp/"+r.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.Serialize(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, r := range benchRules {
		_, wire, _ := benchSetup(b, r.fam, r.text)
		b.Run("ours/"+r.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := DecodeMatch(r.fam, wire); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("gobgp/"+r.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bgp.NLRIFromSlice(gobgpFamily(r.fam), wire); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkKey measures computing a rule's table key from a decoded rule
// and looking it up: ours keys maps by the comparable Match itself; GoBGP
// keys its tables by the NLRI's String().
func BenchmarkKey(b *testing.B) {
	for _, r := range benchRules {
		m, _, g := benchSetup(b, r.fam, r.text)
		ours := map[Match]int{m: 1}
		theirs := map[string]int{g.String(): 1}
		b.Run("ours/"+r.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ours[m] != 1 {
					b.Fatal("miss")
				}
			}
		})
		b.Run("gobgp/"+r.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if theirs[g.String()] != 1 {
					b.Fatal("miss")
				}
			}
		})
	}
}

// BenchmarkParse reads rule texts as a batch write's parse does (one per
// rule of the batch).
func BenchmarkParse(b *testing.B) {
	for _, r := range benchRules {
		b.Run(r.name, func(b *testing.B) {
			text := "match " + r.text + " then discard"
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(text); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
