package bgp

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"syscall"
)

// checkMD5 installs key for peer on a throw-away socket, the way GoBGP
// does on the sockets it dials from. GoBGP reports a failure there only as
// a connect attempt that fails (logged at debug level), so without this
// check a kernel without TCP_MD5SIG, or a bad key, shows as a session that
// never comes up.
func checkMD5(peer netip.Addr, key string) error {
	const tcpMD5Sig = 14 // TCP_MD5SIG
	family := syscall.AF_INET
	if !peer.Unmap().Is4() {
		family = syscall.AF_INET6
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, syscall.IPPROTO_TCP)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer syscall.Close(fd)

	// struct tcp_md5sig: sockaddr_storage (128), flags, prefixlen, keylen
	// (u16), ifindex (i32), key[80].
	var sig [216]byte
	binary.NativeEndian.PutUint16(sig[0:], uint16(family))
	if family == syscall.AF_INET {
		a := peer.Unmap().As4()
		copy(sig[4:8], a[:])
	} else {
		a := peer.As16()
		copy(sig[8:24], a[:])
	}
	binary.NativeEndian.PutUint16(sig[130:], uint16(len(key)))
	copy(sig[136:], key)
	if err := syscall.SetsockoptString(fd, syscall.IPPROTO_TCP, tcpMD5Sig, string(sig[:])); err != nil {
		return fmt.Errorf("setsockopt TCP_MD5SIG: %w", err)
	}
	return nil
}
