package flowspec

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

func famOf(b byte) Family {
	if b&1 == 0 {
		return IPv4
	}
	return IPv6
}

// FuzzDecode: whatever decodes re-encodes to the same bytes, its text
// parses back to its canonical form, and precedence is reflexive.
func FuzzDecode(f *testing.F) {
	for _, tt := range wireTests {
		f.Add(byte(tt.fam-1), unhex(f, tt.wire))
	}
	f.Fuzz(func(t *testing.T, fb byte, b []byte) {
		fam := famOf(fb)
		m, n, err := DecodeMatch(fam, b)
		if err != nil {
			if _, ok := err.(*DecodeError); !ok {
				t.Fatalf("error type %T", err)
			}
			return
		}
		if got := m.AppendTo(nil); !bytes.Equal(got, b[:n]) || m.Len() != n {
			t.Fatalf("re-encode: % x, want % x", got, b[:n])
		}
		c := m.Canonical()
		p, err := ParseMatch(fam, m.String())
		if err != nil || p != c {
			t.Fatalf("ParseMatch(%q) = %v, %v; want %v", m.String(), p, err, c)
		}
		if c.String() != m.String() || !c.IsCanonical() {
			t.Fatalf("canonical text differs: %q vs %q", c.String(), m.String())
		}
		if Compare(m, m) != 0 || Compare(m, c) != -Compare(c, m) {
			t.Fatal("Compare not antisymmetric")
		}
		_ = m.SendableByGoBGPv3()
	})
}

// FuzzText: Parse(r.String()) == r and String is a fixed point.
func FuzzText(f *testing.F) {
	for _, tt := range wireTests {
		f.Add("match " + tt.text + " then discard")
	}
	f.Add("match destination 10.0.0.0/8 then rate-limit 1.5 as 7 redirect 1.2.3.4:5 mark 3 action sample")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			if _, ok := err.(*SyntaxError); !ok {
				t.Fatalf("error type %T", err)
			}
			_ = err.Error()
			return
		}
		if !r.IsValid() {
			t.Fatalf("Parse(%q) returned an invalid rule", s)
		}
		txt := r.String()
		r2, err := Parse(txt)
		if err != nil || r2 != r {
			t.Fatalf("Parse(%q) = %v, %v; want %v", txt, r2, err, r)
		}
		if r2.String() != txt {
			t.Fatalf("String not a fixed point: %q vs %q", r2.String(), txt)
		}
		d, n, err := DecodeMatch(r.Match.Family(), r.Match.AppendTo(nil))
		if err != nil || d != r.Match || n != r.Match.Len() {
			t.Fatalf("decode of parsed %q: %v", txt, err)
		}
		a, err := DecodeActionIPv6(r.Action.AppendExtCommunities(nil), r.Action.AppendIPv6ExtCommunities(nil))
		if err != nil || a != r.Action {
			t.Fatalf("action round trip of %q: %v", txt, err)
		}
	})
}

// gobgpDecode decodes with GoBGP v4.8.0 and re-serializes; it reports a
// panic as an error (GoBGP v3 panicked on some malformed IPv6 input; a
// panic in v4 is a finding).
func gobgpDecode(fam Family, b []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("gobgp panic: %v", r)
		}
	}()
	n, err := bgp.NLRIFromSlice(gobgpFamily(fam), b)
	if err != nil {
		return nil, err
	}
	return n.Serialize()
}

// FuzzGoBGP is a differential test against GoBGP v4.8.0: every NLRI this
// package accepts and that GoBGP is not known to break (under 240 bytes,
// no IPv6 prefix offset, zero prefix padding) must decode in GoBGP and re-serialize to the same
// bytes. The converse does not hold: GoBGP accepts malformed input.
func FuzzGoBGP(f *testing.F) {
	for _, tt := range wireTests {
		f.Add(byte(tt.fam-1), unhex(f, tt.wire))
	}
	f.Fuzz(func(t *testing.T, fb byte, b []byte) {
		fam := famOf(fb)
		m, n, err := DecodeMatch(fam, b)
		if err != nil || m.SendableByGoBGPv3() != nil || !zeroPadding(m) {
			return
		}
		got, err := gobgpDecode(fam, b[:n])
		if err != nil {
			t.Fatalf("GoBGP rejects % x (%s): %v", b[:n], m, err)
		}
		if !bytes.Equal(got, b[:n]) {
			t.Fatalf("GoBGP re-encodes % x (%s) as % x", b[:n], m, got)
		}
	})
}

// zeroPadding reports whether m's prefixes have zero padding bits (GoBGP
// clears them on decode, which RFC 4271 permits).
func zeroPadding(m Match) bool {
	for c := range m.All() {
		if specOf(c.Type()).kind == kindPrefix && !canonicalComponent(m.fam, c.b) {
			return false
		}
	}
	return true
}

// The committed seed corpora must exist: a fuzz target whose folder is
// empty silently tests nothing beyond the f.Add seeds.
func TestFuzzCorpus(t *testing.T) {
	for _, name := range []string{"FuzzDecode", "FuzzText", "FuzzGoBGP"} {
		ents, err := os.ReadDir(filepath.Join("testdata", "fuzz", name))
		if err != nil {
			t.Errorf("%s corpus: %v", name, err)
			continue
		}
		if len(ents) == 0 {
			t.Errorf("%s corpus is empty", name)
		}
	}
}

// TestGoBGPWire checks the table vectors against GoBGP's decoder.
func TestGoBGPWire(t *testing.T) {
	n := 0
	for _, tt := range wireTests {
		b := unhex(t, tt.wire)
		m, _, err := DecodeMatch(tt.fam, b)
		if err != nil || m.SendableByGoBGPv3() != nil {
			continue
		}
		n++
		got, err := gobgpDecode(tt.fam, b)
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("GoBGP: %s: % x, %v", tt.text, got, err)
		}
	}
	if n == 0 {
		t.Fatal("no vectors checked")
	}
	// GoBGP v3 crashes on this truncated IPv6 prefix (defect 2); we reject it.
	if _, _, err := DecodeMatch(IPv6, []byte{2, 1, 0x80}); err == nil {
		t.Error("accepted 02 01 80")
	}
}
