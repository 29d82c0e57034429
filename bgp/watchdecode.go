package bgp

// Fast decoding of the paths the RIB watch delivers.
//
// GoBGP v3.37.0 hands the watch callback every path in protobuf form only:
// the NLRI is an Any holding apipb.FlowSpecNLRI (or apipb.IPAddressPrefix
// for a route), the attributes are Anys. The generic way back to wire bytes,
// apiutil.GetNativeNlri / apiutil.UnmarshalAttribute (reflection-based
// anypb.UnmarshalNew into generated structs, then GoBGP's native types,
// then their Serialize), cost about 10% of all CPU of syncing 100,000 rules,
// plus dozens of allocations per path (BenchmarkWatchDecode: see the commit
// that added this file for the numbers).
//
// The functions here read the Any values directly with protowire and write
// the same bytes GoBGP's native types would serialize, replicating their
// quirks: item operators get their length bits from the value when they
// have none, the end-of-list bit is set on the last item only, values are
// truncated to their length, prefix bits past the length are cleared,
// unknown and opaque communities are padded or cut to 7 bytes.
//
// They are deliberately narrow: anything they do not recognise (a type URL
// other than "type.googleapis.com/apipb.<known message>", an unknown field
// or wire type, MAC components, components out of type order, an NLRI of
// 240 bytes or more, an address GoBGP would read differently, malformed
// bytes) makes them report !ok, and the caller takes the slow path above,
// so results never differ from it (TestWatchDecodeMatchesSlow,
// FuzzWatchDecode).

import (
	"encoding/binary"
	"net/netip"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

const apipbURL = "type.googleapis.com/apipb."

// pbField is one field of a protobuf message: u holds a varint or fixed
// value, b the contents of a length-delimited one.
type pbField struct {
	num protowire.Number
	typ protowire.Type
	u   uint64
	b   []byte
}

func (f pbField) is(num protowire.Number, typ protowire.Type) bool {
	return f.num == num && f.typ == typ
}

// nextField reads the first field of the message bytes b. ok is false for
// malformed bytes and for groups.
func nextField(b []byte) (f pbField, rest []byte, ok bool) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return f, nil, false
	}
	b = b[n:]
	f.num, f.typ = num, typ
	switch typ {
	case protowire.VarintType:
		f.u, n = protowire.ConsumeVarint(b)
	case protowire.Fixed32Type:
		var v uint32
		v, n = protowire.ConsumeFixed32(b)
		f.u = uint64(v)
	case protowire.Fixed64Type:
		f.u, n = protowire.ConsumeFixed64(b)
	case protowire.BytesType:
		f.b, n = protowire.ConsumeBytes(b)
	default:
		return f, nil, false
	}
	if n < 0 {
		return f, nil, false
	}
	return f, b[n:], true
}

// splitAny reads a google.protobuf.Any message: type_url = 1, value = 2.
func splitAny(b []byte) (url, val []byte, ok bool) {
	for len(b) > 0 {
		var f pbField
		if f, b, ok = nextField(b); !ok {
			return nil, nil, false
		}
		switch {
		case f.is(1, protowire.BytesType):
			url = f.b
		case f.is(2, protowire.BytesType):
			val = f.b
		default:
			return nil, nil, false
		}
	}
	return url, val, true
}

// parseIP reads an address as net.ParseIP does (no zones).
func parseIP(b []byte) (netip.Addr, bool) {
	a, err := netip.ParseAddr(string(b))
	return a, err == nil && a.Zone() == ""
}

// appendPrefixBits appends the first bits of addr, bits past them cleared.
func appendPrefixBits(b, addr []byte, bits int) []byte {
	n := (bits + 7) / 8
	b = append(b, addr[:n]...)
	if r := bits % 8; r != 0 {
		b[len(b)-1] &= byte(0xff << (8 - r))
	}
	return b
}

