package flowspec

import (
	"fmt"
	"strings"
)

// String returns "ipv4-flowspec" or "ipv6-flowspec" (the gobgp and
// OpenConfig AFI/SAFI names), or "invalid" for any other value.
func (f Family) String() string {
	switch f {
	case IPv4:
		return "ipv4-flowspec"
	case IPv6:
		return "ipv6-flowspec"
	case IPv4Unicast:
		return "ipv4-unicast"
	case IPv6Unicast:
		return "ipv6-unicast"
	}
	return "invalid"
}

// AFI returns the BGP address family identifier (1 or 2; 0 if f is invalid).
// The SAFI of both families is SAFI.
func (f Family) AFI() uint16 {
	switch f {
	case IPv4, IPv4Unicast:
		return 1
	case IPv6, IPv6Unicast:
		return 2
	}
	return 0
}

// SAFI is the subsequent address family identifier of FlowSpec (RFC 8955).
const SAFI = 133

// IsValid reports whether f is one of the four families: IPv4 or IPv6
// FlowSpec, IPv4Unicast or IPv6Unicast.
func (f Family) IsValid() bool { return f.IsFlowSpec() || f.IsRoute() }

// maxType is the highest component type the family defines.
func (f Family) maxType() ComponentType {
	if f == IPv6 {
		return FlowLabel
	}
	return Fragment
}

// addrBits is the address length of the family in bits.
func (f Family) addrBits() int {
	if f == IPv6 {
		return 128
	}
	return 32
}

// ParseFamily accepts "ipv4", "ipv6", "ipv4-flowspec", "ipv6-flowspec",
// "ipv4-unicast", "ipv6-unicast" (case-insensitive).
func ParseFamily(s string) (Family, error) {
	if f, ok := familyNamed(s); ok {
		return f, nil
	}
	return 0, fmt.Errorf("flowspec: unknown family %q; expected ipv4-flowspec, ipv6-flowspec, ipv4-unicast or ipv6-unicast", s)
}

// familyNamed is ParseFamily without the error: the parser asks it of
// every rule's first word, usually "match", and formatting the error cost
// a fifth of a rule's parse. (strings.ToLower returns a lowercase ASCII
// word as it is.)
func familyNamed(s string) (Family, bool) {
	switch strings.ToLower(s) {
	case "ipv4", "ipv4-flowspec":
		return IPv4, true
	case "ipv6", "ipv6-flowspec":
		return IPv6, true
	case "ipv4-unicast":
		return IPv4Unicast, true
	case "ipv6-unicast":
		return IPv6Unicast, true
	}
	return 0, false
}
