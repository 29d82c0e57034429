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

// appendItem appends op (without length bits) and v of component type t
// at the canonical length (canonLen).
func appendItem(b []byte, t ComponentType, op byte, v uint32) []byte {
	lc := canonLen(t, v)
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
