package bgp

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Reconfigure touches only the neighbors that changed: an unchanged
// session stays up (BIRD's "since" does not move), a new neighbor comes
// up, a removed one goes down.
func TestReconfigureKeepsUnchangedSessions(t *testing.T) {
	birdtest.Binary(t)
	port := freePort(t, "127.0.0.1")
	peer := []birdtest.Peer{{Address: "127.0.0.1", Port: int(port), ASN: 65000}}
	a := birdtest.Start(t, birdtest.Options{Address: "127.0.0.2", ASN: 65001, Peers: peer})
	b := birdtest.Start(t, birdtest.Options{Address: "127.0.0.3", ASN: 65002, Peers: peer})
	nb := func(br *birdtest.Router, asn uint32, desc string) Neighbor {
		return Neighbor{Address: netip.MustParseAddr(br.Address), ASN: asn, Port: uint16(br.Port),
			LocalAddress: netip.MustParseAddr("127.0.0.1"), MultihopTTL: 2, Description: desc,
			Families: []flowspec.Family{flowspec.IPv4}}
	}
	s := startSpeaker(t, Config{ListenPort: port, ListenAddresses: []string{"127.0.0.1"},
		Neighbors: []Neighbor{nb(a, 65001, "a")}})
	eventually(t, 20*time.Second, "session a", func() bool { return a.Established(0) })
	before, err := a.Since(0)
	if err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	ch, err := s.Reconfigure(ctx, Config{Neighbors: []Neighbor{nb(a, 65001, "a"), nb(b, 65002, "b")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Added) != 1 || len(ch.Unchanged) != 1 || len(ch.Changed)+len(ch.Removed) != 0 {
		t.Errorf("changes = %+v", ch)
	}
	eventually(t, 20*time.Second, "session b", func() bool { return b.Established(0) })
	if after, err := a.Since(0); err != nil || !birdtest.SameSince(after, before) {
		t.Errorf("unchanged session restarted: since %s, was %s (%v)", after, before, err)
	}

	// Changing b's description restarts b only; dropping a ends a.
	ch, err = s.Reconfigure(ctx, Config{Neighbors: []Neighbor{nb(b, 65002, "b2")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Changed) != 1 || len(ch.Removed) != 1 {
		t.Errorf("changes = %+v", ch)
	}
	eventually(t, 20*time.Second, "session a down", func() bool { return !a.Established(0) })
	eventually(t, 20*time.Second, "session b back", func() bool { return b.Established(0) })
	peers, err := s.Peers(ctx)
	if err != nil || len(peers) != 1 || peers[0].Description != "b2" {
		t.Errorf("peers = %+v %v", peers, err)
	}
}

// A router dialing in from a dynamic neighbor prefix gets a session with
// the peer group's settings; an unknown peer group is refused before it
// reaches GoBGP (which would crash).
func TestDynamicNeighbor(t *testing.T) {
	birdtest.Binary(t)
	port := freePort(t, "127.0.0.1")
	br := birdtest.Start(t, birdtest.Options{Address: "127.0.0.4", ASN: 65004,
		Peers: []birdtest.Peer{{Address: "127.0.0.1", Port: int(port), ASN: 65000}}})
	cfg := Config{ListenPort: port, ListenAddresses: []string{"127.0.0.1"},
		PeerGroups:       []PeerGroup{{Name: "edge", ASN: 65004, MultihopTTL: 2, Families: []flowspec.Family{flowspec.IPv4, flowspec.IPv4Unicast}}},
		DynamicNeighbors: []DynamicNeighbor{{Prefix: netip.MustParsePrefix("127.0.0.0/24"), PeerGroup: "edge"}}}
	s := startSpeaker(t, cfg)
	eventually(t, 30*time.Second, "dynamic session", func() bool { return br.Established(0) })

	bad := New(nil, Config{ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: -1,
		DynamicNeighbors: []DynamicNeighbor{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), PeerGroup: "nope"}}})
	if err := bad.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "peer group") {
		t.Errorf("unknown peer group: %v", err)
	}
	if _, err := s.Reconfigure(context.Background(), Config{DynamicNeighbors: []DynamicNeighbor{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), PeerGroup: "nope"}}}); err == nil {
		t.Error("Reconfigure with an unknown peer group succeeded")
	}
}
