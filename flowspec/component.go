package flowspec

import (
	"net/netip"
)

// ComponentType is the type of a FlowSpec NLRI component (RFC 8955 §4.2.2,
// RFC 8956 §3). Components appear at most once per rule, in increasing type
// order.
type ComponentType uint8

// Component types. IPv4 rules may use types 1–12, IPv6 rules 1–13.
const (
	DestinationPrefix ComponentType = 1
	SourcePrefix      ComponentType = 2
	Protocol          ComponentType = 3 // IPv6: next header
	Port              ComponentType = 4
	DestinationPort   ComponentType = 5
	SourcePort        ComponentType = 6
	ICMPType          ComponentType = 7
	ICMPCode          ComponentType = 8
	TCPFlags          ComponentType = 9
	PacketLength      ComponentType = 10
	DSCP              ComponentType = 11
	Fragment          ComponentType = 12
	FlowLabel         ComponentType = 13 // IPv6 only
)

// Operator byte bits shared by numeric and bitmask operators.
const (
	OpEnd     byte = 0x80 // last item of the component
	OpAnd     byte = 0x40 // AND with the previous item (else OR)
	opLenMask byte = 0x30 // value length: 1 << ((op & 0x30) >> 4) bytes
)

// Numeric operator bits (RFC 8955 §4.2.1.1). The three comparison bits
// lt|gt|eq select the operation as in RFC 8955 Table 1:
//
//	lt gt eq
//	 0  0  0  false (independent of the value)   OpFalse
//	 0  0  1  ==                                 OpEQ
//	 0  1  0  >                                  OpGT
//	 0  1  1  >=                                 OpGT|OpEQ
//	 1  0  0  <                                  OpLT
//	 1  0  1  <=                                 OpLT|OpEQ
//	 1  1  0  !=                                 OpLT|OpGT
//	 1  1  1  true (independent of the value)    OpTrue
//
// GoBGP's constants name 000 "true" and 111 "false"; BIRD, ExaBGP, FRR and
// the RFC name them as above, and so does this package.
const (
	OpLT byte = 0x04
	OpGT byte = 0x02
	OpEQ byte = 0x01

	OpFalse byte = 0x00
	OpTrue  byte = OpLT | OpGT | OpEQ

	numCmpMask  byte = 0x07
	numReserved byte = 0x08
)

// Bitmask operator bits (RFC 8955 §4.2.1.2).
const (
	OpNot   byte = 0x02 // negate the result
	OpMatch byte = 0x01 // (data & value) == value; else (data & value) != 0

	bitReserved byte = 0x0c
)

// Fragment bits (RFC 8955 §4.2.2.12). DontFragment is IPv4 only.
const (
	FragDontFragment  = 0x01
	FragIsFragment    = 0x02
	FragFirstFragment = 0x04
	FragLastFragment  = 0x08
)

type kind uint8

const (
	kindPrefix kind = iota + 1
	kindNumeric
	kindBitmask
)

// Value widths a decoder accepts, as a set of length codes (bit n: the
// length code n of the operator byte, a value of 1<<n octets).
const (
	w1   uint8 = 1 << 0
	w2   uint8 = 1 << 1
	w4   uint8 = 1 << 2
	w8   uint8 = 1 << 3
	wAny       = w1 | w2 | w4 | w8
)

// spec describes how a component type is encoded.
//
// widths is what DecodeMatch accepts. Where RFC 8955/8956 only say a width
// SHOULD be used (protocol, ports, ICMP, packet length, flow label) every
// width the operator byte can express is accepted and the value is
// normalised to its canonical width (canonLen), provided it fits maxVal;
// where they say MUST (TCP flags 1 or 2 octets, §4.2.2.9; DSCP and
// fragment 1 octet, §4.2.2.11, §4.2.2.12) other widths are malformed.
type spec struct {
	kind   kind
	widths uint8  // accepted value widths on decode (w1|w2|...)
	maxVal uint32 // largest meaningful value (the field's natural width)
}

func specOf(t ComponentType) spec {
	switch t {
	case DestinationPrefix, SourcePrefix:
		return spec{kindPrefix, 0, 0}
	case Protocol: // RFC 8955 §4.2.2.3, RFC 8956 §3.3: SHOULD be 1 octet
		return spec{kindNumeric, wAny, 0xff}
	case Port, DestinationPort, SourcePort: // RFC 8955 §4.2.2.4-6: SHOULD be 1 or 2 octets
		return spec{kindNumeric, wAny, 0xffff}
	case ICMPType, ICMPCode: // §4.2.2.7-8, RFC 8956 §3.4-3.5: SHOULD be 1 octet
		return spec{kindNumeric, wAny, 0xff}
	case TCPFlags: // §4.2.2.9: MUST be 1 or 2 octets; the data-offset nibble of the 2-octet form is treated as 0
		return spec{kindBitmask, w1 | w2, 0x0fff}
	case PacketLength: // §4.2.2.10: SHOULD be 1 or 2 octets
		return spec{kindNumeric, wAny, 0xffff}
	case DSCP: // §4.2.2.11: MUST be 1 octet
		return spec{kindNumeric, w1, 63}
	case Fragment: // §4.2.2.12, RFC 8956 §3.6: MUST be 1 octet
		return spec{kindBitmask, w1, 0x0f}
	case FlowLabel: // RFC 8956 §3.7: SHOULD be 4 octets
		return spec{kindNumeric, wAny, 0xfffff}
	}
	return spec{}
}

