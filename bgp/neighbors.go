package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// PeerGroup holds the session settings of dynamic neighbors: routers that
// dial in from an address inside a DynamicNeighbor prefix. Sessions of a
// peer group are always passive.
type PeerGroup struct {
	Name              string
	ASN               uint32
	Families          []flowspec.Family // empty: ipv4-flowspec
	HoldTime          time.Duration
	KeepaliveInterval time.Duration
	MultihopTTL       uint8
	Password          string
	GracefulRestart   bool
	RestartTime       time.Duration
	ConnectRetry      time.Duration
	Description       string
	// Profile is the router profile of every dynamic neighbor of the
	// group (see Neighbor.Profile).
	Profile string
	// MaxPrefixes: see Neighbor.MaxPrefixes.
	MaxPrefixes uint32
}

// DynamicNeighbor accepts sessions from any address in Prefix with the
// settings of PeerGroup.
type DynamicNeighbor struct {
	Prefix    netip.Prefix
	PeerGroup string
}

// applyTimersGR sets the timer and graceful-restart parts shared by peers
// and peer groups. With graceful restart the peer starts as "locally
// restarting" (R bit, and the F bit for every family): see the package
// doc.
func applyTimersGR(hold, keepalive, retry, restart time.Duration, gr bool, fams []*api.AfiSafi) (*api.Timers, *api.GracefulRestart) {
	if retry <= 0 {
		retry = DefaultConnectRetry
	}
	tc := &api.TimersConfig{
		ConnectRetry:           uint64(max(retry/time.Second, 1)),
		IdleHoldTimeAfterReset: uint64(max(retry/time.Second, 1)),
	}
	if hold > 0 {
		tc.HoldTime = uint64(hold / time.Second)
		tc.KeepaliveInterval = max(tc.HoldTime/3, 1)
	}
	if keepalive > 0 {
		tc.KeepaliveInterval = uint64(keepalive / time.Second)
	}
	timers := &api.Timers{Config: tc}
	if !gr {
		return timers, nil
	}
	for _, af := range fams {
		af.MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
	}
	return timers, &api.GracefulRestart{
		Enabled:         true,
		RestartTime:     uint32(restart / time.Second),
		DeferralTime:    uint32(grDeferral / time.Second),
		LocalRestarting: true,
	}
}

func (s *Speaker) apiPeerGroup(g PeerGroup) *api.PeerGroup {
	p := &api.PeerGroup{
		Conf:      &api.PeerGroupConf{PeerGroupName: g.Name, PeerAsn: g.ASN, AuthPassword: g.Password, Description: g.Description},
		Transport: &api.Transport{PassiveMode: true},
	}
	fams := g.Families
	if len(fams) == 0 {
		fams = []flowspec.Family{flowspec.IPv4}
	}
	for _, f := range fams {
		p.AfiSafis = append(p.AfiSafis, &api.AfiSafi{Config: &api.AfiSafiConfig{Family: s.apiFamily(f), Enabled: true},
			PrefixLimits: prefixLimit(g.MaxPrefixes)})
	}
	if g.MultihopTTL > 0 {
		p.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(g.MultihopTTL)}
	}
	p.Timers, p.GracefulRestart = applyTimersGR(g.HoldTime, g.KeepaliveInterval, g.ConnectRetry, g.RestartTime, g.GracefulRestart, p.AfiSafis)
	return p
}

// addDynamic adds the peer groups and dynamic neighbors of the
// configuration. A dynamic neighbor naming an unknown group is refused
// here (GoBGP v3 panicked on it in its server loop).
func (s *Speaker) addDynamic(ctx context.Context, groups []PeerGroup, dyn []DynamicNeighbor) error {
	known := map[string]bool{}
	for _, g := range groups {
		known[g.Name] = true
	}
	for _, d := range dyn {
		if !known[d.PeerGroup] {
			return fmt.Errorf("bgp: dynamic neighbor %s: unknown peer group %q", d.Prefix, d.PeerGroup)
		}
		if !d.Prefix.IsValid() {
			return fmt.Errorf("bgp: dynamic neighbor: invalid prefix")
		}
	}
	for _, g := range groups {
		pg := s.apiPeerGroup(g)
		if err := s.call(ctx, "add peer group "+g.Name, func() error {
			return s.srv.AddPeerGroup(context.Background(), &api.AddPeerGroupRequest{PeerGroup: pg})
		}); err != nil {
			return err
		}
	}
	for _, d := range dyn {
		req := &api.AddDynamicNeighborRequest{DynamicNeighbor: &api.DynamicNeighbor{Prefix: d.Prefix.Masked().String(), PeerGroup: d.PeerGroup}}
		if err := s.call(ctx, "add dynamic neighbor "+d.Prefix.String(), func() error {
			return s.srv.AddDynamicNeighbor(context.Background(), req)
		}); err != nil {
			return err
		}
		s.log.Info("dynamic neighbor added", "prefix", d.Prefix, "peer_group", d.PeerGroup)
	}
	return nil
}

