package flowspec

import (
	"errors"
	"fmt"
	"iter"
	"net/netip"
)

// Family returns the rule's address family.
func (m Match) Family() Family { return m.fam }

// IsValid reports whether m was constructed by Parse, ParseIn, ParseMatch or
// DecodeMatch.
func (m Match) IsValid() bool { return m.fam != 0 }

// Len returns the length of the NLRI on the wire, including its 1- or
// 2-byte length prefix (0 for the zero Match).
func (m Match) Len() int {
	switch {
	case !m.IsValid():
		return 0
	case m.fam.IsRoute():
		return len(m.nlri)
	case len(m.nlri) < 0xf0:
		return 1 + len(m.nlri)
	default:
		return 2 + len(m.nlri)
	}
}

// AppendTo appends the NLRI in wire form (length prefix + components) to b;
// for a route, the unicast NLRI (prefix length in bits + prefix bytes).
// It cannot fail and does not allocate when b has room for m.Len() bytes.
// The zero Match appends nothing.
func (m Match) AppendTo(b []byte) []byte {
	switch {
	case !m.IsValid():
		return b
	case m.fam.IsRoute():
		return append(b, m.nlri...)
	case len(m.nlri) < 0xf0:
		b = append(b, byte(len(m.nlri)))
	default:
		b = append(b, 0xf0|byte(len(m.nlri)>>8), byte(len(m.nlri)))
	}
	return append(b, m.nlri...)
}

// MarshalBinary returns the wire form (as AppendTo).
func (m Match) MarshalBinary() ([]byte, error) { return m.AppendTo(make([]byte, 0, m.Len())), nil }

// ComponentBytes returns the encoded components without the length prefix
// (nil for a route, which has no components).
func (m Match) ComponentBytes() []byte {
	if m.fam.IsRoute() {
		return nil
	}
	return []byte(m.nlri)
}

// All iterates over the components in type order.
func (m Match) All() iter.Seq[Component] {
	return func(yield func(Component) bool) {
		if m.fam.IsRoute() {
			return
		}
		for pos := 0; pos < len(m.nlri); {
			n := componentLen(m.fam, m.nlri, pos)
			if !yield(Component{fam: m.fam, b: m.nlri[pos : pos+n]}) {
				return
			}
			pos += n
		}
	}
}

// Component returns the component of type t, if the rule has one.
func (m Match) Component(t ComponentType) (Component, bool) {
	if m.fam.IsRoute() {
		return Component{}, false
	}
	for pos := 0; pos < len(m.nlri); {
		n := componentLen(m.fam, m.nlri, pos)
		switch ct := ComponentType(m.nlri[pos]); {
		case ct == t:
			return Component{fam: m.fam, b: m.nlri[pos : pos+n]}, true
		case ct > t:
			return Component{}, false
		}
		pos += n
	}
	return Component{}, false
}

// Destination returns the destination prefix component, if the rule has
// one. IPv6 prefixes with a non-zero offset are not destinations in the
// routing sense and report false; use Component to read them. A route's
// destination is its prefix.
func (m Match) Destination() (netip.Prefix, bool) {
	if m.fam.IsRoute() {
		return m.routePrefix(), true
	}
	return m.prefix(DestinationPrefix)
}

// Source returns the source prefix component like Destination.
func (m Match) Source() (netip.Prefix, bool) { return m.prefix(SourcePrefix) }

func (m Match) prefix(t ComponentType) (netip.Prefix, bool) {
	c, ok := m.Component(t)
	if !ok {
		return netip.Prefix{}, false
	}
	p, off, _ := c.Prefix()
	return p, off == 0
}

// IsCanonical reports whether every value is encoded at its minimal length
// and true/false items carry a zero value, as Parse produces. Decoded
// matches from other speakers may not be canonical.
func (m Match) IsCanonical() bool { return m.Canonical() == m }

// Canonical returns m with every value re-encoded at its minimal length and
// true/false items with value 0: the form Parse(m.String()) returns.
// Note that RFC 8955 ordering and the NLRI identity on the wire depend on
// the exact bytes, so a decoded non-canonical Match is a different rule.
func (m Match) Canonical() Match {
	if !m.IsValid() || m.fam.IsRoute() {
		return m
	}
	canon := true
	for c := range m.All() {
		if !canonicalComponent(m.fam, c.b) {
			canon = false
			break
		}
	}
	if canon {
		return m
	}
	b := make([]byte, 0, len(m.nlri))
	for c := range m.All() {
		if specOf(c.Type()).kind == kindPrefix {
			p, off := prefixOf(m.fam, c.b)
			b = appendPrefix(append(b, c.b[0]), m.fam, p, off)
			continue
		}
		b = append(b, c.b[0])
		for pos := 1; pos < len(c.b); {
			op, v, n := readItem(c.b, pos)
			if specOf(c.Type()).kind == kindNumeric && (op&7 == 0 || op&7 == 7) {
				v = 0
			}
			b = appendItem(b, op&^opLenMask, v)
			pos += n
		}
	}
	return Match{fam: m.fam, nlri: string(b)}
}

