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
	}
	return "invalid"
}

// AFI returns the BGP address family identifier (1 or 2; 0 if f is invalid).
// The SAFI of both families is SAFI.
func (f Family) AFI() uint16 {
	switch f {
	case IPv4:
		return 1
	case IPv6:
		return 2
	}
	return 0
}

// SAFI is the subsequent address family identifier of FlowSpec (RFC 8955).
const SAFI = 133

// IsValid reports whether f is IPv4 or IPv6.
func (f Family) IsValid() bool { return f == IPv4 || f == IPv6 }

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

// ParseFamily accepts "ipv4", "ipv6", "ipv4-flowspec", "ipv6-flowspec"
// (case-insensitive).
func ParseFamily(s string) (Family, error) {
	switch strings.ToLower(s) {
	case "ipv4", "ipv4-flowspec":
		return IPv4, nil
	case "ipv6", "ipv6-flowspec":
		return IPv6, nil
	}
	return 0, fmt.Errorf("flowspec: unknown family %q; expected ipv4-flowspec or ipv6-flowspec", s)
}
