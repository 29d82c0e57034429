package bgp

import (
	"context"
	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// birdPair starts BIRD and a speaker peering with it (ipv4 and ipv6
// flowspec), and waits for the session.
func birdPair(t *testing.T, cfg Config) (*Speaker, *birdtest.Router) {
	t.Helper()
	const ourAddr, birdAddr = "127.0.0.1", "127.0.0.3"
	ourPort, birdPort := freePort(t, ourAddr), freePort(t, birdAddr)
	b := startBird(t, birdAddr, birdPort, 65001, ourAddr, ourPort, 65000, "")
	cfg.ASN, cfg.RouterID = 65000, netip.MustParseAddr("192.0.2.1")
	cfg.ListenAddresses, cfg.ListenPort = []string{ourAddr}, ourPort
	cfg.Neighbors = []Neighbor{{
		Address: netip.MustParseAddr(birdAddr), ASN: 65001, Port: uint16(birdPort),
		LocalAddress: netip.MustParseAddr(ourAddr), Families: []flowspec.Family{flowspec.IPv4, flowspec.IPv6},
	}}
	s := New(testLogger(t), cfg)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	eventually(t, 30*time.Second, "BIRD session established", birdUp(b))
	return s, b
}

// adjOut lists the NLRIs in the peer's Adj-RIB-Out for fam with ListPath:
// the full-copy read that Delivery avoids.
func adjOut(t *testing.T, s *Speaker, peer string, fam flowspec.Family) map[flowspec.Match]bool {
	t.Helper()
	out := make(map[flowspec.Match]bool)
	err := s.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_ADJ_OUT, Name: peer, Family: gobgpFamily(fam)},
		func(n gobgp.NLRI, _ []*apiutil.Path) {
			m, err := decodeNLRI(fam, n)
			if err != nil {
				t.Error(err)
				return
			}
			out[m] = true
		})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDeliveryMatchesAdjRibOut(t *testing.T) {
	s, b := birdPair(t, Config{})
	ctx := context.Background()
	const peer = "127.0.0.3"
	var ms []flowspec.Match
	for i := range 20 {
		m := match4(t, i)
		if i%2 == 1 {
			m = match6(t, i)
		}
		ms = append(ms, m)
		if err := announceOne(s, ctx, flowspec.Rule{Match: m, Action: flowspec.Discard()}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "mirror has all paths", func() bool { return s.Len() == len(ms) })
	eventually(t, 10*time.Second, "delivery knows the peer", func() bool {
		p, _ := s.Delivery(ms[0])
		return len(p) == 1
	})
	out4, out6 := adjOut(t, s, peer, flowspec.IPv4), adjOut(t, s, peer, flowspec.IPv6)
	for _, m := range ms {
		peers, total := s.Delivery(m)
		inOut := out4[m] || out6[m]
		if got := slices.Contains(peers, peer); got != inOut || total != 1 {
			t.Errorf("%s: Delivery = %v/%d, in Adj-RIB-Out = %v", m, peers, total, inOut)
		}
	}
	// A path not in the RIB is delivered nowhere.
	if p, total := s.Delivery(match4(t, 999)); len(p) != 0 || total != 1 {
		t.Errorf("absent path: %v/%d", p, total)
	}
	// Peer down: delivered nowhere, still 1 configured.
	if _, err := b.Birdc("disable", "up0"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "delivery sees the peer down", func() bool {
		p, total := s.Delivery(ms[0])
		return len(p) == 0 && total == 1
	})
	// Peers says why: BIRD's "disable" is a Cease, administrative shutdown.
	eventually(t, 10*time.Second, "peers shows the NOTIFICATION", func() bool {
		ps, err := s.Peers(ctx)
		return err == nil && len(ps) == 1 && strings.Contains(ps[0].LastError, "notification-received") &&
			ps[0].Flaps == 1 && !ps[0].LastErrorAt.IsZero() && !ps[0].Since.IsZero()
	})
	if _, err := b.Birdc("enable", "up0"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "peer back, full table again", func() bool {
		p, _ := s.Delivery(ms[0])
		return len(p) == 1 && strings.Count(birdRoutes(t, b, "ft4"), "flow4 {") >= 10
	})
	if s.PeerReestablished() == 0 {
		t.Error("peer reset not counted")
	}
}

func TestRestartRebuildsMirrorAndFreesDestinations(t *testing.T) {
	s, b := birdPair(t, Config{})
	ctx := context.Background()
	for i := range 50 {
		if err := announceOne(s, ctx, flowspec.Rule{Match: match4(t, i), Action: flowspec.Discard()}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 40 {
		if err := withdrawOne(s, ctx, match4(t, i)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "mirror has 10", func() bool { return s.Len() == 10 })
	if n := s.Leaked(); n != 40 {
		t.Errorf("Leaked = %d, want 40", n)
	}
	epoch := s.Epoch()
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Epoch() == epoch || s.Restarts() != 1 {
		t.Errorf("epoch %d→%d, restarts %d", epoch, s.Epoch(), s.Restarts())
	}
	// The new server was loaded with what the old one held before the
	// peers came back; the withdrawn NLRIs are gone for good.
	if !s.Paths(func(flowspec.Match, flowspec.Action) {}) || s.Len() != 10 {
		t.Fatalf("after Restart the mirror must be ready with the 10 paths; len %d", s.Len())
	}
	if n := s.Leaked(); n != 0 {
		t.Errorf("Leaked after restart = %d", n)
	}
	eventually(t, 30*time.Second, "BIRD session back", birdUp(b))
	eventually(t, 10*time.Second, "BIRD has the 10 rules again", func() bool {
		r := birdRoutes(t, b, "ft4")
		return strings.Contains(r, "10.0.0.45/32") && strings.Count(r, "flow4 {") == 10
	})
	if err := withdrawOne(s, ctx, match4(t, 45)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "BIRD sees the withdrawal", func() bool {
		r := birdRoutes(t, b, "ft4")
		return !strings.Contains(r, "10.0.0.45/32") && strings.Count(r, "flow4 {") == 9
	})
}

func TestGRPCListenRefusesRemote(t *testing.T) {
	for _, tc := range []struct {
		addr  string
		allow bool
		ok    bool
	}{
		{"127.0.0.1:0", false, true},
		{"[::1]:0", false, true},
		{"0.0.0.0:0", false, false},
		{"0.0.0.0:0", true, true},
		{"nonsense", false, false},
	} {
		err := checkGRPCListen(tc.addr, tc.allow)
		if (err == nil) != tc.ok {
			t.Errorf("checkGRPCListen(%q, %v) = %v", tc.addr, tc.allow, err)
		}
	}
}
