package bgp

import (
	"context"
	"maps"
	"net/netip"
	"strings"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// rawPeer is a plain GoBGP server acting as the upstream router, peering
// with the speaker over loopback.
type rawPeer struct {
	srv  *server.BgpServer
	addr string
	port int32
}

func startRawPeer(t *testing.T, addr string, asn uint32, speakerAddr string, speakerPort int32, speakerASN uint32) *rawPeer {
	t.Helper()
	p := &rawPeer{addr: addr, port: freePort(t, addr)}
	p.srv = server.NewBgpServer(server.LoggerOption(newGoBGPLogger(testLogger(t).Named("raw"), nil), nil))
	go p.srv.Serve()
	ctx := context.Background()
	if err := p.srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: asn, RouterId: addr, ListenPort: p.port, ListenAddresses: []string{addr},
	}}); err != nil {
		t.Fatal(err)
	}
	fam4 := &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_FLOW_SPEC_UNICAST}
	fam6 := &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_FLOW_SPEC_UNICAST}
	if err := p.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: speakerAddr, PeerAsn: speakerASN},
		Transport: &api.Transport{LocalAddress: addr, RemotePort: uint32(speakerPort)},
		Timers:    &api.Timers{Config: &api.TimersConfig{ConnectRetry: 1}},
		AfiSafis: []*api.AfiSafi{
			{Config: &api.AfiSafiConfig{Family: fam4, Enabled: true}},
			{Config: &api.AfiSafiConfig{Family: fam6, Enabled: true}},
		},
	}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.srv.Stop() })
	return p
}

