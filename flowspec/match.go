package flowspec

import (
	"iter"
	"net/netip"
	"strings"
)

// Family returns the rule's address family.
func (m Match) Family() Family { return m.fam() }

// IsValid reports whether m was constructed by Parse, ParseIn, ParseMatch or
// DecodeMatch.
func (m Match) IsValid() bool { return m.fam() != 0 }

// Clone returns m in memory of its own. A Match kept for long is best
// cloned together with the others kept with it: decoded one by one
// among a read's short-lived buffers, each small Match keeps a block of
// the allocator's shared between them alive (16 bytes for the 6 of an
// IPv4 host route); cloned one after the other, they share such blocks
// among themselves.
func (m Match) Clone() Match { return Match{k: strings.Clone(m.k)} }

// Len returns the length of the NLRI on the wire, including its 1- or
// 2-byte length prefix (0 for the zero Match).
func (m Match) Len() int {
	switch {
	case !m.IsValid():
		return 0
	case m.fam().IsRoute():
		return len(m.nlri())
	case len(m.nlri()) < 0xf0:
		return 1 + len(m.nlri())
	default:
		return 2 + len(m.nlri())
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
	case m.fam().IsRoute():
		return append(b, m.nlri()...)
	case len(m.nlri()) < 0xf0:
		b = append(b, byte(len(m.nlri())))
	default:
		b = append(b, 0xf0|byte(len(m.nlri())>>8), byte(len(m.nlri())))
	}
	return append(b, m.nlri()...)
}

// MarshalBinary returns the wire form (as AppendTo).
func (m Match) MarshalBinary() ([]byte, error) { return m.AppendTo(make([]byte, 0, m.Len())), nil }

// ComponentBytes returns the encoded components without the length prefix
// (nil for a route, which has no components).
func (m Match) ComponentBytes() []byte {
	if m.fam().IsRoute() {
		return nil
	}
	return []byte(m.nlri())
}

// All iterates over the components in type order.
func (m Match) All() iter.Seq[Component] {
	return func(yield func(Component) bool) {
		if m.fam().IsRoute() {
			return
		}
		for pos := 0; pos < len(m.nlri()); {
			n := componentLen(m.fam(), m.nlri(), pos)
			if !yield(Component{fam: m.fam(), b: m.nlri()[pos : pos+n]}) {
				return
			}
			pos += n
		}
	}
}

// Component returns the component of type t, if the rule has one.
func (m Match) Component(t ComponentType) (Component, bool) {
	if m.fam().IsRoute() {
		return Component{}, false
	}
	for pos := 0; pos < len(m.nlri()); {
		n := componentLen(m.fam(), m.nlri(), pos)
		switch ct := ComponentType(m.nlri()[pos]); {
		case ct == t:
			return Component{fam: m.fam(), b: m.nlri()[pos : pos+n]}, true
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
	if m.fam().IsRoute() {
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
