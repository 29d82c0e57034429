package bgp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Routes (RTBH): unicast paths with standard communities and a next hop.
//
// A route's action may leave the next hop open; it then means this site's
// next hop (Config.RouteNextHop4/6, SetRouteNextHops), filled in at
// announce time. So that the reconciler compares like with like, the
// mirror reports a path that carries the current site next hop without
// it (the action it was announced with), unless its route was announced
// with a next hop of its own; once the site next hop changes, the path is
// reported with its actual, explicit next hop, which differs from the
// desired action: the reconciler sees attribute drift and re-announces
// with the new next hop.
//
// Only routes announced with a next hop of their own are remembered: a
// feed of a million "then blackhole" routes costs no entry per route
// here (a map entry per route was ~60 B, 60 MB at a million).

// ErrNoNextHop is returned for a route whose action has no next hop when
// the site has none configured for its family. It is not terminal: a
// configuration reload that sets one makes the next attempt succeed.
var ErrNoNextHop = errors.New("bgp: route has no next hop and none is configured for this site ([rtbh] next_hop_ipv4/next_hop_ipv6)")

// routeState is the site next hops and the routes last announced with a
// next hop of their own.
type routeState struct {
	mu       sync.Mutex
	nh4      netip.Addr
	nh6      netip.Addr
	explicit map[flowspec.Match]struct{}
}

func (rs *routeState) init(nh4, nh6 netip.Addr) {
	rs.nh4, rs.nh6 = nh4, nh6
	rs.explicit = make(map[flowspec.Match]struct{})
}

// site returns the site next hop for family f, if there is one.
func (rs *routeState) site(f flowspec.Family) netip.Addr {
	if f == flowspec.IPv6Unicast {
		return rs.nh6
	}
	return rs.nh4
}

// fill returns a with the site next hop for family f when a has none.
func (rs *routeState) fill(f flowspec.Family, a flowspec.Action) (flowspec.Action, bool) {
	if _, ok := a.NextHop(); ok {
		return a, true
	}
	nh := rs.site(f)
	if !nh.IsValid() {
		return a, false
	}
	return a.WithNextHop(nh), true
}

// view maps the action found in the RIB for route m to the action the
// reconciler announced: without its next hop when that is the current
// site next hop and m was not announced with a next hop of its own.
func (rs *routeState) view(m flowspec.Match, actual flowspec.Action) flowspec.Action {
	nh, ok := actual.NextHop()
	if !ok {
		return actual
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if _, own := rs.explicit[m]; own || nh != rs.site(m.Family()).Unmap() {
		return actual
	}
	return actual.WithNextHop(netip.Addr{})
}

// SetRouteNextHops changes the site next hops of routes whose action
// leaves the next hop open (a zero Addr: none). Routes announced with the
// old next hop then show up as changed, so the reconciler re-announces
// them.
func (s *Speaker) SetRouteNextHops(nh4, nh6 netip.Addr) {
	s.routes.mu.Lock()
	changed := s.routes.nh4 != nh4 || s.routes.nh6 != nh6
	s.routes.nh4, s.routes.nh6 = nh4, nh6
	s.routes.mu.Unlock()
	if changed {
		// What Paths reports changed although the RIB did not: readers
		// that skip work while the generation stands still must look.
		s.mirror.mu.Lock()
		s.mirror.gen++
		s.mirror.markAll()
		s.mirror.mu.Unlock()
		s.log.Info("route next hops changed", "next_hop_ipv4", nh4, "next_hop_ipv6", nh6)
		s.signal()
	}
}

// routeAnnouncePath checks route r, fills in the site next hop and builds
// its GoBGP path.
func (s *Speaker) routeAnnouncePath(r flowspec.Rule) (*apiutil.Path, error) {
	if !r.IsValid() {
		return nil, &RefusedError{Match: r.Match, Reason: "invalid route (zero prefix, or an action that is not a route action of the route's family)"}
	}
	s.routes.mu.Lock()
	a, ok := s.routes.fill(r.Match.Family(), r.Action)
	s.routes.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("route %s: %w", r.Match, ErrNoNextHop)
	}
	if nh, _ := a.NextHop(); flowspec.RouteFamily(nh) != r.Match.Family() {
		return nil, fmt.Errorf("route %s: site next hop %s is of the other family: %w", r.Match, nh, ErrNoNextHop)
	}
	p, err := routePath(&s.attrs, r.Match, a)
	if err != nil {
		return nil, &RefusedError{Match: r.Match, Reason: err.Error()}
	}
	// Record before adding: the watch may deliver the path before AddPath
	// returns.
	s.routes.mu.Lock()
	if _, own := r.Action.NextHop(); own {
		s.routes.explicit[r.Match] = struct{}{}
	} else if len(s.routes.explicit) > 0 {
		delete(s.routes.explicit, r.Match)
	}
	s.routes.mu.Unlock()
	return p, nil
}

