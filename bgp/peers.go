package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/profile"
)

// PeerStatus describes one configured neighbor.
type PeerStatus struct {
	Address     string
	ASN         uint32
	Description string
	State       string // "established", "active", "idle", "connect", "opensent", "openconfirm"
	Uptime      time.Duration
	Families    []string // configured FlowSpec families, e.g. "ipv4-flowspec"
	// Sent counts the paths advertised: the mirror's paths in the peer's
	// families while the session is established, less those its router
	// profile holds back (UPDATEs still queued for sending are included).
	Sent int
	// Received counts routes the peer sent; all are rejected by the import
	// policy but held in GoBGP's Adj-RIB-In (maxprefix.go) while the
	// session is up. MaxPrefixes is the neighbor's limit per family (0:
	// none); PrefixLimited is set when GoBGP closed the session at it and
	// keeps it down.
	Received      int
	MaxPrefixes   uint32
	PrefixLimited bool

	// Since is when the session last changed state (zero: not seen yet).
	Since time.Time
	// LastError says why the session last went down, in GoBGP's words
	// ("notification-received cease/administrative shutdown",
	// "hold-timer-expired", "read-failed"), and LastErrorAt when; empty
	// when it never went down.
	LastError   string
	LastErrorAt time.Time
	// Flaps counts the times the session went down after being
	// established, since the speaker started.
	Flaps int
	// Hint tells the operator what to check when the session is not up
	// and has never come up.
	Hint string
	// Profile is the neighbor's router profile ("generic" when none is
	// set) and HeldBack the rules of its families the profile keeps from
	// it (holdback.go); Sent does not count them.
	Profile  string
	HeldBack int
}

// peerInfo is what the peer watch saw of one session.
type peerInfo struct {
	state       gobgp.FSMState
	since       time.Time
	lastErr     string
	lastErrAt   time.Time
	flaps       int
	everUp      bool
	firstSeenAt time.Time
	// prefixLimited: GoBGP closed the session at the prefix limit and
	// keeps it down (admin state PFX_CT) until enableLimited.
	prefixLimited bool
}

// peerTable is the session state seen through the peer watch: its changes
// wake the reconciler, and it keeps what GoBGP's ListPeer does not say
// (why a session went down, flaps). Peers asks GoBGP for the rest.
type peerTable struct {
	mu    sync.Mutex
	state map[string]*peerInfo
}

func (t *peerTable) init() { t.state = make(map[string]*peerInfo) }

// families returns the FlowSpec families to negotiate with n.
func (n *Neighbor) families() []flowspec.Family {
	if len(n.Families) > 0 {
		out := slices.Clone(n.Families)
		slices.Sort(out)
		return slices.Compact(out)
	}
	if n.Address.Unmap().Is4() {
		return []flowspec.Family{flowspec.IPv4}
	}
	return []flowspec.Family{flowspec.IPv6}
}

func (s *Speaker) apiPeer(n Neighbor) *api.Peer {
	addr := n.Address.Unmap()
	p := &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: addr.String(),
			PeerAsn:         n.ASN,
			Description:     n.Description,
			AuthPassword:    n.Password,
		},
		Transport: &api.Transport{
			RemotePort:  uint32(n.Port),
			PassiveMode: n.Passive,
		},
	}
	if n.LocalAddress.IsValid() {
		p.Transport.LocalAddress = n.LocalAddress.Unmap().String()
	}
	if n.MultihopTTL > 0 {
		p.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(n.MultihopTTL)}
	}
	for _, f := range n.families() {
		fam := s.apiFamily(f)
		p.AfiSafis = append(p.AfiSafis, &api.AfiSafi{Config: &api.AfiSafiConfig{Family: fam, Enabled: true},
			PrefixLimits: prefixLimit(n.MaxPrefixes)})
	}
	p.Timers, p.GracefulRestart = applyTimersGR(n.HoldTime, n.KeepaliveInterval, n.ConnectRetry, n.RestartTime, n.GracefulRestart, p.AfiSafis)
	return p
}

