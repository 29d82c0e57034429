package flowspec

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
)

// Routes. Besides FlowSpec rules, ribkeeper announces plain unicast routes,
// chiefly remotely triggered blackhole (RTBH) routes: a host prefix with
// the BLACKHOLE community (RFC 7999) and NO_EXPORT. A route is one more
// kind of rule so that it shares the store, the reconciler, TTLs and
// guardrails with FlowSpec rules:
//
//   - its Match has family IPv4Unicast or IPv6Unicast and holds the prefix
//     in unicast NLRI form (prefix length in bits, then the significant
//     bytes; RFC 4271 §4.3), which is its identity as for FlowSpec;
//   - its Action holds standard communities (RFC 1997) and, optionally,
//     a next hop. An Action without a next hop means "the site's
//     configured next hop": the speaker fills it in, so the same stored
//     rule is announced by each site with its own discard address.
//
// Route text is "route 203.0.113.7/32 then blackhole" (see SYNTAX.md).

const (
	// IPv4Unicast is AFI 1, SAFI 1: an IPv4 route (RTBH).
	IPv4Unicast Family = 3
	// IPv6Unicast is AFI 2, SAFI 1: an IPv6 route (RTBH).
	IPv6Unicast Family = 4
)

// Well-known standard communities.
const (
	CommunityBlackhole uint32 = 0xffff029a // 65535:666, RFC 7999
	CommunityNoExport  uint32 = 0xffffff01 // 65535:65281, RFC 1997
	CommunityNoAdvert  uint32 = 0xffffff02 // 65535:65282, RFC 1997
)

// IsRoute reports whether f is IPv4Unicast or IPv6Unicast.
func (f Family) IsRoute() bool { return f == IPv4Unicast || f == IPv6Unicast }

// IsFlowSpec reports whether f is IPv4 or IPv6 FlowSpec.
func (f Family) IsFlowSpec() bool { return f == IPv4 || f == IPv6 }

// Is6 reports whether f is an IPv6 family.
func (f Family) Is6() bool { return f == IPv6 || f == IPv6Unicast }

// RouteFamily returns the unicast family of addr (IPv4Unicast for IPv4
// and IPv4-mapped addresses), or 0 for an invalid addr.
func RouteFamily(addr netip.Addr) Family {
	switch {
	case !addr.IsValid():
		return 0
	case addr.Unmap().Is4():
		return IPv4Unicast
	}
	return IPv6Unicast
}

// RouteMatch returns the Match of the route to p. p must be a valid,
// unzoned prefix without host bits set (203.0.113.0/24, not
// 203.0.113.7/24): an error says so rather than guessing which was meant.
func RouteMatch(p netip.Prefix) (Match, error) {
	if !p.IsValid() {
		return Match{}, fmt.Errorf("flowspec: invalid prefix")
	}
	if p.Addr().Zone() != "" {
		return Match{}, fmt.Errorf("flowspec: prefix %s has a zone", p)
	}
	if p.Addr().Is4In6() {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		if !p.IsValid() {
			return Match{}, fmt.Errorf("flowspec: invalid IPv4-mapped prefix")
		}
	}
	if m := p.Masked(); m != p {
		return Match{}, fmt.Errorf("flowspec: prefix %s has host bits set: write %s, or /%d for the host", p, m, p.Addr().BitLen())
	}
	f := RouteFamily(p.Addr())
	return matchOf(f, appendRoutePrefix(nil, p)), nil
}

// appendRoutePrefix appends p in unicast NLRI form.
func appendRoutePrefix(b []byte, p netip.Prefix) []byte {
	b = append(b, byte(p.Bits()))
	a := p.Addr().AsSlice()
	return append(b, a[:(p.Bits()+7)/8]...)
}

// routePrefix decodes the prefix of a valid route Match.
func (m Match) routePrefix() netip.Prefix {
	var a [16]byte
	bits := int(m.nlri()[0])
	copy(a[:], m.nlri()[1:])
	if m.fam() == IPv4Unicast {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte(a[:4])), bits)
	}
	return netip.PrefixFrom(netip.AddrFrom16(a), bits)
}

// decodeRoute decodes one unicast NLRI of family f from b. Prefix bits
// beyond the length must be zero: a route is identified by its prefix.
func decodeRoute(f Family, b []byte) (Match, int, error) {
	if len(b) == 0 {
		return Match{}, 0, decodeErr(0, "prefix length missing")
	}
	bits, max := int(b[0]), 32
	if f == IPv6Unicast {
		max = 128
	}
	if bits > max {
		return Match{}, 0, decodeErr(0, "prefix length %d exceeds %d", bits, max)
	}
	n := (bits + 7) / 8
	if len(b) < 1+n {
		return Match{}, 0, decodeErr(len(b), "prefix truncated: %d bits need %d bytes, %d present", bits, n, len(b)-1)
	}
	if r := bits % 8; r != 0 && b[n]&(0xff>>r) != 0 {
		return Match{}, 0, decodeErr(n, "bits set after the /%d prefix", bits)
	}
	return matchOf(f, b[:1+n]), 1 + n, nil
}