// appendWatchNLRI appends the NLRI wire bytes (length prefix included) of
// the watch's protobuf NLRI an in family fam, as GoBGP's GetNativeNlri and
// Serialize would produce them. ok false: take the slow path.
func appendWatchNLRI(b []byte, fam flowspec.Family, an *anypb.Any) (_ []byte, ok bool) {
	url, val := an.GetTypeUrl(), an.GetValue()
	if fam.IsRoute() {
		if url != apipbURL+"IPAddressPrefix" {
			return b, false
		}
		return appendRoutePrefix(b, fam, val)
	}
	if url != apipbURL+"FlowSpecNLRI" {
		return b, false
	}
	start := len(b)
	b = append(b, 0) // length, set below
	last := -1
	for len(val) > 0 {
		var f pbField
		if f, val, ok = nextField(val); !ok || !f.is(1, protowire.BytesType) {
			return b, false
		}
		url, v, ok := splitAny(f.b)
		if !ok {
			return b, false
		}
		typ := -1
		switch string(url) {
		case apipbURL + "FlowSpecIPPrefix":
			b, typ = appendPrefixComponent(b, fam, v)
		case apipbURL + "FlowSpecComponent":
			b, typ = appendComponent(b, v)
		}
		// GoBGP sorts the components by type (stably); ours must be in
		// order already.
		if typ < 0 || typ < last {
			return b, false
		}
		last = typ
	}
	n := len(b) - start - 1
	if n >= 0xf0 {
		return b, false // GoBGP's 2-byte length form is broken (osrg/gobgp#3596)
	}
	b[start] = byte(n)
	return b, true
}

// appendRoutePrefix: IPAddressPrefix{prefix_len = 1, prefix = 2}.
func appendRoutePrefix(b []byte, fam flowspec.Family, v []byte) ([]byte, bool) {
	var bits uint64
	var prefix []byte
	for len(v) > 0 {
		f, rest, ok := nextField(v)
		switch {
		case !ok:
			return b, false
		case f.is(1, protowire.VarintType):
			bits = uint64(uint32(f.u))
		case f.is(2, protowire.BytesType):
			prefix = f.b
		default:
			return b, false
		}
		v = rest
	}
	a, ok := parseIP(prefix)
	if !ok {
		return b, false
	}
	if fam == flowspec.IPv4Unicast {
		// net.ParseIP(prefix).To4(): IPv4 or IPv4-mapped.
		if !a.Unmap().Is4() || bits > 32 {
			return b, false
		}
		a4 := a.Unmap().As4()
		return appendPrefixBits(append(b, byte(bits)), a4[:], int(bits)), true
	}
	if bits > 128 {
		return b, false
	}
	a16 := a.As16()
	return appendPrefixBits(append(b, byte(bits)), a16[:], int(bits)), true
}

// appendPrefixComponent: FlowSpecIPPrefix{type = 1, prefix_len = 2,
// prefix = 3, offset = 4}. It returns the component type, -1 for !ok.
func appendPrefixComponent(b []byte, fam flowspec.Family, v []byte) ([]byte, int) {
	var typ, bits, offset uint64
	var prefix []byte
	for len(v) > 0 {
		f, rest, ok := nextField(v)
		switch {
		case !ok:
			return b, -1
		case f.is(1, protowire.VarintType):
			typ = uint64(uint32(f.u))
		case f.is(2, protowire.VarintType):
			bits = uint64(uint32(f.u))
		case f.is(3, protowire.BytesType):
			prefix = f.b
		case f.is(4, protowire.VarintType):
			offset = uint64(uint32(f.u))
		default:
			return b, -1
		}
		v = rest
	}
	a, ok := parseIP(prefix)
	if !ok || (typ != 1 && typ != 2) {
		return b, -1
	}
	// GoBGP picks the IPv4 or IPv6 layout from the address text
	// (net.ParseIP(prefix).To4() != nil), not from the family.
	is4 := a.Unmap().Is4()
	if fam == flowspec.IPv4 {
		if !is4 || bits > 32 {
			return b, -1
		}
		a4 := a.Unmap().As4()
		return appendPrefixBits(append(b, byte(typ), byte(bits)), a4[:], int(bits)), int(typ)
	}
	if is4 || bits > 128 || offset > 0xff {
		return b, -1
	}
	a16 := a.As16()
	return appendPrefixBits(append(b, byte(typ), byte(bits), byte(offset)), a16[:], int(bits)), int(typ)
}

