package bgp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v3/pkg/packet/bgp"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Routes (RTBH): unicast paths with standard communities and a next hop.
//
// A route's action may leave the next hop open; it then means this site's
// next hop (Config.RouteNextHop4/6, SetRouteNextHops), filled in at
// announce time. So that the reconciler compares like with like, the
// mirror reports a route path with the action it was announced with (next
// hop open) as long as the path still carries the current site next hop;
// once the site next hop changes, the path is reported with its actual,
// explicit next hop, which differs from the desired action: the reconciler
// sees attribute drift and re-announces with the new next hop.

var (
	famUnicast4 = &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	famUnicast6 = &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
)

// ErrNoNextHop is returned for a route whose action has no next hop when
// the site has none configured for its family. It is not terminal: a
// configuration reload that sets one makes the next attempt succeed.
var ErrNoNextHop = errors.New("bgp: route has no next hop and none is configured for this site ([rtbh] next_hop_ipv4/next_hop_ipv6)")

// routeState is the site next hops and what each route was announced with.
type routeState struct {
	mu    sync.Mutex
	nh4   netip.Addr
	nh6   netip.Addr
	given map[flowspec.Match]flowspec.Action
}

func (rs *routeState) init(nh4, nh6 netip.Addr) {
	rs.nh4, rs.nh6 = nh4, nh6
	rs.given = make(map[flowspec.Match]flowspec.Action)
}

// fill returns a with the site next hop for family f when a has none.
func (rs *routeState) fill(f flowspec.Family, a flowspec.Action) (flowspec.Action, bool) {
	if _, ok := a.NextHop(); ok {
		return a, true
	}
	nh := rs.nh4
	if f == flowspec.IPv6Unicast {
		nh = rs.nh6
	}
	if !nh.IsValid() {
		return a, false
	}
	return a.WithNextHop(nh), true
}

