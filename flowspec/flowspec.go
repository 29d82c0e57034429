// Package flowspec is ribkeeper's model of BGP FlowSpec rules (RFC 8955 for
// IPv4, RFC 8956 for IPv6): value types, the wire codec, the operator text
// syntax (SYNTAX.md), and rule precedence.
//
// The package is the inner core of ribkeeper and imports only the standard
// library. Its types follow net/netip: they are small comparable values that
// can be used as map keys, their zero value is invalid, and once a value has
// been constructed (by Parse*, Decode* or the Action constructors) encoding
// it cannot fail. Encoding (Match.AppendTo, Action.AppendExtCommunities)
// and map-key use allocate nothing; DecodeMatch allocates once
// (twice for input it has to normalise).
//
// A rule's identity is its Match: the address family plus the NLRI bytes in
// canonical encoding. Every Match is canonical: components in type order,
// operator bytes without reserved bits and without AND on a first item,
// values at their canonical width (minimal, the flow label 4 octets as RFC
// 8956 §3.7 recommends), true/false items with value 0, prefix padding
// bits zero. Parse builds that form; DecodeMatch refuses what the RFCs call
// malformed (RFC 7606 treat-as-withdraw cases are *DecodeError naming the
// byte) and normalises what they tell a decoder to ignore or only
// recommend, so two encodings of one rule are one Match, one map key and
// one rule on the wire.
//
// Numeric operators follow RFC 8955 §4.2.1.1 Table 1: lt|gt|eq = 000 is
// false and 111 is true (OpFalse, OpTrue); GoBGP's constants have the two
// swapped.
//
// The Action is what the rule does, as extended communities in canonical
// form (sorted, deduplicated), so Actions are equal exactly when they put
// the same communities on the wire. Redirect to an IPv6 address needs a
// 20-byte IPv6-address-specific community (RFC 5701), kept separately and
// written by Action.AppendIPv6ExtCommunities.
//
// Text round trip: Parse(r.String()) == r for every valid Rule r built by
// this package, and r.String() is the canonical text.
//
// Compare orders rules as routers apply them (RFC 8955 §5.1, RFC 8956
// §5.1) and Rule.Shadows detects, conservatively, rules that can never
// apply. What the embedded GoBGP cannot carry is the bgp package's concern
// (bgp.Sendable).
package flowspec

import (
	"strings"
	"unique"
)

// Family is the address family of a rule: IPv4 or IPv6 FlowSpec, or
// IPv4Unicast or IPv6Unicast for routes (route.go). The zero value is
// invalid.
type Family uint8

const (
	// IPv4 is AFI 1, SAFI 133 (RFC 8955).
	IPv4 Family = 1
	// IPv6 is AFI 2, SAFI 133 (RFC 8956).
	IPv6 Family = 2
)

// Match is the match part of a rule: its family and its components in
// canonical RFC 8955/8956 encoding (see the package comment). Match is
// comparable and is the key of a rule everywhere in ribkeeper; because it
// is always canonical, equal rules are equal keys however they were
// encoded on the wire. The zero Match is invalid.
//
// A Match is one string: its family's byte, then the encoded components
// without the NLRI length prefix (for a route, the prefix in wire form).
// As a map key it is 16 bytes; a separate family field made it 24, and
// every table of ribkeeper is keyed by Match (at a million routes the
// reconciler's and the mirror's maps held 24 MB of that padding).
type Match struct {
	k string
}

// matchOf builds the Match of family f whose encoded body is body.
func matchOf(f Family, body []byte) Match {
	var b strings.Builder // one allocation: String does not copy
	b.Grow(1 + len(body))
	b.WriteByte(byte(f))
	b.Write(body)
	return Match{k: b.String()}
}

// fam is m's family (0 for the zero Match).
func (m Match) fam() Family {
	if m.k == "" {
		return 0
	}
	return Family(m.k[0])
}

// nlri is m's encoded body: the components without the NLRI length
// prefix, or a route's prefix.
func (m Match) nlri() string {
	if m.k == "" {
		return ""
	}
	return m.k[1:]
}

// Action is the traffic action of a rule, carried as BGP extended
// communities. It is stored in canonical form (the 8-byte extended
// communities sorted and deduplicated), so two Actions are equal exactly when
// they put the same communities on the wire. The zero Action is invalid.
//
// An Action is one pointer: its communities are held once per distinct
// action in the process (interned with package unique), however many rules,
// RIB entries and copies carry it. At 100,000 rules that share a few
// actions this saves about 200 bytes per rule across the reconciler's and
// the mirror's tables, and comparing two Actions compares two pointers.
type Action struct {
	h unique.Handle[actionData]
}

// actionData is what an Action holds.
type actionData struct {
	ext  string // 8-byte extended communities, sorted, deduplicated
	ext6 string // 20-byte IPv6-address-specific ones (RFC 5701), sorted, deduplicated
	// Route actions (route.go): standard communities and a next hop.
	comm string // 4-byte standard communities, sorted, deduplicated
	nh   string // next hop, 4 or 16 bytes; "" = the site's
}

// mkAction interns d; the empty actionData is the zero Action.
func mkAction(d actionData) Action {
	if d == (actionData{}) {
		return Action{}
	}
	return Action{h: unique.Make(d)}
}

// d returns what a holds (empty for the zero Action).
func (a Action) d() actionData {
	if a.h == (unique.Handle[actionData]{}) {
		return actionData{}
	}
	return a.h.Value()
}

// Rule is one FlowSpec rule: what it matches and what it does.
type Rule struct {
	Match  Match
	Action Action
}