// forget drops what routes ms were announced with, after their withdrawal.
func (rs *routeState) forget(ms []flowspec.Match) {
	if len(ms) == 0 {
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.explicit) == 0 {
		return
	}
	for _, m := range ms {
		delete(rs.explicit, m)
	}
}

// routePath builds the GoBGP path of route m with action a (next hop
// filled in): ORIGIN IGP, the next hop (GoBGP puts it in NEXT_HOP for
// IPv4 and MP_REACH for IPv6) and COMMUNITIES. As for FlowSpec, no
// AS_PATH: GoBGP adds it per peer. GoBGP keeps a locally originated,
// specified next hop for eBGP peers too.
//
// The attributes of an IPv4 route depend on its action only: they come from
// c (built once per action and shared, as FlowSpec's are), so that a
// million blackholes hold one ORIGIN and one COMMUNITIES attribute between
// them instead of one each. An IPv6 route's MP_REACH carries its NLRI.
func routePath(c *attrCache, m flowspec.Match, a flowspec.Action) (*apiutil.Path, error) {
	nlri, err := nativeNLRI(m)
	if err != nil {
		return nil, err
	}
	if m.Family() == flowspec.IPv4Unicast {
		attrs, err := c.route4(a)
		if err != nil {
			return nil, err
		}
		return &apiutil.Path{Family: gobgpFamily(m.Family()), Nlri: nlri, Attrs: attrs, Age: pathAge()}, nil
	}
	attrs, err := routeAttrs(m.Family(), nlri, a)
	if err != nil {
		return nil, err
	}
	return &apiutil.Path{Family: gobgpFamily(m.Family()), Nlri: nlri, Attrs: attrs, Age: pathAge()}, nil
}

// route4 returns the shared attributes of IPv4 routes with action a.
func (c *attrCache) route4(a flowspec.Action) ([]gobgp.PathAttributeInterface, error) {
	k := attrKey{fam: flowspec.IPv4Unicast, a: a}
	c.mu.Lock()
	defer c.mu.Unlock()
	if attrs, ok := c.m[k]; ok {
		return attrs, nil
	}
	attrs, err := routeAttrs(flowspec.IPv4Unicast, nil, a)
	if err != nil {
		return nil, err
	}
	c.put(k, attrs)
	return attrs, nil
}

// routeAttrs builds the attributes of a route of family f (NLRI nlri)
// with action a; for IPv4 they do not depend on the route (nlri unused).
func routeAttrs(f flowspec.Family, nlri gobgp.NLRI, a flowspec.Action) ([]gobgp.PathAttributeInterface, error) {
	var err error
	nh, _ := a.NextHop()
	var nhAttr gobgp.PathAttributeInterface
	if f == flowspec.IPv4Unicast {
		nhAttr, err = gobgp.NewPathAttributeNextHop(nh)
	} else {
		nhAttr, err = gobgp.NewPathAttributeMpReachNLRI(gobgp.RF_IPv6_UC, []gobgp.PathNLRI{{NLRI: nlri}}, nh)
	}
	if err != nil {
		return nil, fmt.Errorf("next hop %s: %w", nh, err)
	}
	attrs := []gobgp.PathAttributeInterface{gobgp.NewPathAttributeOrigin(0), nhAttr}
	if comms := a.AppendCommunities(nil); len(comms) > 0 {
		vals := make([]uint32, 0, len(comms)/4)
		for i := 0; i+4 <= len(comms); i += 4 {
			vals = append(vals, binary.BigEndian.Uint32(comms[i:]))
		}
		attrs = append(attrs, gobgp.NewPathAttributeCommunities(vals))
	}
	return attrs, nil
}

// decodeRouteAction reads the communities and next hop of a unicast path.
func decodeRouteAction(p *apiutil.Path) (flowspec.Action, error) {
	var comms []byte
	var nh netip.Addr
	for _, at := range p.Attrs {
		switch a := at.(type) {
		case *gobgp.PathAttributeCommunities:
			for _, c := range a.Value {
				comms = binary.BigEndian.AppendUint32(comms, c)
			}
		case *gobgp.PathAttributeNextHop:
			nh = a.Value
		case *gobgp.PathAttributeMpReachNLRI:
			nh = a.Nexthop
		}
	}
	if nh.IsValid() && nh.Unmap().IsUnspecified() {
		nh = netip.Addr{}
	}
	return flowspec.DecodeRouteAction(comms, nh.Unmap())
}