// deleteDynamic removes dynamic neighbors and then their peer groups.
func (s *Speaker) deleteDynamic(ctx context.Context, groups []PeerGroup, dyn []DynamicNeighbor) error {
	var errs []error
	for _, d := range dyn {
		req := &api.DeleteDynamicNeighborRequest{Prefix: d.Prefix.Masked().String(), PeerGroup: d.PeerGroup}
		errs = append(errs, s.call(ctx, "delete dynamic neighbor "+d.Prefix.String(), func() error {
			return s.srv.DeleteDynamicNeighbor(context.Background(), req)
		}))
	}
	for _, g := range groups {
		errs = append(errs, s.call(ctx, "delete peer group "+g.Name, func() error {
			return s.srv.DeletePeerGroup(context.Background(), &api.DeletePeerGroupRequest{Name: g.Name})
		}))
	}
	return errors.Join(errs...)
}

// deletePeer removes a configured neighbor; its session ends with a Cease.
func (s *Speaker) deletePeer(ctx context.Context, n Neighbor) error {
	if !s.added[n.Address.Unmap()] {
		return nil // held back, never added (Config.HoldPeers)
	}
	addr := n.Address.Unmap().String()
	if err := s.call(ctx, "delete peer "+addr, func() error {
		return s.srv.DeletePeer(context.Background(), &api.DeletePeerRequest{Address: addr})
	}); err != nil {
		return err
	}
	delete(s.added, n.Address.Unmap())
	// Forgotten: if a reload adds it back, its next session is a first
	// one, not a reset.
	s.peers.mu.Lock()
	delete(s.peers.state, addr)
	s.peers.mu.Unlock()
	s.log.Info("peer deleted", "peer", addr)
	return nil
}

// NeighborChanges is what Reconfigure did.
type NeighborChanges struct {
	Added, Removed, Changed, Unchanged []netip.Addr
	// DynamicChanged is set when the peer groups or dynamic neighbors
	// changed and were replaced (sessions of dynamic neighbors restart).
	DynamicChanged bool
}