// addPeer adds n. GoBGP does not report TCP MD5 failures: on its
// listening sockets it only logs them (the log adapter catches that and it
// is returned as an error here), and on the sockets it dials from it only
// fails the connect attempt. So the key is first tried on a socket of our
// own (checkMD5), then the listener result is checked.
func (s *Speaker) addPeer(ctx context.Context, n Neighbor) error {
	p := s.apiPeer(n)
	addr := p.Conf.NeighborAddress
	if n.Password != "" {
		if err := checkMD5(n.Address, n.Password); err != nil {
			return fmt.Errorf("bgp: peer %s: TCP MD5 unavailable: %w", addr, err)
		}
	}
	s.takeMD5Failure(addr)
	srv := s.srv
	if err := s.call(ctx, "add peer "+addr, func() error {
		return srv.AddPeer(context.Background(), &api.AddPeerRequest{Peer: p})
	}); err != nil {
		return err
	}
	// In GoBGP now, even if the key check below fails: a later
	// Reconfigure must be able to delete it.
	if s.added == nil {
		s.added = make(map[netip.Addr]bool)
	}
	s.added[n.Address.Unmap()] = true
	if e, failed := s.takeMD5Failure(addr); failed {
		hint := ""
		if strings.Contains(e, "protocol not available") {
			hint = " (the listener is Multipath TCP, Go's default since 1.24, which cannot do MD5: build the binary with //go:debug multipathtcp=0)"
		}
		return fmt.Errorf("bgp: peer %s: TCP MD5 key not installed on the listener: %s%s", addr, e, hint)
	}
	s.log.Info("peer added", "peer", addr, "asn", n.ASN, "families", famNames(n.families()),
		"passive", n.Passive, "md5", n.Password != "")
	return nil
}

// PeerChange is a session that came up or went down.
type PeerChange struct {
	Address  netip.Addr
	From, To string // FSM state names
	// Up: the session is established; otherwise it was and is no longer.
	Up bool
	// Reason is why a session went down, as GoBGP reports it, if known.
	Reason string
}

// watchPeers registers the peer-state watch. Every session state change,
// including a peer that resets and comes back, is a wake-up.
func (s *Speaker) watchPeers(ctx, wctx context.Context, srv *server.BgpServer) error {
	cb := server.WatchEventMessageCallbacks{OnPeerUpdate: func(ev *apiutil.WatchEventMessage_PeerEvent, _ time.Time) { s.onPeerEvent(ev) }}
	return s.call(ctx, "watch peers", func() error {
		return srv.WatchEvent(wctx, cb, server.WatchPeer())
	})
}

func (s *Speaker) onPeerEvent(pe *apiutil.WatchEventMessage_PeerEvent) {
	if pe.Type != apiutil.PEER_EVENT_INIT && pe.Type != apiutil.PEER_EVENT_STATE {
		return
	}
	addr, st := pe.Peer.State.NeighborAddress.String(), pe.Peer.State.SessionState
	now := time.Now()
	s.peers.mu.Lock()
	info, known := s.peers.state[addr]
	if !known {
		info = &peerInfo{state: st, since: now, firstSeenAt: now}
		s.peers.state[addr] = info
	}
	old := info.state
	if known && old != st {
		info.state, info.since = st, now
		if old == gobgp.BGP_FSM_ESTABLISHED {
			info.flaps++
		}
	}
	if msg := pe.Peer.State.DisconnectMessage; msg != "" && st != gobgp.BGP_FSM_ESTABLISHED && sessionError(pe.Peer.State.DisconnectReason) {
		info.lastErr, info.lastErrAt = msg, now
	}
	// A reset is a session that was up, went down and came back: a
	// neighbor's first session (at start, or added by a reload) is not.
	wasUp := info.everUp
	if st == gobgp.BGP_FSM_ESTABLISHED {
		info.everUp = true
	}
	limited := pe.Peer.State.AdminState == api.PeerState_ADMIN_STATE_PFX_CT && st != gobgp.BGP_FSM_ESTABLISHED
	newlyLimited := limited && !info.prefixLimited
	if pe.Peer.State.AdminState == api.PeerState_ADMIN_STATE_UP {
		info.prefixLimited = false // enabled again, or a new session
	}
	if newlyLimited {
		info.prefixLimited = true
		info.lastErr, info.lastErrAt = prefixLimitError(0), now
	}
	s.peers.mu.Unlock()
	if newlyLimited {
		s.log.Error("session closed: the router sent more routes than its max_prefixes; it stays down",
			"peer", addr, "next", prefixLimitHint)
	}
	if known && old == st {
		return
	}
	if known && wasUp && st == gobgp.BGP_FSM_ESTABLISHED {
		s.restarts.peerUps.Add(1)
	}
	if fn := s.peerChange; fn != nil && (st == gobgp.BGP_FSM_ESTABLISHED || (known && old == gobgp.BGP_FSM_ESTABLISHED)) {
		pc := PeerChange{Address: pe.Peer.State.NeighborAddress, From: fsmStateName(old), To: fsmStateName(st), Up: st == gobgp.BGP_FSM_ESTABLISHED}
		if !pc.Up {
			pc.Reason = pe.Peer.State.DisconnectMessage
		}
		fn(pc)
	}
	go s.refreshDelivery()
	if known {
		s.log.Info("peer state", "peer", addr, "from", fsmStateName(old), "to", fsmStateName(st))
	}
	s.signal()
}