// view maps the action found in the RIB for route m to the action the
// reconciler announced, when they are equal after filling in the site
// next hop.
func (rs *routeState) view(m flowspec.Match, actual flowspec.Action) flowspec.Action {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	g, ok := rs.given[m]
	if !ok {
		return actual
	}
	if f, ok := rs.fill(m.Family(), g); ok && f == actual {
		return g
	}
	return actual
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

// announceRoute adds or replaces the unicast path of route r.
func (s *Speaker) announceRoute(ctx context.Context, r flowspec.Rule) error {
	if !r.IsValid() {
		return &RefusedError{Match: r.Match, Reason: "invalid route (zero prefix, or an action that is not a route action of the route's family)"}
	}
	srv, err := s.running()
	if err != nil {
		return err
	}
	s.routes.mu.Lock()
	a, ok := s.routes.fill(r.Match.Family(), r.Action)
	s.routes.mu.Unlock()
	if !ok {
		return fmt.Errorf("route %s: %w", r.Match, ErrNoNextHop)
	}
	if nh, _ := a.NextHop(); flowspec.RouteFamily(nh) != r.Match.Family() {
		return fmt.Errorf("route %s: site next hop %s is of the other family: %w", r.Match, nh, ErrNoNextHop)
	}
	// Record before adding: the watch may deliver the path before AddPath
	// returns.
	s.routes.mu.Lock()
	s.routes.given[r.Match] = r.Action
	s.routes.mu.Unlock()
	p := routePath(r.Match, a, false)
	return s.call(ctx, "announce route", func() error {
		_, err := srv.AddPath(context.Background(), &api.AddPathRequest{TableType: api.TableType_GLOBAL, Path: p})
		return err
	})
}

// withdrawRoute deletes the unicast path of route m.
func (s *Speaker) withdrawRoute(ctx context.Context, m flowspec.Match) error {
	srv, err := s.running()
	if err != nil {
		return err
	}
	p := routePath(m, flowspec.Action{}, true)
	err = s.call(ctx, "withdraw route", func() error {
		return srv.DeletePath(context.Background(), &api.DeletePathRequest{TableType: api.TableType_GLOBAL, Family: p.Family, Path: p})
	})
	if err == nil {
		s.routes.mu.Lock()
		delete(s.routes.given, m)
		s.routes.mu.Unlock()
	}
	return err
}

// routePath builds the api.Path of route m in wire form: ORIGIN IGP,
// NEXT_HOP (IPv4) or MP_REACH_NLRI (IPv6) with a's next hop, and
// COMMUNITIES. As for FlowSpec, no AS_PATH: GoBGP adds it per peer.
// GoBGP keeps a locally originated, specified next hop for eBGP peers too.
func routePath(m flowspec.Match, a flowspec.Action, withdraw bool) *api.Path {
	fam := famUnicast4
	if m.Family() == flowspec.IPv6Unicast {
		fam = famUnicast6
	}
	buf := make([]byte, 0, 128)
	buf = m.AppendTo(buf)
	nlri := buf[:len(buf):len(buf)]

	start := len(buf)
	buf = append(buf, 0x40, 1, 1, 0) // ORIGIN IGP
	attrs := [][]byte{buf[start:len(buf):len(buf)]}

	nh, _ := a.NextHop()
	switch {
	case !nh.IsValid() && m.Family() == flowspec.IPv4Unicast:
		nh = netip.IPv4Unspecified()
	case !nh.IsValid():
		nh = netip.IPv6Unspecified()
	}
	start = len(buf)
	if m.Family() == flowspec.IPv4Unicast {
		buf = append(buf, 0x40, 3, 4) // NEXT_HOP, well-known transitive
		buf, _ = nh.AppendBinary(buf)
	} else {
		mpLen := 2 + 1 + 1 + 16 + 1 + m.Len()
		buf = appendAttrHdr(buf, 0x80, 14, mpLen)
		buf = append(buf, 0, 2, 1, 16)
		buf, _ = nh.AppendBinary(buf)
		buf = append(buf, 0)
		buf = m.AppendTo(buf)
	}
	attrs = append(attrs, buf[start:len(buf):len(buf)])

	if comms := a.AppendCommunities(nil); !withdraw && len(comms) > 0 {
		start = len(buf)
		buf = appendAttrHdr(buf, 0xc0, 8, len(comms)) // COMMUNITIES, optional transitive
		buf = append(buf, comms...)
		attrs = append(attrs, buf[start:len(buf):len(buf)])
	}
	return &api.Path{Family: fam, NlriBinary: nlri, PattrsBinary: attrs, IsWithdraw: withdraw}
}

// decodeRouteAction reads the communities and next hop of a unicast path.
func decodeRouteAction(p *api.Path) (flowspec.Action, error) {
	attrs, err := apiutil.GetNativePathAttributes(p)
	if err != nil {
		return flowspec.Action{}, err
	}
	var comms []byte
	var nh netip.Addr
	for _, at := range attrs {
		switch a := at.(type) {
		case *gobgp.PathAttributeCommunities:
			for _, c := range a.Value {
				comms = binary.BigEndian.AppendUint32(comms, c)
			}
		case *gobgp.PathAttributeNextHop:
			nh, _ = netip.AddrFromSlice(a.Value)
		case *gobgp.PathAttributeMpReachNLRI:
			nh, _ = netip.AddrFromSlice(a.Nexthop)
		}
	}
	if nh.IsValid() && nh.Unmap().IsUnspecified() {
		nh = netip.Addr{}
	}
	return flowspec.DecodeRouteAction(comms, nh.Unmap())
}

// pathAction decodes the action of a local path of family fam.
func pathAction(fam flowspec.Family, p *api.Path) (flowspec.Action, error) {
	if fam.IsRoute() {
		return decodeRouteAction(p)
	}
	return decodeAction(p)
}

// apiFamily is the GoBGP family of f.
func (s *Speaker) apiFamily(f flowspec.Family) *api.Family {
	switch f {
	case flowspec.IPv6:
		return s.fam6
	case flowspec.IPv4Unicast:
		return famUnicast4
	case flowspec.IPv6Unicast:
		return famUnicast6
	}
	return s.fam4
}

// routeFamilyOf maps a GoBGP unicast family to a route family.
func routeFamilyOf(f *api.Family) (flowspec.Family, bool) {
	if f == nil || f.Safi != api.Family_SAFI_UNICAST {
		return 0, false
	}
	switch f.Afi {
	case api.Family_AFI_IP:
		return flowspec.IPv4Unicast, true
	case api.Family_AFI_IP6:
		return flowspec.IPv6Unicast, true
	}
	return 0, false
}
