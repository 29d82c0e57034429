//go:build !linux

package rawbgp

import (
	"errors"
	"net/netip"
)

func setMD5(int, netip.Addr, string) error {
	return errors.New("TCP MD5 signatures are implemented for Linux only")
}
