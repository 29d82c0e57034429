package bgp

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A BGP port another process holds fails Start with the address and port
// and the settings that change them, not only "address already in use".
func TestStartPortTaken(t *testing.T) {
	const addr = "127.0.0.1"
	port := freePort(t, addr)
	hold, err := net.Listen("tcp4", net.JoinHostPort(addr, strconv.Itoa(int(port))))
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	s := New(testLogger(t), Config{ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"),
		ListenPort: port, ListenAddresses: []string{addr}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = s.Start(ctx)
	if err == nil {
		s.Stop()
		t.Fatal("Start succeeded on a port another listener holds")
	}
	var le *ListenError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v (%T), want a *ListenError", err, err)
	}
	want := addr + ":" + strconv.Itoa(int(port))
	for _, w := range []string{"cannot listen on " + want, "[bgp] listen_port (now " + strconv.Itoa(int(port)) + ")", "listen_addresses"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}
