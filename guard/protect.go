package guard

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"

	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Ephemeral ports: the port the side that opens a BGP session sends
// from. Any port from 1024 up is an ephemeral port of some router's TCP
// stack (Linux uses 32768-60999, BSDs 49152-65535, some routers 1024
// up); ports below 1024 are never chosen.
const (
	ephemeralLo = 1024
	ephemeralHi = 65535
)

// tcp is the IP protocol number (IPv6 next header) of TCP.
const tcp = 6

// filtersNothing reports whether a FlowSpec action changes no traffic:
// it holds only traffic-action communities (accept, sample, terminal).
// Any other action — a rate, a redirect, a DSCP mark, an unknown
// community — may affect the traffic it matches.
func filtersNothing(a flowspec.Action) bool {
	var buf [64]byte // an action's communities fit: no allocation per rule
	if len(a.AppendIPv6ExtCommunities(buf[:0])) > 0 {
		return false
	}
	ext := a.AppendExtCommunities(buf[:0])
	if len(ext) == 0 {
		return false
	}
	for i := 0; i+8 <= len(ext); i += 8 {
		if binary.BigEndian.Uint16(ext[i:]) != flowspec.ExtTrafficAction {
			return false
		}
	}
	return true
}

// endpoint is one protected address (a host prefix) or dynamic neighbor
// prefix, and what it is, for messages (what).
type endpoint struct {
	p    netip.Prefix
	own  bool // the appliance's, else a router's
	kind endpointKind
}

type endpointKind uint8

const (
	ownAddress endpointKind = iota
	neighborAddress
	neighborPrefix
)

// what names ep in a message. Built only for a violation: every active
// rule is checked at start, nearly all of which pass.
func (ep endpoint) what() string {
	switch ep.kind {
	case ownAddress:
		return "the appliance's own address " + ep.p.Addr().String()
	case neighborAddress:
		return "neighbor " + ep.p.Addr().String()
	default:
		return "the dynamic neighbors' prefix " + ep.p.String()
	}
}

// endpoints appends p's addresses and prefixes of one address family to
// out.
func endpoints(out []endpoint, p *config.Protected, is6 bool) []endpoint {
	for _, a := range p.Own {
		if a.Is6() == is6 {
			out = append(out, endpoint{netip.PrefixFrom(a, a.BitLen()), true, ownAddress})
		}
	}
	for _, a := range p.Neighbors {
		if a.Is6() == is6 {
			out = append(out, endpoint{netip.PrefixFrom(a, a.BitLen()), false, neighborAddress})
		}
	}
	for _, q := range p.NeighborPrefixes {
		if q.Addr().Is6() == is6 {
			out = append(out, endpoint{q, false, neighborPrefix})
		}
	}
	return out
}

// checkProtected refuses a rule whose destination covers a protected
// address (protected_address), and a FlowSpec rule that would match a
// packet of a BGP session between the appliance and a router
// (bgp_session). Neither can be opened: a rule that cut those sessions
// would cut every rule with them, including the one that undoes it.
func checkProtected(p *config.Protected, r flowspec.Rule) *Violation {
	m := r.Match
	var buf [8]endpoint // a few addresses: no allocation per rule
	eps := endpoints(buf[:0], p, m.Family().Is6())
	if len(eps) == 0 {
		return nil
	}
	dst := destinationOf(m)
	for _, ep := range eps {
		if dst.hits(ep.p) {
			return &Violation{Guardrail: ProtectedAddress, Rule: r.String(), Field: "text",
				Msg: fmt.Sprintf("its destination covers %s, which no rule may filter, redirect or blackhole: the BGP sessions that carry every rule run between the appliance and its routers; narrow the destination to leave it out (this guardrail has no setting)", ep.what())}
		}
	}
	if m.Family().IsRoute() {
		return nil
	}
	if w, ok := bgpWitness(p, m, eps); ok {
		return &Violation{Guardrail: BGPSession, Rule: r.String(), Field: "text",
			Msg: fmt.Sprintf("it would match the BGP session between ribkeeper and its routers (%s), which no rule may touch; give a destination outside the appliance's and its routers' addresses, or a protocol or ports that leave out TCP port %s (this guardrail has no setting)", w, portList(p.Ports))}
	}
	return nil
}

// prefixMatch is a prefix a rule matches, with the offset of an IPv6
// FlowSpec prefix (bits before it match anything); any matches every
// address.
type prefixMatch struct {
	p   netip.Prefix
	off int
	any bool
}

func destinationOf(m flowspec.Match) prefixMatch {
	if m.Family().IsRoute() {
		d, _ := m.Destination()
		return prefixMatch{p: d}
	}
	return componentPrefix(m, flowspec.DestinationPrefix)
}

func componentPrefix(m flowspec.Match, t flowspec.ComponentType) prefixMatch {
	c, ok := m.Component(t)
	if !ok {
		return prefixMatch{any: true}
	}
	p, off, _ := c.Prefix()
	return prefixMatch{p: p, off: off}
}

// hits reports whether pm matches an address of q. A prefix absent from
// the rule (any) is not a hit: it names no address.
func (pm prefixMatch) hits(q netip.Prefix) bool {
	return !pm.any && pm.overlaps(q)
}

