package birdtest

import (
	"net"
	"strconv"
	"testing"
	"time"
)

// BIRD listens on its own address only: the same port number stays free
// on another loopback address (where a ribkeeper under test listens), so
// BIRD's dial to that peer cannot land on its own listener.
func TestListensOnItsAddressOnly(t *testing.T) {
	Binary(t)
	port := FreePort(t, "127.0.0.2")
	r := Start(t, Options{Address: "127.0.0.2", Port: port, ASN: 65001,
		Peers: []Peer{{Address: "127.0.0.1", Port: FreePort(t, "127.0.0.1"), ASN: 65000}}})
	own := net.JoinHostPort("127.0.0.2", strconv.Itoa(port))
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", own, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("BIRD does not listen on %s: %v", own, err)
		}
		// BIRD opens the listener from its event loop: a control
		// command answered is a turn of that loop.
		if _, err := r.Birdc("show", "protocols"); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("BIRD on 127.0.0.2 holds port %d on 127.0.0.1 too: %v", port, err)
	}
	l.Close()
}

// Two tests never get the same port number, whatever addresses they ask
// for, and a number some process listens on is not handed out.
func TestFreePortsAreDistinct(t *testing.T) {
	seen := map[int]bool{}
	for i := range 200 {
		addr := "127.0.0." + strconv.Itoa(1+i%3)
		p := FreePort(t, addr)
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}