// appendComponent: FlowSpecComponent{type = 1, repeated
// FlowSpecComponentItem{op = 1, value = 2} items = 2}, serialized as
// bgp.NewFlowSpecComponent(NewFlowSpecComponentItem(...)...) does. It
// returns the component type, -1 for !ok.
func appendComponent(b []byte, v []byte) ([]byte, int) {
	start := len(b)
	b = append(b, 0) // type, set below
	var typ uint64
	lastOp := -1
	for len(v) > 0 {
		f, rest, ok := nextField(v)
		switch {
		case !ok:
			return b, -1
		case f.is(1, protowire.VarintType):
			typ = uint64(uint32(f.u))
		case f.is(2, protowire.BytesType):
			lastOp = len(b)
			if b, ok = appendItem(b, f.b); !ok {
				return b, -1
			}
		default:
			return b, -1
		}
		v = rest
	}
	if typ > 0xff {
		return b, -1
	}
	b[start] = byte(typ)
	if lastOp >= 0 {
		b[lastOp] |= flowspec.OpEnd
	}
	return b, int(typ)
}

// appendItem writes one operator/value pair (end-of-list bit clear).
func appendItem(b []byte, v []byte) ([]byte, bool) {
	var op uint8
	var val uint64
	for len(v) > 0 {
		f, rest, ok := nextField(v)
		switch {
		case !ok:
			return b, false
		case f.is(1, protowire.VarintType):
			op = uint8(f.u)
		case f.is(2, protowire.VarintType):
			val = f.u
		default:
			return b, false
		}
		v = rest
	}
	// Length bits: kept if set, else the smallest length holding val.
	order := op >> 4 & 3
	if order == 0 {
		switch {
		case val < 1<<8:
		case val < 1<<16:
			order = 1
		case val < 1<<32:
			order = 2
		default:
			order = 3
		}
	}
	b = append(b, (op|order<<4)&^flowspec.OpEnd)
	switch order {
	case 0:
		return append(b, byte(val)), true
	case 1:
		return binary.BigEndian.AppendUint16(b, uint16(val)), true
	case 2:
		return binary.BigEndian.AppendUint32(b, uint32(val)), true
	}
	return binary.BigEndian.AppendUint64(b, val), true
}

// appendWatchExtCommunities appends to ext and ext6 the 8-byte and 20-byte
// extended communities of the watch's protobuf attributes, as
// slowExtCommunities would. ok false: take the slow path.
func appendWatchExtCommunities(ext, ext6 []byte, pattrs []*anypb.Any) (_, _ []byte, ok bool) {
	const v4, v6 = "ExtendedCommunitiesAttribute", "IP6ExtendedCommunitiesAttribute"
	for _, an := range pattrs {
		url := an.GetTypeUrl()
		if url != apipbURL+v4 && url != apipbURL+v6 {
			if anyIs(url, "apipb."+v4) || anyIs(url, "apipb."+v6) {
				return ext, ext6, false // an unusual spelling of the URL
			}
			continue
		}
		val := an.GetValue()
		for len(val) > 0 {
			var f pbField
			if f, val, ok = nextField(val); !ok || !f.is(1, protowire.BytesType) {
				return ext, ext6, false
			}
			curl, cv, ok := splitAny(f.b)
			if !ok {
				return ext, ext6, false
			}
			if url == apipbURL+v4 {
				ext, ok = appendExtCommunity(ext, curl, cv)
			} else {
				ext6, ok = appendIP6ExtCommunity(ext6, curl, cv)
			}
			if !ok {
				return ext, ext6, false
			}
		}
	}
	return ext, ext6, true
}