// compareRoutes orders two routes of the same family by address, then
// the more specific first.
func compareRoutes(a, b Match) int {
	pa, pb := a.routePrefix(), b.routePrefix()
	return cmp.Or(pa.Addr().Compare(pb.Addr()), cmp.Compare(pb.Bits(), pa.Bits()))
}

// Blackhole is the RTBH action: BLACKHOLE (65535:666, RFC 7999) and
// NO_EXPORT (65535:65281), so the blackhole never leaks beyond the
// neighboring AS. The next hop is the site's (see WithNextHop).
func Blackhole() Action { return blackhole }

// blackhole is built once: a feed of RTBH routes parses it a million times.
var blackhole = Communities(CommunityBlackhole, CommunityNoExport)

// Communities is a route action carrying the given standard communities
// (RFC 1997, high 16 bits AS, low 16 bits value).
func Communities(cs ...uint32) Action {
	b := make([]byte, 0, 4*len(cs))
	for _, c := range cs {
		b = binary.BigEndian.AppendUint32(b, c)
	}
	return mkAction(actionData{comm: canonicalSet(b, 4)})
}

// NextHop is a route action that sets the next hop to addr. It returns the
// zero Action for an invalid or zoned addr.
func NextHop(addr netip.Addr) Action {
	if !addr.IsValid() || addr.Zone() != "" {
		return Action{}
	}
	return mkAction(actionData{nh: string(addr.Unmap().AsSlice())})
}

// IsRoute reports whether a is a route action (communities and/or a next
// hop, no FlowSpec extended communities).
func (a Action) IsRoute() bool {
	return (a.d().comm != "" || a.d().nh != "") && a.d().ext == "" && a.d().ext6 == ""
}

// AppendCommunities appends a's standard communities (4 bytes each,
// sorted) to b: the value of the COMMUNITIES attribute.
func (a Action) AppendCommunities(b []byte) []byte { return append(b, a.d().comm...) }

// HasCommunity reports whether a carries standard community c.
func (a Action) HasCommunity(c uint32) bool {
	for i := 0; i+4 <= len(a.d().comm); i += 4 {
		if binary.BigEndian.Uint32([]byte(a.d().comm[i:i+4])) == c {
			return true
		}
	}
	return false
}

// NextHop returns the next hop a sets, if it sets one.
func (a Action) NextHop() (netip.Addr, bool) {
	switch len(a.d().nh) {
	case 4:
		return netip.AddrFrom4([4]byte([]byte(a.d().nh))), true
	case 16:
		return netip.AddrFrom16([16]byte([]byte(a.d().nh))), true
	}
	return netip.Addr{}, false
}

// WithNextHop returns a with its next hop set to addr (or removed, for the
// zero addr).
func (a Action) WithNextHop(addr netip.Addr) Action {
	d := a.d()
	d.nh = ""
	if addr.IsValid() && addr.Zone() == "" {
		d.nh = string(addr.Unmap().AsSlice())
	}
	return mkAction(d)
}

// AppendBinary appends the stored form of a: for a FlowSpec action its
// extended communities (the EXTENDED COMMUNITIES value), followed, when it
// has IPv6-address-specific ones (redirect-ip to an IPv6 address), by those
// 20-byte communities, their count and the marker byte ext6Marker; for a
// route action one byte of next-hop length, the next hop, then the standard
// communities. DecodeStoredAction reads it back given the rule's family.
//
// The IPv6 trailer keeps rows written before it readable: a plain list is a
// multiple of 8 bytes long, and 8a+20b+2 never is.
func (a Action) AppendBinary(b []byte) ([]byte, error) {
	if a.d().comm == "" && a.d().nh == "" {
		b = append(b, a.d().ext...)
		if n := len(a.d().ext6) / 20; n > 0 {
			if n > 255 {
				return b, fmt.Errorf("flowspec: %d IPv6 extended communities; at most 255 can be stored", n)
			}
			b = append(b, a.d().ext6...)
			b = append(b, ext6Marker, byte(n))
		}
		return b, nil
	}
	b = append(b, byte(len(a.d().nh)))
	b = append(b, a.d().nh...)
	return append(b, a.d().comm...), nil
}