func canonicalComponent(f Family, c string) bool {
	k := specOf(ComponentType(c[0])).kind
	if k == kindPrefix {
		// Canonical when the padding bits after the pattern are zero.
		hdr, pat := 2, int(c[1])
		if f == IPv6 {
			hdr, pat = 3, pat-int(c[2])
		}
		if r := pat % 8; r != 0 && c[hdr+pat/8]&(0xff>>r) != 0 {
			return false
		}
		return true
	}
	for pos := 1; pos < len(c); {
		op, v, n := readItem(c, pos)
		if k == kindNumeric && (op&7 == 0 || op&7 == 7) && v != 0 {
			return false
		}
		if op&opLenMask != lenCode(v) {
			return false
		}
		pos += n
	}
	return true
}

// lenCode returns the length bits of the minimal encoding of v.
func lenCode(v uint32) byte {
	switch {
	case v <= 0xff:
		return 0x00
	case v <= 0xffff:
		return 0x10
	}
	return 0x20
}

// appendItem appends op (without length bits) and v at minimal length.
func appendItem(b []byte, op byte, v uint32) []byte {
	lc := lenCode(v)
	b = append(b, op|lc)
	switch lc {
	case 0x00:
		return append(b, byte(v))
	case 0x10:
		return append(b, byte(v>>8), byte(v))
	}
	return append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// ErrGoBGPv3 is wrapped by the errors of SendableByGoBGPv3.
var ErrGoBGPv3 = errors.New("not sendable through GoBGP v3.37.0")

// GoBGPv3MaxNLRILen is the largest NLRI body (components, without the
// length prefix) that GoBGP v3.37.0 re-encodes correctly: a 239-byte body
// already comes out as "00 00 00 ee ..." (osrg/gobgp#3596), measured by
// round-tripping through its encoder.
const GoBGPv3MaxNLRILen = 0xee

// SendableByGoBGPv3 reports whether the pinned GoBGP v3.37.0 speaker can
// carry m without corrupting it: GoBGP v3 mis-encodes NLRI of 240 bytes or
// more and IPv6 prefix components with a non-zero offset. The decoder in
// this package reads both correctly; only sending through GoBGP is refused.
// The error wraps ErrGoBGPv3.
func (m Match) SendableByGoBGPv3() error {
	if !m.IsValid() {
		return fmt.Errorf("flowspec: invalid match: %w", ErrGoBGPv3)
	}
	if m.fam.IsRoute() {
		return nil
	}
	if len(m.nlri) > GoBGPv3MaxNLRILen {
		return fmt.Errorf("flowspec: encoded rule is %d bytes; GoBGP v3 corrupts rules over %d bytes (osrg/gobgp#3596), split it into smaller rules: %w",
			len(m.nlri), GoBGPv3MaxNLRILen, ErrGoBGPv3)
	}
	if m.fam == IPv6 {
		for _, t := range [...]ComponentType{DestinationPrefix, SourcePrefix} {
			c, ok := m.Component(t)
			if !ok {
				continue
			}
			if c.b[2] != 0 {
				return fmt.Errorf("flowspec: %s prefix offset %d: GoBGP v3 encodes IPv6 prefix offsets wrongly, use offset 0: %w", t, c.b[2], ErrGoBGPv3)
			}
			// GoBGP v3 hands such a prefix to its API (the RIB watch,
			// gRPC) as IPv4 text and reads it back in the IPv4 layout: the
			// path goes out right but cannot be seen, so it could never be
			// confirmed or withdrawn by Match.
			var a [16]byte
			copy(a[:], c.b[3:])
			if netip.AddrFrom16(a).Is4In6() {
				return fmt.Errorf("flowspec: %s prefix %s is IPv4-mapped; GoBGP v3 reports it as an IPv4 prefix and ribkeeper could not track it: use an ipv4 rule: %w", t, netip.AddrFrom16(a), ErrGoBGPv3)
			}
		}
	}
	return nil
}
