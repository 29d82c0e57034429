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

// Numeric operator bits (RFC 8955 §4.2.1.1). lt|gt|eq = 0 is "true",
// all three set is "false", lt|gt is "!=".
const (
	OpLT byte = 0x04
	OpGT byte = 0x02
	OpEQ byte = 0x01

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

// spec describes how a component type is encoded.
type spec struct {
	name       string
	kind       kind
	maxLenCode uint8  // largest allowed length code (0: 1 byte, 1: 2, 2: 4)
	maxVal     uint32 // largest meaningful value
}

func specOf(t ComponentType) spec {
	switch t {
	case DestinationPrefix:
		return spec{"destination", kindPrefix, 0, 0}
	case SourcePrefix:
		return spec{"source", kindPrefix, 0, 0}
	case Protocol:
		return spec{"protocol", kindNumeric, 0, 0xff}
	case Port:
		return spec{"port", kindNumeric, 1, 0xffff}
	case DestinationPort:
		return spec{"destination-port", kindNumeric, 1, 0xffff}
	case SourcePort:
		return spec{"source-port", kindNumeric, 1, 0xffff}
	case ICMPType:
		return spec{"icmp-type", kindNumeric, 0, 0xff}
	case ICMPCode:
		return spec{"icmp-code", kindNumeric, 0, 0xff}
	case TCPFlags:
		return spec{"tcp-flags", kindBitmask, 1, 0xffff}
	case PacketLength:
		return spec{"packet-length", kindNumeric, 1, 0xffff}
	case DSCP:
		return spec{"dscp", kindNumeric, 0, 63}
	case Fragment:
		return spec{"fragment", kindBitmask, 0, 0x0f}
	case FlowLabel:
		return spec{"label", kindNumeric, 2, 0xfffff}
	}
	return spec{}
}

// String returns the text keyword of the component type, e.g.
// "destination-port", or "type-N" for unknown types.
func (t ComponentType) String() string {
	if s := specOf(t); s.name != "" {
		return s.name
	}
	return "type-" + itoa(uint64(t))
}

// Component is one encoded component of a Match: its type byte followed by
// the prefix or the operator/value list, exactly as on the wire.
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
// value at whatever length it had on the wire.
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