// ext6Marker ends a stored FlowSpec action that carries IPv6-address-specific
// extended communities (see AppendBinary).
const ext6Marker = 0xE6

// DecodeStoredAction reads what Action.AppendBinary wrote for a rule of
// family f.
func DecodeStoredAction(f Family, b []byte) (Action, error) {
	if !f.IsRoute() {
		if len(b)%8 == 0 {
			return DecodeAction(b)
		}
		if len(b) < 2 || b[len(b)-2] != ext6Marker {
			return Action{}, decodeErr(len(b)-1, "stored action: %d bytes is neither a list of extended communities nor one with IPv6 ones", len(b))
		}
		n := int(b[len(b)-1])
		end := len(b) - 2
		if n == 0 || end < 20*n || (end-20*n)%8 != 0 {
			return Action{}, decodeErr(end, "stored action: bad IPv6 extended community count %d", n)
		}
		return DecodeActionIPv6(b[:end-20*n], b[end-20*n:end])
	}
	if len(b) == 0 {
		return Action{}, decodeErr(0, "route action: empty")
	}
	n := int(b[0])
	if n != 0 && n != 4 && n != 16 || len(b) < 1+n {
		return Action{}, decodeErr(0, "route action: bad next hop length %d", n)
	}
	if (len(b)-1-n)%4 != 0 {
		return Action{}, decodeErr(1+n, "route action: communities of %d bytes are not a multiple of 4", len(b)-1-n)
	}
	a := mkAction(actionData{nh: string(b[1 : 1+n]), comm: canonicalSet(b[1+n:], 4)})
	if !a.IsValid() {
		return Action{}, decodeErr(0, "route action: no community and no next hop")
	}
	return a, nil
}

// DecodeRouteAction builds a route action from a COMMUNITIES attribute
// value (4 bytes each) and a next hop (the zero Addr for none).
func DecodeRouteAction(comms []byte, nh netip.Addr) (Action, error) {
	if len(comms)%4 != 0 {
		return Action{}, decodeErr(len(comms)-len(comms)%4, "communities: %d bytes is not a multiple of 4", len(comms))
	}
	a := mkAction(actionData{comm: canonicalSet(comms, 4)}).WithNextHop(nh)
	if !a.IsValid() {
		return Action{}, decodeErr(0, "route has no community and no next hop")
	}
	return a, nil
}

// appendRouteActionText writes the canonical text of a route action:
// "blackhole" when both BLACKHOLE and NO_EXPORT are present, the other
// communities as "community AS:N", then "next-hop ADDR".
func (a Action) appendRouteText(b []byte, first bool) []byte {
	sep := func() {
		if !first {
			b = append(b, ' ')
		}
		first = false
	}
	bh := a.HasCommunity(CommunityBlackhole) && a.HasCommunity(CommunityNoExport)
	if bh {
		sep()
		b = append(b, "blackhole"...)
	}
	for i := 0; i+4 <= len(a.d().comm); i += 4 {
		c := binary.BigEndian.Uint32([]byte(a.d().comm[i : i+4]))
		if bh && (c == CommunityBlackhole || c == CommunityNoExport) {
			continue
		}
		sep()
		b = append(b, "community "...)
		b = appendCommunity(b, c)
	}
	if nh, ok := a.NextHop(); ok {
		sep()
		b = append(b, "next-hop "...)
		b = nh.AppendTo(b)
	}
	return b
}

func appendCommunity(b []byte, c uint32) []byte {
	return fmt.Appendf(b, "%d:%d", c>>16, c&0xffff)
}

// CommunityString returns c as "AS:N".
func CommunityString(c uint32) string { return string(appendCommunity(nil, c)) }

// ParseCommunity reads "AS:N" (each 0..65535) or a well-known name:
// blackhole, no-export, no-advertise.
func ParseCommunity(s string) (uint32, error) {
	switch strings.ToLower(s) {
	case "blackhole":
		return CommunityBlackhole, nil
	case "no-export":
		return CommunityNoExport, nil
	case "no-advertise":
		return CommunityNoAdvert, nil
	}
	l, r, ok := strings.Cut(s, ":")
	var hi, lo uint32
	if ok {
		if _, err := fmt.Sscanf(l+" "+r, "%d %d", &hi, &lo); err != nil || hi > 0xffff || lo > 0xffff ||
			fmt.Sprint(hi) != l || fmt.Sprint(lo) != r {
			ok = false
		}
	}
	if !ok {
		return 0, fmt.Errorf("community %q is not AS:N (each 0..65535) or blackhole, no-export, no-advertise", s)
	}
	return hi<<16 | lo, nil
}
