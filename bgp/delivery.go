package bgp

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Per-peer delivery without reading any Adj-RIB-Out.
//
// Why a path in the mirror is in an established peer's Adj-RIB-Out
// exactly when the peer negotiated its family and its router profile does
// not hold it back (GoBGP v4.8.0, pkg/server): the mirror holds the global
// RIB's BEST local paths. GoBGP sends a peer the best path of each
// destination of every family negotiated with it (getBestFromLocal /
// propagateUpdate), through the global export policy. That policy
// (exportpolicy.go) rejects a path for a peer only when the path carries
// the tag of the peer's profile, i.e. when holdState's mask for the rule
// has the peer's class (holdback.go); it accepts everything else. No peer
// is a route-server client, and the one other exclusion GoBGP applies
// (never send a path back to the peer it came from) cannot hit a local
// path. Tombstones are not in the mirror. So the peers a path goes to are
// the established peers of its family minus those of the classes in its
// mask; the first set only changes on session state changes, which the
// peer watch reports (Delivery keeps it from one ListPeer per change,
// never per rule), the mask is a map lookup. TestDeliveryMatchesAdjRibOut
// checks this against ListPath(ADJ_OUT), which copies tables and stays out
// of the hot path. A path GoBGP has accepted but not yet written to a
// socket counts as delivered (as in PeerStatus.Sent).

// deliveryTable is the established peers and the families they
// negotiated, refreshed after every peer state change.
type deliveryTable struct {
	mu sync.RWMutex
	// peers maps each configured neighbor's address to the families it
	// has negotiated; nil for a peer that is not established.
	peers map[string][]flowspec.Family
	// configured maps each configured neighbor to its configured families.
	configured map[string][]flowspec.Family

	refreshing sync.Mutex
	// rereads counts refreshes in a row that found ListPeer behind the
	// peer watch (see agrees).
	rereads atomic.Int32
}

// deliveryRereads and deliveryRereadAfter bound the re-reads of a
// ListPeer that lags the peer watch: at most 5 s of them.
const (
	deliveryRereads     = 50
	deliveryRereadAfter = 100 * time.Millisecond
)

// Delivery returns the established peers (addresses, sorted) whose
// Adj-RIB-Out holds the path for m, and the number of configured peers
// that carry m's family. peers is empty when the path is not in the RIB.
func (s *Speaker) Delivery(m flowspec.Match) (peers []string, total int) {
	_, inRIB := s.Lookup(m)
	mask := s.hold.maskOf(m)
	s.delivery.mu.RLock()
	defer s.delivery.mu.RUnlock()
	for addr, fams := range s.delivery.configured {
		if !slices.Contains(fams, m.Family()) {
			continue
		}
		total++
		if c := s.hold.classOfPeer(addr); c >= 0 && mask&(1<<c) != 0 {
			continue
		}
		if inRIB && slices.Contains(s.delivery.peers[addr], m.Family()) {
			peers = append(peers, addr)
		}
	}
	slices.SortFunc(peers, func(a, b string) int {
		aa, _ := netip.ParseAddr(a)
		ba, _ := netip.ParseAddr(b)
		return aa.Compare(ba)
	})
	return peers, total
}

// refreshDelivery re-reads the peers' negotiated families (one ListPeer)
// and wakes the reconciler. It runs off GoBGP's goroutines; concurrent
// requests merge.
func (s *Speaker) refreshDelivery() {
	if !s.delivery.refreshing.TryLock() {
		// One is running; it may have read before the latest change, so
		// run once more after it.
		go func() {
			s.delivery.refreshing.Lock()
			s.delivery.refreshing.Unlock()
			s.refreshDelivery()
		}()
		return
	}
	defer s.delivery.refreshing.Unlock()
	srv, err := s.running()
	if err != nil {
		return
	}
	peers := make(map[string][]flowspec.Family)
	configured := make(map[string][]flowspec.Family)
	err = s.call(context.Background(), "list peers (delivery)", func() error {
		return srv.ListPeer(context.Background(), &api.ListPeerRequest{}, func(p *api.Peer) {
			if p.Conf == nil {
				return
			}
			addr := p.Conf.NeighborAddress
			var conf []flowspec.Family
			for _, af := range p.AfiSafis {
				if af.Config == nil || !af.Config.Enabled {
					continue
				}
				if f, ok := familyOf(apiutil.ToFamily(af.Config.Family)); ok {
					conf = append(conf, f)
				}
			}
			configured[addr] = conf
			if p.State == nil || p.State.SessionState != api.PeerState_SESSION_STATE_ESTABLISHED {
				return
			}
			var neg []flowspec.Family
			for _, c := range p.State.RemoteCap {
				mp := c.GetMultiProtocol()
				if mp == nil {
					continue
				}
				if f, ok := familyOf(apiutil.ToFamily(mp.Family)); ok && slices.Contains(conf, f) {
					neg = append(neg, f)
				}
			}
			peers[addr] = neg
		})
	})
	if err != nil {
		s.log.Warn("cannot read peer families for delivery status", "error", err)
		return
	}
	s.delivery.mu.Lock()
	s.delivery.peers, s.delivery.configured = peers, configured
	s.delivery.mu.Unlock()
	// The watch event that asked for this refresh can come before
	// ListPeer shows the new state (seen on a loaded machine: a peer back
	// from a reset stayed undelivered, as no later event came). Read again
	// shortly until both agree.
	if s.agrees(peers) {
		s.delivery.rereads.Store(0)
	} else if s.delivery.rereads.Add(1) <= deliveryRereads {
		time.AfterFunc(deliveryRereadAfter, s.refreshDelivery)
	}
}

// agrees reports whether the established peers of a ListPeer (listed)
// are those the peer watch last reported established.
func (s *Speaker) agrees(listed map[string][]flowspec.Family) bool {
	s.peers.mu.Lock()
	defer s.peers.mu.Unlock()
	for addr, info := range s.peers.state {
		_, up := listed[addr]
		if up != (info.state == gobgp.BGP_FSM_ESTABLISHED) {
			return false
		}
	}
	return true
}

// NotSent says, for each configured peer of m's family that its router
// profile keeps m from, why: "not sent to 127.0.0.4: frr resets sessions
// on !=". Sorted by address; empty when m goes to every peer or is not in
// the RIB.
func (s *Speaker) NotSent(m flowspec.Match) []string {
	a, inRIB := s.Lookup(m)
	mask := s.hold.maskOf(m)
	if !inRIB || mask == 0 {
		return nil
	}
	type line struct {
		addr netip.Addr
		text string
	}
	var lines []line
	s.delivery.mu.RLock()
	for addr, fams := range s.delivery.configured {
		if !slices.Contains(fams, m.Family()) {
			continue
		}
		c := s.hold.classOfPeer(addr)
		if c < 0 || mask&(1<<c) == 0 {
			continue
		}
		pa, _ := netip.ParseAddr(addr)
		lines = append(lines, line{pa, "not sent to " + addr + ": " + s.hold.reason(c, flowspec.Rule{Match: m, Action: a})})
	}
	s.delivery.mu.RUnlock()
	slices.SortFunc(lines, func(x, y line) int { return x.addr.Compare(y.addr) })
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.text
	}
	return out
}
