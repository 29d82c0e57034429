package bgp

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// ListenError is a BGP listener that could not bind: the address and
// port taken by another process, or an address this host does not have.
type ListenError struct {
	Addr string // address:port, or "" when GoBGP's error did not carry it
	Port int32
	Err  error
}

func (e *ListenError) Error() string {
	addr := e.Addr
	if addr == "" {
		addr = "port " + strconv.Itoa(int(e.Port))
	}
	if errors.Is(e.Err, syscall.EADDRNOTAVAIL) {
		return fmt.Sprintf("bgp: cannot listen on %s: this host has no such address; fix [bgp] listen_addresses", addr)
	}
	return fmt.Sprintf("bgp: cannot listen on %s: another process already listens there "+
		"(`ss -ltnp 'sport = :%d'` names it: another ribkeeper, a BIRD, gobgpd?); stop it, "+
		"or change [bgp] listen_port (now %d) or [bgp] listen_addresses", addr, e.Port, e.Port)
}

func (e *ListenError) Unwrap() error { return e.Err }

// listenError makes err a *ListenError when it is a listener's bind
// failure, and returns it unchanged otherwise.
func listenError(err error, port int32) error {
	if !errors.Is(err, syscall.EADDRINUSE) && !errors.Is(err, syscall.EADDRNOTAVAIL) {
		return err
	}
	le := &ListenError{Port: port, Err: err}
	var op *net.OpError
	if errors.As(err, &op) && op.Addr != nil {
		le.Addr = op.Addr.String()
	}
	return le
}