// Reconfigure makes the speaker's neighbors those of cfg (Neighbors,
// PeerGroups and DynamicNeighbors; other fields of cfg are ignored, they
// need a restart). Only neighbors whose settings changed are touched: new
// ones are added, removed ones deleted, changed ones deleted and added
// again; the sessions of unchanged neighbors stay up. Peer groups and
// dynamic neighbors are replaced as a whole when any of them changed.
// On error, what was applied stays applied and the speaker's view of its
// configuration matches GoBGP's.
func (s *Speaker) Reconfigure(ctx context.Context, cfg Config) (NeighborChanges, error) {
	var ch NeighborChanges
	next := s.cfg
	next.Neighbors, next.PeerGroups, next.DynamicNeighbors = cfg.Neighbors, cfg.PeerGroups, cfg.DynamicNeighbors
	if err := next.validate(); err != nil {
		return ch, err
	}
	if _, err := s.running(); err != nil {
		return ch, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()

	// Router profiles first (holdback.go, point 5): the rules' tags for
	// the profiles now in use, and every neighbor, old or new, in its
	// profile's neighbor set before any session is added.
	pc, use := classesOf(&next)
	if use != s.hold.inUse() {
		if err := s.retag(ctx, use, pc); err != nil {
			return ch, err
		}
	} else {
		s.hold.setPeers(pc)
	}
	prev := s.cfg
	if _, err := s.syncNeighborSets(ctx, &prev, &next); err != nil {
		return ch, err
	}

	old := map[netip.Addr]Neighbor{}
	for _, n := range s.cfg.Neighbors {
		old[n.Address.Unmap()] = n
	}
	want := map[netip.Addr]Neighbor{}
	for _, n := range cfg.Neighbors {
		want[n.Address.Unmap()] = n
	}
	cur := slices.Clone(s.cfg.Neighbors)
	remove := func(a netip.Addr) {
		cur = slices.DeleteFunc(cur, func(n Neighbor) bool { return n.Address.Unmap() == a })
	}
	defer func() { s.cfg.Neighbors = cur }()

	for a, n := range old {
		if _, ok := want[a]; ok {
			continue
		}
		if err := s.deletePeer(ctx, n); err != nil {
			return ch, err
		}
		remove(a)
		ch.Removed = append(ch.Removed, a)
	}
	for _, n := range cfg.Neighbors {
		a := n.Address.Unmap()
		o, existed := old[a]
		switch {
		case existed && reflect.DeepEqual(o, n):
			ch.Unchanged = append(ch.Unchanged, a)
			continue
		case existed:
			if err := s.deletePeer(ctx, o); err != nil {
				return ch, err
			}
			remove(a)
			ch.Changed = append(ch.Changed, a)
		default:
			ch.Added = append(ch.Added, a)
		}
		if !s.holds(n.GracefulRestart) { // else StartPeers adds it
			if err := s.addPeer(ctx, n); err != nil {
				return ch, err
			}
		}
		cur = append(cur, n)
	}

	if !reflect.DeepEqual(s.cfg.PeerGroups, cfg.PeerGroups) || !reflect.DeepEqual(s.cfg.DynamicNeighbors, cfg.DynamicNeighbors) {
		ch.DynamicChanged = true
		if s.dynAdded {
			if err := s.deleteDynamic(ctx, s.cfg.PeerGroups, s.cfg.DynamicNeighbors); err != nil {
				return ch, err
			}
			s.dynAdded = false
		}
		s.cfg.PeerGroups, s.cfg.DynamicNeighbors = nil, nil
		if !s.holds(slices.ContainsFunc(cfg.PeerGroups, func(g PeerGroup) bool { return g.GracefulRestart })) {
			if err := s.addDynamic(ctx, cfg.PeerGroups, cfg.DynamicNeighbors); err != nil {
				return ch, err
			}
			s.dynAdded = true
		}
		s.cfg.PeerGroups, s.cfg.DynamicNeighbors = cfg.PeerGroups, cfg.DynamicNeighbors
	}
	for _, l := range [][]netip.Addr{ch.Added, ch.Removed, ch.Changed, ch.Unchanged} {
		slices.SortFunc(l, netip.Addr.Compare)
	}
	// A reload is the operator's word that a router closed at its prefix
	// limit was fixed (changed neighbors were added afresh already).
	unchanged := make([]string, 0, len(ch.Unchanged))
	for _, a := range ch.Unchanged {
		unchanged = append(unchanged, a.String())
	}
	s.enableLimited(ctx, unchanged)
	// Now only the new configuration's members; a changed neighbor that
	// came up while it was in both its old and new profile's set gets
	// the export policy applied again.
	removed, err := s.syncNeighborSets(ctx, &next)
	if err != nil {
		return ch, err
	}
	if removed {
		resets := make([]string, 0, len(ch.Changed))
		for _, a := range ch.Changed {
			resets = append(resets, a.String())
		}
		if ch.DynamicChanged {
			resets = []string{"all"}
		}
		for _, a := range resets {
			if err := s.softResetOut(ctx, a); err != nil {
				s.log.Warn("soft reset out after a router profile change", "peer", a, "error", err)
			}
		}
	}
	s.log.Info("neighbors reconfigured", "added", ch.Added, "removed", ch.Removed, "changed", ch.Changed,
		"unchanged", len(ch.Unchanged), "dynamic_changed", ch.DynamicChanged)
	return ch, nil
}

// retag makes the hold-back state that of the profiles in use and
// announces again every rule of the mirror whose tags change. Called
// with mu held, before any neighbor of the new configuration is added.
func (s *Speaker) retag(ctx context.Context, use uint8, pc peerClasses) error {
	s.tagMu.Lock()
	defer s.tagMu.Unlock()
	// GoBGP's RIB, not the mirror: the mirror may not show yet a path
	// Announce handed over just before.
	all, err := s.ribRules(ctx, s.srv)
	if err != nil {
		return fmt.Errorf("bgp: reading the RIB to tag rules for the router profiles now in use: %w", err)
	}
	var rules []flowspec.Rule
	for _, r := range all {
		if !r.Match.Family().IsRoute() {
			rules = append(rules, r)
		}
	}
	old := make(map[flowspec.Match]uint8, len(rules))
	for _, r := range rules {
		old[r.Match] = s.hold.maskOf(r.Match)
	}
	s.hold.reset(use, pc, true)
	for _, r := range rules {
		if !r.Match.Family().IsRoute() {
			s.hold.place(r)
		}
	}
	// Rules some peer loses go first, rules some peer gains after: a
	// capped router never holds more than its cap in between.
	var lose, gain []*apiutil.Path
	for _, r := range rules {
		if r.Match.Family().IsRoute() {
			continue
		}
		mask := s.hold.maskOf(r.Match)
		if mask == old[r.Match] {
			continue
		}
		p, err := s.flowspecPath(r, mask)
		if err != nil {
			return err
		}
		if mask&^old[r.Match] != 0 {
			lose = append(lose, p)
		} else {
			gain = append(gain, p)
		}
	}
	paths := append(lose, gain...)
	for len(paths) > 0 {
		n := min(len(paths), batchSize)
		for _, err := range s.addPaths(ctx, s.srv, paths[:n]) {
			if err != nil {
				return fmt.Errorf("bgp: tagging rules for the router profiles now in use: %w", err)
			}
		}
		paths = paths[n:]
	}
	s.log.Info("router profiles in use changed: rules tagged again", "rules", len(old))
	return nil
}