// anyIs is anypb.Any.MessageIs for the full message name name.
func anyIs(url, name string) bool {
	return len(url) >= len(name) && url[len(url)-len(name):] == name &&
		(len(url) == len(name) || url[len(url)-len(name)-1] == '/')
}

// community holds the fields of the extended community messages: most
// have is_transitive = 1, sub_type = 2, address = 3, local_admin = 4 or a
// subset; the rest use fields 1 and 2 (and Opaque 3) as noted below.
type community struct {
	f     [5]uint64 // varint and fixed32 fields by number
	bytes [5][]byte // length-delimited fields by number
}

// readCommunity reads a community message whose varint fields are in
// varints, fixed32 ones in fixed, bytes ones in bytes (bit i: field i).
func readCommunity(v []byte, varints, fixed, bytes uint8) (c community, ok bool) {
	for len(v) > 0 {
		var f pbField
		if f, v, ok = nextField(v); !ok || f.num < 1 || f.num > 4 {
			return c, false
		}
		bit := uint8(1) << f.num
		switch {
		case f.typ == protowire.VarintType && varints&bit != 0,
			f.typ == protowire.Fixed32Type && fixed&bit != 0:
			c.f[f.num] = f.u
		case f.typ == protowire.BytesType && bytes&bit != 0:
			c.bytes[f.num] = f.b
		default:
			return c, false
		}
	}
	return c, true
}

const (
	fld1 uint8 = 1 << (iota + 1)
	fld2
	fld3
	fld4
)

func transitive(c community, t, nt byte) byte {
	if c.f[1] != 0 {
		return t
	}
	return nt
}

