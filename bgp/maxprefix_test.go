package bgp

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/rawbgp"
	"github.com/ribkeeper/ribkeeper/flowspec"
)

// A peer group's max_prefixes reaches its dynamic neighbors: Peers shows
// the limit, and a router that sends more routes than it gets Cease /
// Maximum Number of Prefixes Reached (6/1).
func TestPeerGroupMaxPrefixes(t *testing.T) {
	const rk, router = "127.0.21.11", "127.0.21.12"
	port := freePort(t, rk)
	s := startSpeaker(t, Config{ListenPort: port, ListenAddresses: []string{rk},
		PeerGroups: []PeerGroup{{Name: "edge", ASN: 65023, Families: []flowspec.Family{flowspec.IPv4Unicast},
			HoldTime: 240 * time.Second, MaxPrefixes: 50}},
		DynamicNeighbors: []DynamicNeighbor{{Prefix: netip.MustParsePrefix(router + "/32"), PeerGroup: "edge"}}})

	deadline := time.Now().Add(30 * time.Second)
	var c *rawbgp.Conn
	eventually(t, 30*time.Second, "the router's session established", func() bool {
		var err error
		c, err = rawbgp.Dial(context.Background(), netip.MustParseAddr(router), netip.AddrPortFrom(netip.MustParseAddr(rk), uint16(port)), "")
		if err != nil {
			return false
		}
		if err := c.Handshake(rawbgp.Open{ASN: 65023, HoldTime: 240, RouterID: netip.MustParseAddr(router),
			Families: []rawbgp.Family{{AFI: 1, SAFI: 1}}}, deadline); err != nil {
			c.Close()
			return false
		}
		return true
	})
	defer c.Close()
	eventually(t, 30*time.Second, "Peers shows the dynamic neighbor with its limit", func() bool {
		ps, err := s.Peers(context.Background())
		return err == nil && len(ps) == 1 && ps[0].State == "established" && ps[0].MaxPrefixes == 50
	})

	nh := netip.MustParseAddr(router).As4()
	attrs := append(append(rawbgp.Attr(rawbgp.FlagTransitive, 1, []byte{0}),
		rawbgp.Attr(rawbgp.FlagTransitive, rawbgp.AttrASPath, rawbgp.ASPath4(65023))...),
		rawbgp.Attr(rawbgp.FlagTransitive, 3, nh[:])...)
	var nlri []byte
	for i := range 51 {
		nlri = append(nlri, 32, 10, 0, 0, byte(i))
	}
	if err := c.Send(rawbgp.MsgUpdate, rawbgp.Update(nil, attrs, nlri)); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := c.Read(deadline)
		if err != nil {
			t.Fatalf("no NOTIFICATION after 51 routes with max_prefixes 50: %v", err)
		}
		if m.Type != rawbgp.MsgNotification {
			continue
		}
		n, err := rawbgp.ParseNotification(m.Body)
		if err != nil || n.Code != 6 || n.Subcode != 1 {
			t.Fatalf("got %v (%v), want Cease / Maximum Number of Prefixes Reached (6/1)", n, err)
		}
		return
	}
}