// name returns the text keyword of a known component type ("" otherwise).
func (t ComponentType) name() string {
	switch t {
	case DestinationPrefix:
		return "destination"
	case SourcePrefix:
		return "source"
	case Protocol:
		return "protocol"
	case Port:
		return "port"
	case DestinationPort:
		return "destination-port"
	case SourcePort:
		return "source-port"
	case ICMPType:
		return "icmp-type"
	case ICMPCode:
		return "icmp-code"
	case TCPFlags:
		return "tcp-flags"
	case PacketLength:
		return "packet-length"
	case DSCP:
		return "dscp"
	case Fragment:
		return "fragment"
	case FlowLabel:
		return "label"
	}
	return ""
}

// canonLen returns the length bits of the canonical encoding of value v of
// component type t: 4 octets for the flow label (RFC 8956 §3.7), else the
// minimal length, which for every other type is the width RFC 8955 asks
// for (1 octet, or 1 or 2 for ports, packet length and TCP flags).
func canonLen(t ComponentType, v uint32) byte {
	if t == FlowLabel {
		return 0x20
	}
	return lenCode(v)
}

// fragmentBits returns the fragment bits defined for family f; the others
// are reserved: set to 0 on encoding, ignored on decoding (RFC 8955
// §4.2.2.12; RFC 8956 §3.6, where the DF position is reserved too).
func fragmentBits(f Family) uint32 {
	if f == IPv6 {
		return FragIsFragment | FragFirstFragment | FragLastFragment
	}
	return FragDontFragment | FragIsFragment | FragFirstFragment | FragLastFragment
}

// String returns the text keyword of the component type, e.g.
// "destination-port", or "type-N" for unknown types.
func (t ComponentType) String() string {
	if s := t.name(); s != "" {
		return s
	}
	return "type-" + itoa(uint64(t))
}

// Component is one encoded component of a Match: its type byte followed by
// the prefix or the operator/value list, in the canonical wire encoding
// (see DecodeMatch).
type Component struct {
	fam Family
	b   string
}

// Type returns the component type.
func (c Component) Type() ComponentType {
	if c.b == "" {
		return 0
	}
	return ComponentType(c.b[0])
}

// Bytes returns the wire encoding of the component (type byte included).
func (c Component) Bytes() []byte { return []byte(c.b) }

// Prefix returns the prefix of a destination or source component. For IPv6
// the bits before offset are zero (they are not carried on the wire) and
// only bits offset..p.Bits() are matched. ok is false for other components.
func (c Component) Prefix() (p netip.Prefix, offset int, ok bool) {
	if t := c.Type(); t != DestinationPrefix && t != SourcePrefix {
		return netip.Prefix{}, 0, false
	}
	p, offset = prefixOf(c.fam, c.b)
	return p, offset, true
}

// Item is one operator/value pair of a numeric or bitmask component. Op is
// the operator byte without the end-of-list and length bits; Value is the
// value (0 for the numeric true and false operators, whose value RFC 8955
// Table 1 says is ignored).
type Item struct {
	Op    byte
	Value uint32
}

// And reports whether the item is ANDed with the previous one.
func (it Item) And() bool { return it.Op&OpAnd != 0 }

// Items returns the operator/value pairs of a numeric or bitmask component
// (nil for prefixes).
func (c Component) Items() []Item {
	if specOf(c.Type()).kind == kindPrefix || c.b == "" {
		return nil
	}
	var out []Item
	for pos := 1; pos < len(c.b); {
		op, v, n := readItem(c.b, pos)
		out = append(out, Item{Op: op &^ (OpEnd | opLenMask), Value: v})
		pos += n
		if op&OpEnd != 0 {
			break
		}
	}
	return out
}

// Matches reports whether a packet whose field has value v matches the
// numeric or bitmask component c (RFC 8955 §4.2.1: items are ORs of AND
// groups, AND binding tighter). Prefix components report false: compare
// their Prefix instead.
func (c Component) Matches(v uint32) bool {
	switch specOf(c.Type()).kind {
	case kindNumeric:
		return evalNumeric(c.b, v)
	case kindBitmask:
		return evalBitmask(c.b, v)
	}
	return false
}

// readItem reads the item at b[pos] of a validated component and returns the
// operator byte, the value and the item's encoded length.
func readItem(b string, pos int) (op byte, v uint32, n int) {
	op = b[pos]
	l := 1 << ((op & opLenMask) >> 4)
	for i := 0; i < l; i++ {
		v = v<<8 | uint32(b[pos+1+i])
	}
	return op, v, 1 + l
}

// prefixOf decodes a validated prefix component c (type byte included).
func prefixOf(f Family, c string) (netip.Prefix, int) {
	bits := int(c[1])
	if f == IPv4 {
		var a [4]byte
		copy(a[:], c[2:])
		p, _ := netip.AddrFrom4(a).Prefix(bits) // clears padding bits
		return p, 0
	}
	off := int(c[2])
	var a [16]byte
	pat := c[3:]
	// Place pattern bits off..bits into a.
	for i := 0; i < bits-off; i++ {
		if pat[i/8]&(0x80>>(i%8)) != 0 {
			j := off + i
			a[j/8] |= 0x80 >> (j % 8)
		}
	}
	return netip.PrefixFrom(netip.AddrFrom16(a), bits), off
}

// componentLen returns the encoded length of the validated component that
// starts at b[pos].
func componentLen(f Family, b string, pos int) int {
	t := ComponentType(b[pos])
	if specOf(t).kind == kindPrefix {
		bits := int(b[pos+1])
		if f == IPv4 {
			return 2 + (bits+7)/8
		}
		return 3 + (bits-int(b[pos+2])+7)/8
	}
	n := 1
	for {
		op := b[pos+n]
		n += 1 + 1<<((op&opLenMask)>>4)
		if op&OpEnd != 0 {
			return n
		}
	}
}

func itoa(v uint64) string {
	var buf [20]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return string(buf[i:])
}