// EstablishedPeers returns how many sessions the peer watch last saw
// established. The reconciler's storm control asks it: while it is 0,
// additions reach no router, and a session that comes up later gets
// GoBGP's own table dump, so there is nothing to pace.
func (s *Speaker) EstablishedPeers() int {
	s.peers.mu.Lock()
	defer s.peers.mu.Unlock()
	n := 0
	for _, st := range s.peers.state {
		if st.state == gobgp.BGP_FSM_ESTABLISHED {
			n++
		}
	}
	return n
}

// Peers lists the neighbors and their session state, sorted by address.
// It is one ListPeer round trip into GoBGP's server loop. The received
// count is a walk of each peer's Adj-RIB-In in GoBGP ((*AdjRib).Count),
// bounded by the neighbor's max_prefixes.
func (s *Speaker) Peers(ctx context.Context) ([]PeerStatus, error) {
	srv, err := s.running()
	if err != nil {
		return nil, err
	}
	var peers []*api.Peer
	if err := s.call(ctx, "list peers", func() error {
		return srv.ListPeer(context.Background(), &api.ListPeerRequest{}, func(p *api.Peer) { peers = append(peers, p) })
	}); err != nil {
		return nil, err
	}
	counts := s.mirror.counts()
	out := make([]PeerStatus, 0, len(peers))
	for _, p := range peers {
		st := PeerStatus{}
		if c := p.Conf; c != nil {
			st.Address, st.ASN, st.Description = c.NeighborAddress, c.PeerAsn, c.Description
		}
		established := false
		if ps := p.State; ps != nil {
			st.State = stateName(ps.SessionState)
			established = ps.SessionState == api.PeerState_SESSION_STATE_ESTABLISHED
		}
		if t := p.Timers; established && t != nil && t.State != nil && t.State.Uptime != nil {
			st.Uptime = time.Since(t.State.Uptime.AsTime()).Truncate(time.Second)
		}
		st.MaxPrefixes = maxLimit(p)
		s.describe(&st, p)
		for _, af := range p.AfiSafis {
			if af.Config == nil || !af.Config.Enabled {
				continue
			}
			f, ok := familyOf(apiutil.ToFamily(af.Config.Family))
			if !ok {
				continue
			}
			st.Families = append(st.Families, f.String())
			if established {
				st.Sent += counts[f]
			}
			if af.State != nil {
				st.Received += int(af.State.Received)
			}
		}
		st.Profile = profile.Generic
		if c := s.hold.classOfPeer(st.Address); c >= 0 {
			st.Profile = restrictive[c].Name
			var fams []flowspec.Family
			for _, f := range st.Families {
				if ff, err := flowspec.ParseFamily(f); err == nil {
					fams = append(fams, ff)
				}
			}
			st.HeldBack = s.hold.heldCount(c, fams)
			if established {
				st.Sent = max(st.Sent-st.HeldBack, 0)
			}
		} else if n, ok := s.neighborProfile(st.Address); ok {
			st.Profile = n
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b PeerStatus) int {
		aa, _ := netip.ParseAddr(a.Address)
		ba, _ := netip.ParseAddr(b.Address)
		return aa.Compare(ba)
	})
	return out, nil
}

