//go:build !linux

package bgp

import (
	"errors"
	"net/netip"
)

// checkMD5: TCP MD5 is only supported on Linux here.
func checkMD5(netip.Addr, string) error {
	return errors.New("TCP MD5 is only supported on Linux")
}