// appendExtCommunity appends one 8-byte community of
// ExtendedCommunitiesAttribute as unmarshalExComm + Serialize do.
func appendExtCommunity(b, url, v []byte) ([]byte, bool) {
	be := binary.BigEndian
	switch string(url) {
	case apipbURL + "TwoOctetAsSpecificExtended": // is_transitive, sub_type, asn, local_admin
		c, ok := readCommunity(v, fld1|fld2|fld3|fld4, 0, 0)
		if !ok {
			return b, false
		}
		b = append(b, transitive(c, 0x00, 0x40), byte(c.f[2]))
		return be.AppendUint32(be.AppendUint16(b, uint16(c.f[3])), uint32(c.f[4])), true
	case apipbURL + "IPv4AddressSpecificExtended": // is_transitive, sub_type, address, local_admin
		c, ok := readCommunity(v, fld1|fld2|fld4, 0, fld3)
		a, ok4 := parseIP(c.bytes[3])
		if !ok || !ok4 || !a.Unmap().Is4() {
			return b, false
		}
		a4 := a.Unmap().As4()
		b = append(append(b, transitive(c, 0x01, 0x41), byte(c.f[2])), a4[:]...)
		return be.AppendUint16(b, uint16(c.f[4])), true
	case apipbURL + "FourOctetAsSpecificExtended": // is_transitive, sub_type, asn, local_admin
		c, ok := readCommunity(v, fld1|fld2|fld3|fld4, 0, 0)
		if !ok {
			return b, false
		}
		b = append(b, transitive(c, 0x02, 0x42), byte(c.f[2]))
		return be.AppendUint16(be.AppendUint32(b, uint32(c.f[3])), uint16(c.f[4])), true
	case apipbURL + "OpaqueExtended": // is_transitive = 1, value = 3
		c, ok := readCommunity(v, fld1, 0, fld3)
		if !ok {
			return b, false
		}
		return append7(append(b, transitive(c, 0x03, 0x43)), c.bytes[3]), true
	case apipbURL + "ValidationExtended": // state = 1; GoBGP's reading of 0x4300 (opaque, subtype 0)
		c, ok := readCommunity(v, fld1, 0, 0)
		if !ok {
			return b, false
		}
		return append(b, 0x43, 0x00, 0, 0, 0, 0, 0, byte(c.f[1])), true
	case apipbURL + "TrafficRateExtended": // asn = 1, rate = 2 (float)
		c, ok := readCommunity(v, fld1, fld2, 0)
		if !ok {
			return b, false
		}
		b = be.AppendUint16(append(b, 0x80, 0x06), uint16(c.f[1]))
		return be.AppendUint32(b, uint32(c.f[2])), true
	case apipbURL + "TrafficActionExtended": // terminal = 1, sample = 2
		c, ok := readCommunity(v, fld1|fld2, 0, 0)
		if !ok {
			return b, false
		}
		var flags byte
		if c.f[1] != 0 {
			flags |= flowspec.ActionTerminal
		}
		if c.f[2] != 0 {
			flags |= flowspec.ActionSample
		}
		return append(b, 0x80, 0x07, 0, 0, 0, 0, 0, flags), true
	case apipbURL + "RedirectTwoOctetAsSpecificExtended": // asn = 1, local_admin = 2
		c, ok := readCommunity(v, fld1|fld2, 0, 0)
		if !ok {
			return b, false
		}
		return be.AppendUint32(be.AppendUint16(append(b, 0x80, 0x08), uint16(c.f[1])), uint32(c.f[2])), true
	case apipbURL + "RedirectIPv4AddressSpecificExtended": // address = 1, local_admin = 2
		c, ok := readCommunity(v, fld2, 0, fld1)
		a, ok4 := parseIP(c.bytes[1])
		if !ok || !ok4 || !a.Unmap().Is4() {
			return b, false
		}
		a4 := a.Unmap().As4()
		return be.AppendUint16(append(append(b, 0x81, 0x08), a4[:]...), uint16(c.f[2])), true
	case apipbURL + "RedirectFourOctetAsSpecificExtended": // asn = 1, local_admin = 2
		c, ok := readCommunity(v, fld1|fld2, 0, 0)
		if !ok {
			return b, false
		}
		return be.AppendUint16(be.AppendUint32(append(b, 0x82, 0x08), uint32(c.f[1])), uint16(c.f[2])), true
	case apipbURL + "TrafficRemarkExtended": // dscp = 1
		c, ok := readCommunity(v, fld1, 0, 0)
		if !ok {
			return b, false
		}
		return append(b, 0x80, 0x09, 0, 0, 0, 0, 0, byte(c.f[1])), true
	case apipbURL + "UnknownExtended": // type = 1, value = 2
		c, ok := readCommunity(v, fld1, 0, fld2)
		if !ok {
			return b, false
		}
		return append7(append(b, byte(c.f[1])), c.bytes[2]), true
	}
	return b, false
}

// append7 appends v cut or zero-padded to 7 bytes.
func append7(b, v []byte) []byte {
	var p [7]byte
	copy(p[:], v)
	return append(b, p[:]...)
}

// appendIP6ExtCommunity appends one 20-byte community of
// IP6ExtendedCommunitiesAttribute.
func appendIP6ExtCommunity(b, url, v []byte) ([]byte, bool) {
	var c community
	var ok bool
	var head [2]byte
	var addr []byte
	var la uint64
	switch string(url) {
	case apipbURL + "IPv6AddressSpecificExtended": // is_transitive, sub_type, address, local_admin
		c, ok = readCommunity(v, fld1|fld2|fld4, 0, fld3)
		head = [2]byte{transitive(c, 0x00, 0x40), byte(c.f[2])}
		addr, la = c.bytes[3], c.f[4]
	case apipbURL + "RedirectIPv6AddressSpecificExtended": // address = 1, local_admin = 2
		c, ok = readCommunity(v, fld2, 0, fld1)
		head = [2]byte{0x80, 0x0b}
		addr, la = c.bytes[1], c.f[2]
	}
	a, okA := parseIP(addr)
	if !ok || !okA {
		return b, false
	}
	// net.ParseIP(address).To16(): IPv4 addresses become IPv4-mapped.
	a16 := a.As16()
	b = append(append(b, head[:]...), a16[:]...)
	return binary.BigEndian.AppendUint16(b, uint16(la)), true
}