// sessionError reports whether GoBGP's reason for a state change says
// what went wrong with a session; others (the idle hold timer running
// out, a new connection, an OPEN received) are the FSM moving on.
func sessionError(r api.PeerState_DisconnectReason) bool {
	switch r {
	case api.PeerState_DISCONNECT_REASON_HOLD_TIMER_EXPIRED,
		api.PeerState_DISCONNECT_REASON_NOTIFICATION_SENT,
		api.PeerState_DISCONNECT_REASON_NOTIFICATION_RECEIVED,
		api.PeerState_DISCONNECT_REASON_READ_FAILED,
		api.PeerState_DISCONNECT_REASON_WRITE_FAILED,
		api.PeerState_DISCONNECT_REASON_INVALID_MSG,
		api.PeerState_DISCONNECT_REASON_BAD_PEER_AS,
		api.PeerState_DISCONNECT_REASON_HARD_RESET:
		return true
	}
	return false
}

// DefaultHintAfter is Config.HintAfter when unset.
const DefaultHintAfter = 30 * time.Second

// describe fills in what the peer watch saw of p's session, and a hint
// when it never came up.
func (s *Speaker) describe(st *PeerStatus, p *api.Peer) {
	s.peers.mu.Lock()
	info, ok := s.peers.state[st.Address]
	var cp peerInfo
	if ok {
		cp = *info
	}
	s.peers.mu.Unlock()
	if !ok {
		return
	}
	st.Since, st.LastError, st.LastErrorAt, st.Flaps = cp.since, cp.lastErr, cp.lastErrAt, cp.flaps
	if cp.prefixLimited || p.GetState().GetAdminState() == api.PeerState_ADMIN_STATE_PFX_CT {
		st.PrefixLimited, st.Hint = true, prefixLimitHint
		st.LastError = prefixLimitError(maxLimit(p))
		return
	}
	after := s.cfg.HintAfter
	if after <= 0 {
		after = DefaultHintAfter
	}
	if cp.everUp || st.State == "established" || time.Since(cp.firstSeenAt) < after {
		return
	}
	md5 := p.GetConf().GetAuthPassword() != ""
	switch {
	case strings.HasPrefix(cp.lastErr, "notification-received"):
		st.Hint = "the router refuses the session (see last error): check the AS numbers, the router's neighbor address for us and its address families"
	case md5 && (st.State == "active" || st.State == "connect"):
		st.Hint = "no TCP connection has completed: with a TCP MD5 password, a key the router does not have (or a different one) looks exactly like this, as does a router that is down or unreachable; compare the keys on both sides"
	case st.State == "active" || st.State == "connect" || st.State == "idle":
		st.Hint = "no TCP connection has completed: is the router up and reachable, and does it have a neighbor for our address (and the port, if not 179)?"
	}
}

// stateName is the session state as operators read it ("established").
func stateName(s api.PeerState_SessionState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "SESSION_STATE_"))
}

func fsmStateName(s gobgp.FSMState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "BGP_FSM_"))
}

func famNames(fs []flowspec.Family) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.String()
	}
	return out
}

// apiFamily is the GoBGP API family of f, for peer configuration.
func (s *Speaker) apiFamily(f flowspec.Family) *api.Family {
	switch f {
	case flowspec.IPv6:
		return s.fam6
	case flowspec.IPv4Unicast:
		return &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	case flowspec.IPv6Unicast:
		return &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
	}
	return s.fam4
}

// neighborProfile returns the profile configured for the neighbor at addr
// when it is not a restrictive one (bird, generic), for Peers.
func (s *Speaker) neighborProfile(addr string) (string, bool) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.cfg.Neighbors {
		if n.Address.Unmap() == a.Unmap() && n.Profile != "" {
			return n.Profile, true
		}
	}
	return "", false
}

// maxLimit is the largest prefix limit of p's families (0: none).
func maxLimit(p *api.Peer) uint32 {
	var m uint32
	for _, af := range p.GetAfiSafis() {
		m = max(m, af.GetPrefixLimits().GetMaxPrefixes())
	}
	return m
}