// overlaps reports whether pm and q share an address: their bits agree
// from pm's offset to the shorter of the two lengths.
func (pm prefixMatch) overlaps(q netip.Prefix) bool {
	if pm.any {
		return true
	}
	if pm.p.Addr().Is6() != q.Addr().Is6() {
		return false
	}
	if pm.off == 0 {
		return pm.p.Overlaps(q)
	}
	a, b := pm.p.Addr().As16(), q.Addr().As16()
	for i := pm.off; i < min(pm.p.Bits(), q.Bits()); i++ {
		if a[i/8]&(0x80>>(i%8)) != b[i/8]&(0x80>>(i%8)) {
			return false
		}
	}
	return true
}

// bgpWitness looks for a packet of a BGP session that FlowSpec match m
// matches, and describes it. A session's packets are TCP between an
// address of the appliance and a router's, one port a BGP port
// (p.Ports) and the other 179 or an ephemeral port. The search is exact
// for the prefixes, protocol and ports; ICMP type or code match no TCP
// packet; every other component (TCP flags, packet length, DSCP,
// fragment, flow label) is taken to match a session's packet if it
// matches any value at all, since sessions carry many.
func bgpWitness(p *config.Protected, m flowspec.Match, eps []endpoint) (string, bool) {
	dst, src := destinationOf(m), componentPrefix(m, flowspec.SourcePrefix)
	var from, to *endpoint
	for i := range eps {
		for j := range eps {
			if eps[i].own != eps[j].own && src.overlaps(eps[i].p) && dst.overlaps(eps[j].p) {
				from, to = &eps[i], &eps[j]
				break
			}
		}
		if from != nil {
			break
		}
	}
	if from == nil {
		return "", false
	}
	var ports [3]*flowspec.Component
	for c := range m.All() {
		switch t := c.Type(); t {
		case flowspec.DestinationPrefix, flowspec.SourcePrefix:
		case flowspec.Protocol:
			if !c.Matches(tcp) {
				return "", false
			}
		case flowspec.Port, flowspec.DestinationPort, flowspec.SourcePort:
			ports[t-flowspec.Port] = &c
		case flowspec.ICMPType, flowspec.ICMPCode:
			return "", false
		default:
			if !satisfiable(c) {
				return "", false
			}
		}
	}
	sport, dport, ok := portWitness(p.Ports, ports[0], ports[1], ports[2])
	if !ok {
		return "", false
	}
	return fmt.Sprintf("TCP from %s port %d to %s port %d", addrOf(*from), sport, addrOf(*to), dport), true
}

func addrOf(ep endpoint) string {
	if ep.p.IsSingleIP() {
		return ep.p.Addr().String()
	}
	return ep.p.String()
}

// portWitness finds source and destination ports of a BGP packet that
// the port, destination-port and source-port components (nil: absent)
// match: one of them a BGP port, the other any port from ephemeralLo up.
// Each component's truth is constant between the values
// its items name, so trying every such value and its neighbours, and the
// ends of the range, tries every case.
func portWitness(bgp []uint16, port, dport, sport *flowspec.Component) (uint16, uint16, bool) {
	ok := func(c *flowspec.Component, v uint32) bool { return c == nil || c.Matches(v) }
	match := func(s, d uint32) bool {
		return (port == nil || port.Matches(s) || port.Matches(d)) && ok(dport, d) && ok(sport, s)
	}
	cands := []uint32{ephemeralLo, ephemeralHi}
	for _, c := range []*flowspec.Component{port, dport, sport} {
		if c == nil {
			continue
		}
		for _, it := range c.Items() {
			for _, v := range []uint32{it.Value - 1, it.Value, it.Value + 1} {
				if v >= ephemeralLo && v <= ephemeralHi {
					cands = append(cands, v)
				}
			}
		}
	}
	for _, b := range bgp {
		for _, e := range cands {
			switch {
			case match(uint32(b), e):
				return b, uint16(e), true
			case match(e, uint32(b)):
				return uint16(e), b, true
			}
		}
	}
	return 0, 0, false
}

// satisfiable reports whether numeric or bitmask component c matches
// any value of its field.
func satisfiable(c flowspec.Component) bool {
	var hi uint32
	switch c.Type() {
	case flowspec.TCPFlags, flowspec.Fragment:
		// Bitmasks: few enough values to try each.
		hi = 0xfff
		if c.Type() == flowspec.Fragment {
			hi = 0xf
		}
		for v := uint32(0); v <= hi; v++ {
			if c.Matches(v) {
				return true
			}
		}
		return false
	case flowspec.DSCP:
		hi = 63
	case flowspec.FlowLabel:
		hi = 0xfffff
	default:
		hi = 0xffff
	}
	if c.Matches(0) || c.Matches(hi) {
		return true
	}
	for _, it := range c.Items() {
		for _, v := range []uint32{it.Value - 1, it.Value, it.Value + 1} {
			if v <= hi && c.Matches(v) {
				return true
			}
		}
	}
	return false
}

func portList(ports []uint16) string {
	ps := slices.Clone(ports)
	if len(ps) == 0 {
		ps = []uint16{179}
	}
	s := ""
	for i, p := range ps {
		switch {
		case i == 0:
		case i == len(ps)-1:
			s += " or "
		default:
			s += ", "
		}
		s += fmt.Sprint(p)
	}
	return s
}
