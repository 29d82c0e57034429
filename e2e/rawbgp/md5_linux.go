package rawbgp

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"syscall"
)

// setMD5 installs a TCP MD5 signature key for peer on socket fd
// (setsockopt TCP_MD5SIG with a struct tcp_md5sig).
func setMD5(fd int, peer netip.Addr, key string) error {
	const tcpMD5Sig = 14 // TCP_MD5SIG, linux/tcp.h
	if len(key) > 80 {
		return fmt.Errorf("TCP MD5 key of %d bytes: the kernel takes at most 80", len(key))
	}
	// struct tcp_md5sig: struct sockaddr_storage tcpm_addr (128 bytes),
	// u8 flags, u8 prefixlen, u16 keylen, i32 ifindex, u8 key[80].
	var sig [216]byte
	peer = peer.Unmap()
	if peer.Is4() {
		binary.NativeEndian.PutUint16(sig[0:], syscall.AF_INET)
		a := peer.As4()
		copy(sig[4:8], a[:]) // sockaddr_in: family, port, addr
	} else {
		binary.NativeEndian.PutUint16(sig[0:], syscall.AF_INET6)
		a := peer.As16()
		copy(sig[8:24], a[:]) // sockaddr_in6: family, port, flowinfo, addr
	}
	binary.NativeEndian.PutUint16(sig[130:], uint16(len(key)))
	copy(sig[136:], key)
	if err := syscall.SetsockoptString(fd, syscall.IPPROTO_TCP, tcpMD5Sig, string(sig[:])); err != nil {
		return fmt.Errorf("setsockopt TCP_MD5SIG for %s: %w", peer, err)
	}
	return nil
}