// received returns the FlowSpec paths the raw peer learned from neighbors.
func (p *rawPeer) received(t *testing.T, s *Speaker, fam flowspec.Family) map[flowspec.Match]flowspec.Action {
	t.Helper()
	out := map[flowspec.Match]flowspec.Action{}
	err := p.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: gobgpFamily(fam)},
		func(_ gobgp.NLRI, paths []*apiutil.Path) {
			for _, path := range paths {
				if isLocal(path) {
					continue
				}
				m, err := decodeNLRI(fam, path.Nlri)
				if err != nil {
					t.Errorf("decode NLRI received by the peer: %v", err)
					continue
				}
				a, _ := s.decodeAction(path)
				out[m] = a
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPeerReceivesAndImportPolicy(t *testing.T) {
	const ourAddr, peerAddr = "127.0.0.1", "127.0.0.2"
	ourPort := freePort(t, ourAddr)
	peer := startRawPeer(t, peerAddr, 65001, ourAddr, ourPort, 65000)

	changes := make(chan PeerChange, 16)
	s := startSpeaker(t, Config{
		PeerChange:      func(pc PeerChange) { changes <- pc },
		ListenAddresses: []string{ourAddr},
		ListenPort:      ourPort,
		Neighbors: []Neighbor{{
			Address:      netip.MustParseAddr(peerAddr),
			ASN:          65001,
			Port:         uint16(peer.port),
			LocalAddress: netip.MustParseAddr(ourAddr),
			Families:     []flowspec.Family{flowspec.IPv4, flowspec.IPv6},
			Description:  "raw gobgp",
			HoldTime:     9 * time.Second,
		}},
	})
	ctx := context.Background()

	eventually(t, 20*time.Second, "session established", func() bool {
		ps, err := s.Peers(ctx)
		return err == nil && len(ps) == 1 && ps[0].State == "established"
	})

	// Our rules reach the peer with their actions.
	r4 := flowspec.Rule{Match: match4(t, 1), Action: flowspec.RateLimit(1e6)}
	r6 := flowspec.Rule{Match: match6(t, 1), Action: flowspec.Discard()}
	for _, r := range []flowspec.Rule{r4, r6} {
		if err := announceOne(s, ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "peer has both rules", func() bool {
		return peer.received(t, s, flowspec.IPv4)[r4.Match] == r4.Action && peer.received(t, s, flowspec.IPv6)[r6.Match] == r6.Action
	})

	// The peer's own announcement is rejected: not in our RIB, not in the
	// mirror, only counted as received.
	theirs := match4(t, 99)
	theirsPath, _, _, err := s.announcePath(flowspec.Rule{Match: theirs, Action: flowspec.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := peer.srv.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{theirsPath}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "peer's route received", func() bool {
		ps, err := s.Peers(ctx)
		return err == nil && ps[0].Received == 1
	})
	var inRIB int
	if err := s.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: gobgp.RF_FS_IPv4_UC},
		func(n gobgp.NLRI, paths []*apiutil.Path) {
			for _, p := range paths {
				t.Logf("our RIB: %v from %v", n, p.PeerAddress)
				inRIB++
			}
		}); err != nil {
		t.Fatal(err)
	}
	if inRIB != 1 {
		t.Fatalf("our global RIB holds %d ipv4-flowspec paths, want only ours", inRIB)
	}
	if _, ok := s.Lookup(theirs); ok {
		t.Fatal("peer's route entered the mirror")
	}

	ps, err := s.Peers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := ps[0]
	if got.Address != peerAddr || got.ASN != 65001 || got.Description != "raw gobgp" || got.Sent != 2 ||
		len(got.Families) != 2 || got.Uptime < 0 {
		t.Fatalf("Peers() = %+v", got)
	}

	// A session that drops is a wake-up.
	drain(s.Changes())
	peer.srv.Stop()
	select {
	case <-s.Changes():
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up after the peer went away")
	}
	eventually(t, 10*time.Second, "session down", func() bool {
		ps, err := s.Peers(ctx)
		return err == nil && ps[0].State != "established" && ps[0].Sent == 0
	})
	// Notifications heard the session come up, then go down, and nothing
	// of the states between.
	var seen []PeerChange
	for len(seen) < 2 {
		select {
		case pc := <-changes:
			seen = append(seen, pc)
		case <-time.After(10 * time.Second):
			t.Fatalf("peer changes %+v, want up then down", seen)
		}
	}
	if !seen[0].Up || seen[0].To != "established" || seen[1].Up || seen[1].From != "established" || seen[0].Address.String() != peerAddr {
		t.Errorf("peer changes %+v, want up then down", seen)
	}
	select {
	case pc := <-changes:
		t.Errorf("unexpected change %+v", pc)
	default:
	}
}

func drain(c <-chan struct{}) {
	select {
	case <-c:
	default:
	}
}

// The operator knobs reach GoBGP's neighbor configuration, and families
// default to the neighbor address's family.
func TestNeighborConfig(t *testing.T) {
	s := startSpeaker(t, Config{Neighbors: []Neighbor{
		{Address: netip.MustParseAddr("127.0.0.4"), ASN: 65001, Port: 1, HoldTime: 30 * time.Second, MultihopTTL: 5},
		{Address: netip.MustParseAddr("::1"), ASN: 65002, Port: 1},
		{Address: netip.MustParseAddr("127.0.0.5"), ASN: 65000, Port: 1, Families: []flowspec.Family{flowspec.IPv6, flowspec.IPv4, flowspec.IPv6}},
	}})
	ps, err := s.Peers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fams := map[string]string{}
	for _, p := range ps {
		fams[p.Address] = strings.Join(p.Families, ",")
		if p.State == "established" {
			t.Errorf("%s established with nobody", p.Address)
		}
	}
	want := map[string]string{
		"127.0.0.4": "ipv4-flowspec",
		"::1":       "ipv6-flowspec",
		"127.0.0.5": "ipv4-flowspec,ipv6-flowspec",
	}
	if !maps.Equal(fams, want) {
		t.Fatalf("families = %v, want %v", fams, want)
	}
	var got *api.Peer
	if err := s.srv.ListPeer(context.Background(), &api.ListPeerRequest{Address: "127.0.0.4"}, func(p *api.Peer) { got = p }); err != nil {
		t.Fatal(err)
	}
	if h := got.GetTimers().GetConfig().GetHoldTime(); h != 30 {
		t.Errorf("hold time = %d, want 30", h)
	}
	if k := got.GetTimers().GetConfig().GetKeepaliveInterval(); k != 10 {
		t.Errorf("keepalive = %d, want 10", k)
	}
	if m := got.GetEbgpMultihop(); !m.GetEnabled() || m.GetMultihopTtl() != 5 {
		t.Errorf("multihop = %v, want enabled ttl 5", m)
	}
}

// A neighbor whose session never comes up gets a hint; with a TCP MD5
// password the hint names the key.
func TestPeerHintWhenNeverUp(t *testing.T) {
	// Nothing listens on these ports: no TCP connection ever completes.
	port := freePort(t, "127.0.0.9")
	s := startSpeaker(t, Config{HintAfter: time.Millisecond, Neighbors: []Neighbor{
		{Address: netip.MustParseAddr("127.0.0.9"), ASN: 65009, Port: uint16(port), ConnectRetry: 2 * time.Second},
		{Address: netip.MustParseAddr("127.0.0.10"), ASN: 65010, Port: uint16(port), ConnectRetry: 2 * time.Second, Password: "k3y"},
	}})
	eventually(t, 20*time.Second, "hints for both neighbors", func() bool {
		ps, err := s.Peers(context.Background())
		if err != nil || len(ps) != 2 {
			return false
		}
		return strings.Contains(ps[0].Hint, "is the router up") && strings.Contains(ps[1].Hint, "TCP MD5 password")
	})
	// The FSM cycling through idle and active is no error of a session.
	ps, err := s.Peers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.LastError != "" || p.Flaps != 0 {
			t.Errorf("%s never came up but shows last error %q, %d flaps", p.Address, p.LastError, p.Flaps)
		}
	}
}

// With HoldPeers, a neighbor with graceful restart waits for StartPeers
// (it must get the whole table before End-of-RIB); one without it is
// added at Start and gets rules as they come.
func TestHoldPeersHoldsOnlyGracefulRestart(t *testing.T) {
	const ourAddr = "127.0.0.1"
	ourPort := freePort(t, ourAddr)
	plain := startRawPeer(t, "127.0.0.2", 65001, ourAddr, ourPort, 65000)
	gr := startRawPeer(t, "127.0.0.3", 65002, ourAddr, ourPort, 65000)
	s := startSpeaker(t, Config{
		ListenAddresses: []string{ourAddr},
		ListenPort:      ourPort,
		HoldPeers:       true,
		Neighbors: []Neighbor{
			{Address: netip.MustParseAddr("127.0.0.2"), ASN: 65001, Port: uint16(plain.port), LocalAddress: netip.MustParseAddr(ourAddr), ConnectRetry: 2 * time.Second},
			{Address: netip.MustParseAddr("127.0.0.3"), ASN: 65002, Port: uint16(gr.port), LocalAddress: netip.MustParseAddr(ourAddr), ConnectRetry: 2 * time.Second,
				GracefulRestart: true, RestartTime: time.Minute},
		},
	})
	ctx := context.Background()
	eventually(t, 30*time.Second, "the neighbor without graceful restart is up before StartPeers", func() bool {
		ps, err := s.Peers(ctx)
		return err == nil && len(ps) == 1 && ps[0].Address == "127.0.0.2" && ps[0].State == "established"
	})
	if err := s.StartPeers(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the graceful-restart neighbor is up after StartPeers", func() bool {
		ps, err := s.Peers(ctx)
		return err == nil && len(ps) == 2 && ps[0].State == "established" && ps[1].State == "established"
	})
}
