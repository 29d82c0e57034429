package flowspec

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

func famOf(b byte) Family {
	if b&1 == 0 {
		return IPv4
	}
	return IPv6
}

// FuzzDecode: whatever decodes is canonical (its encoding decodes to
// itself), its text parses back to it, and precedence is reflexive.
func FuzzDecode(f *testing.F) {
	for _, tt := range wireTests {
		f.Add(byte(tt.fam-1), unhex(f, tt.wire))
	}
	for _, tt := range decodeLeniencies {
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
		if n < 2 || n > len(b) {
			t.Fatalf("consumed %d of %d bytes", n, len(b))
		}
		w := m.AppendTo(nil)
		if len(w) != m.Len() {
			t.Fatalf("Len %d, AppendTo wrote %d bytes", m.Len(), len(w))
		}
		d, dn, err := DecodeMatch(fam, w)
		if err != nil || d != m || dn != len(w) {
			t.Fatalf("% x decodes to %v, whose encoding % x decodes to %v, %d, %v", b[:n], m, w, d, dn, err)
		}
		p, err := ParseMatch(fam, m.String())
		if err != nil || p != m {
			t.Fatalf("ParseMatch(%q) = %v, %v; want %v", m.String(), p, err, m)
		}
		if Compare(m, m) != 0 || Compare(m, p) != 0 {
			t.Fatal("Compare not reflexive")
		}
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

// gobgpComponents decodes b with GoBGP v4.8.0; it reports a panic as an
// error (GoBGP v3 panicked on some malformed IPv6 input; a panic in v4 is
// a finding).
func gobgpComponents(fam Family, b []byte) (comps []bgp.FlowSpecComponentInterface, out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("gobgp panic: %v", r)
		}
	}()
	n, err := bgp.NLRIFromSlice(gobgpFamily(fam), b)
	if err != nil {
		return nil, nil, err
	}
	fs, ok := n.(*bgp.FlowSpecNLRI)
	if !ok {
		return nil, nil, fmt.Errorf("GoBGP decoded a %T", n)
	}
	out, err = fs.Serialize()
	return fs.Value, out, err
}

// gobgpDecode decodes with GoBGP and re-serializes.
func gobgpDecode(fam Family, b []byte) ([]byte, error) {
	_, out, err := gobgpComponents(fam, b)
	return out, err
}

// gobgpOpName is GoBGP's name for the comparison bits of numeric operator
// op, translated to RFC 8955 Table 1. GoBGP v3.37.0 (and v4.8.0) call
// lt|gt|eq = 000 DEC_NUM_OP_TRUE "true" and 111 DEC_NUM_OP_FALSE "false":
// the reverse of the RFC, which this package, BIRD, FRR and ExaBGP follow.
// The bytes both sides put on the wire are the same; only GoBGP's names
// are swapped, so the comparison swaps them back here, explicitly, rather
// than skipping true and false.
func gobgpOpName(op uint8) string {
	name := bgp.DECNumOpNameMap[bgp.DECNumOp(op&0x07)]
	switch name {
	case "true":
		return "false" // GoBGP's "true" is lt|gt|eq = 000: RFC false
	case "false":
		return "true" // GoBGP's "false" is 111: RFC true
	}
	return name
}

// gobgpCarries mirrors bgp.Sendable (measured there by
// TestGoBGPRoundTripLimits): NLRI of at most 239 bytes (osrg/gobgp#3596),
// no IPv6 prefix offset (GoBGP sizes the pattern without it).
func gobgpCarries(m Match) bool {
	if m.Len() > 239 {
		return false
	}
	for c := range m.All() {
		if _, off, ok := c.Prefix(); ok && off != 0 {
			return false
		}
	}
	return true
}

// FuzzGoBGP is a differential test against GoBGP v4.8.0: every NLRI this
// package accepts, once normalised to its canonical encoding, must decode
// in GoBGP (unless GoBGP is known to break it: gobgpCarries),
// re-serialize to the same bytes, and mean the same: per numeric item the
// same AND/OR, operator (GoBGP's true/false names swapped back, see
// gobgpOpName) and value, per bitmask item the same operator bits and
// value. The converse does not hold: GoBGP accepts malformed input.
func FuzzGoBGP(f *testing.F) {
	for _, tt := range wireTests {
		f.Add(byte(tt.fam-1), unhex(f, tt.wire))
	}
	for _, tt := range decodeLeniencies {
		f.Add(byte(tt.fam-1), unhex(f, tt.wire))
	}
	f.Fuzz(func(t *testing.T, fb byte, b []byte) {
		fam := famOf(fb)
		m, _, err := DecodeMatch(fam, b)
		if err != nil || !gobgpCarries(m) {
			return
		}
		w := m.AppendTo(nil)
		comps, got, err := gobgpComponents(fam, w)
		if err != nil {
			t.Fatalf("GoBGP rejects % x (%s): %v", w, m, err)
		}
		if !bytes.Equal(got, w) {
			t.Fatalf("GoBGP re-encodes % x (%s) as % x", w, m, got)
		}
		if msg := sameMeaning(m, comps); msg != "" {
			t.Fatalf("% x: ours %q, GoBGP %v: %s", w, m, comps, msg)
		}
	})
}

// sameMeaning compares m's numeric and bitmask items with GoBGP's decoding
// of the same bytes and describes the first difference ("" if none).
func sameMeaning(m Match, comps []bgp.FlowSpecComponentInterface) string {
	var theirs []*bgp.FlowSpecComponent
	for _, c := range comps {
		if fc, ok := c.(*bgp.FlowSpecComponent); ok {
			theirs = append(theirs, fc)
		}
	}
	i := 0
	for c := range m.All() {
		if specOf(c.Type()).kind == kindPrefix {
			continue
		}
		if i >= len(theirs) || uint8(theirs[i].Type()) != uint8(c.Type()) {
			return fmt.Sprintf("GoBGP lacks component %s", c.Type())
		}
		ours, their := c.Items(), theirs[i].Items
		i++
		if len(ours) != len(their) {
			return fmt.Sprintf("%s: %d items, GoBGP %d", c.Type(), len(ours), len(their))
		}
		for k, it := range ours {
			g := their[k]
			if it.And() != (g.Op&0x40 != 0) {
				return fmt.Sprintf("%s item %d: AND differs", c.Type(), k)
			}
			if specOf(c.Type()).kind == kindBitmask {
				if it.Op&(OpNot|OpMatch) != g.Op&0x03 || uint64(it.Value) != g.Value {
					return fmt.Sprintf("%s item %d: bitmask op/value differ", c.Type(), k)
				}
				continue
			}
			name := numericName(c, k)
			if gn := gobgpOpName(g.Op); gn != name {
				return fmt.Sprintf("%s item %d: ours %q, GoBGP (names swapped to the RFC's) %q", c.Type(), k, name, gn)
			}
			if name != "true" && name != "false" && uint64(it.Value) != g.Value {
				return fmt.Sprintf("%s item %d: value %d, GoBGP %d", c.Type(), k, it.Value, g.Value)
			}
		}
	}
	if i != len(theirs) {
		return "GoBGP has more components"
	}
	return ""
}

// numericName returns the operator of item k of numeric component c as
// this package's text writes it ("==", "true", ...), read from the text.
func numericName(c Component, k int) string {
	s := c.String()
	s = s[strings.IndexByte(s, ' ')+1:]
	items := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '&' })
	it := items[k]
	if it == "true" || it == "false" {
		return it
	}
	// The operator, before the value (a number, or a protocol's name).
	return it[:len(it)-len(strings.TrimLeft(it, "=<>!"))]
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
		if err != nil || !gobgpCarries(m) {
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
