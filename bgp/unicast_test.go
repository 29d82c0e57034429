package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"github.com/ribkeeper/ribkeeper/flowspec"
)

func parseRule(t testing.TB, s string) flowspec.Rule {
	t.Helper()
	r, err := flowspec.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A route without a next hop gets the site's; the mirror reports it as
// announced until the site next hop changes, then with the actual one, so
// the reconciler sees drift.
func TestRouteSiteNextHop(t *testing.T) {
	nh4 := netip.MustParseAddr("192.0.2.1")
	s := startSpeaker(t, Config{RouteNextHop4: nh4})
	ctx := context.Background()
	r4 := parseRule(t, "route 203.0.113.7/32 then blackhole")
	r6 := parseRule(t, "route 2001:db8::7/128 then blackhole")
	explicit := parseRule(t, "route 203.0.113.8/32 then blackhole next-hop 192.0.2.9")

	if err := announceOne(s, ctx, r4); err != nil {
		t.Fatal(err)
	}
	if err := announceOne(s, ctx, explicit); err != nil {
		t.Fatal(err)
	}
	if err := announceOne(s, ctx, r6); !errors.Is(err, ErrNoNextHop) {
		t.Fatalf("IPv6 route without a site next hop: %v", err)
	}
	eventually(t, 5*time.Second, "routes in the mirror", func() bool {
		m := mirrorOf(s)
		return m[r4.Match] == r4.Action && m[explicit.Match] == explicit.Action
	})

	gen := s.Generation()
	s.SetRouteNextHops(netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("100::1"))
	if s.Generation() == gen {
		t.Error("a next-hop change left the mirror generation unchanged: a reconciler would skip the drift")
	}
	m := mirrorOf(s)
	if got, want := m[r4.Match], r4.Action.WithNextHop(nh4); got != want {
		t.Errorf("after a next-hop change the mirror shows %v, want %v", got, want)
	}
	if m[explicit.Match] != explicit.Action {
		t.Errorf("explicit next hop: %v", m[explicit.Match])
	}
	// Re-announcing (what the reconciler does) converges again.
	if err := announceOne(s, ctx, r4); err != nil {
		t.Fatal(err)
	}
	if err := announceOne(s, ctx, r6); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "re-announced routes", func() bool {
		m := mirrorOf(s)
		return m[r4.Match] == r4.Action && m[r6.Match] == r6.Action
	})
	for _, r := range []flowspec.Rule{r4, r6, explicit} {
		if err := withdrawOne(s, ctx, r.Match); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, "empty mirror", func() bool { return len(mirrorOf(s)) == 0 })
}

// A route announced with a next hop of its own that equals the site's is
// reported with it, and the same route announced again without one is
// reported without: the mirror remembers which routes named their next
// hop, and only those (a million "then blackhole" routes cost no entry).
func TestRouteOwnNextHopEqualToSite(t *testing.T) {
	nh4 := netip.MustParseAddr("192.0.2.1")
	s := startSpeaker(t, Config{RouteNextHop4: nh4})
	ctx := context.Background()
	open := parseRule(t, "route 203.0.113.9/32 then blackhole")
	own := parseRule(t, "route 203.0.113.9/32 then blackhole next-hop 192.0.2.1")
	if open.Action == own.Action {
		t.Fatal("test rules: the two actions must differ")
	}
	for _, r := range []flowspec.Rule{own, open, own} {
		if err := announceOne(s, ctx, r); err != nil {
			t.Fatal(err)
		}
		// The path on the wire is the same each time: what the mirror
		// reports must follow what was announced last.
		eventually(t, 5*time.Second, "mirror shows "+r.String(), func() bool {
			a, present, ok := s.Path(r.Match)
			return ok && present && a == r.Action
		})
	}
	var others []flowspec.Rule
	for i := range 100 {
		others = append(others, parseRule(t, fmt.Sprintf("route 198.51.100.%d/32 then blackhole", i)))
	}
	for _, err := range s.Announce(ctx, others) {
		if err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, "routes in the mirror", func() bool { return s.Len() == 101 })
	for _, r := range others {
		if a, present, _ := s.Path(r.Match); !present || a != r.Action {
			t.Fatalf("%s: mirror shows %v (present %v)", r.Match, a, present)
		}
	}
	s.routes.mu.Lock()
	n := len(s.routes.explicit)
	s.routes.mu.Unlock()
	if n != 1 {
		t.Errorf("routes remembered: %d, want 1 (the one with a next hop of its own)", n)
	}
	if err := withdrawOne(s, ctx, own.Match); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "withdrawn", func() bool { _, present, _ := s.Path(own.Match); return !present })
	s.routes.mu.Lock()
	n = len(s.routes.explicit)
	s.routes.mu.Unlock()
	if n != 0 {
		t.Errorf("routes remembered after the withdrawal: %d, want 0", n)
	}
}

// BIRD receives the RTBH route with both communities and the site next
// hop in its unicast tables, and loses it on withdrawal.
func TestRouteInBIRD(t *testing.T) {
	birdtest.Binary(t)
	port := freePort(t, "127.0.0.1")
	br := birdtest.Start(t, birdtest.Options{Address: "127.0.0.2", ASN: 65001,
		Peers: []birdtest.Peer{{Address: "127.0.0.1", Port: int(port), ASN: 65000}}})
	s := startSpeaker(t, Config{ListenPort: port, ListenAddresses: []string{"127.0.0.1"},
		RouteNextHop4: netip.MustParseAddr("192.0.2.1"), RouteNextHop6: netip.MustParseAddr("100::1"),
		Neighbors: []Neighbor{{Address: netip.MustParseAddr("127.0.0.2"), ASN: 65001, Port: uint16(br.Port),
			LocalAddress: netip.MustParseAddr("127.0.0.1"), MultihopTTL: 2,
			Families: []flowspec.Family{flowspec.IPv4, flowspec.IPv4Unicast, flowspec.IPv6Unicast}}}})
	eventually(t, 20*time.Second, "session", func() bool { return br.Established(0) })

	ctx := context.Background()
	r4 := parseRule(t, "route 203.0.113.7/32 then blackhole")
	r6 := parseRule(t, "route 2001:db8::7/128 then blackhole")
	for _, r := range []flowspec.Rule{r4, r6} {
		if err := announceOne(s, ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	check := func(table, net, nh string) {
		routes := br.WaitRoutes(t, table, 10*time.Second, net, func(m map[string]birdtest.Route) bool { _, ok := m[net]; return ok })
		rt := routes[net]
		c := rt.Attrs["BGP.community"]
		if !strings.Contains(c, "(65535,666)") || !strings.Contains(c, "(65535,65281)") {
			t.Errorf("%s communities = %q", net, c)
		}
		if got := rt.Attrs["BGP.next_hop"]; !strings.Contains(got, nh) {
			t.Errorf("%s next hop = %q, want %s (attrs %v)", net, got, nh, rt.Attrs)
		}
	}
	check("up4", "203.0.113.7/32", "192.0.2.1")
	check("up6", "2001:db8::7/128", "100::1")

	for _, r := range []flowspec.Rule{r4, r6} {
		if err := withdrawOne(s, ctx, r.Match); err != nil {
			t.Fatal(err)
		}
	}
	br.WaitRoutes(t, "up4", 10*time.Second, "withdrawal", func(m map[string]birdtest.Route) bool { _, ok := m["203.0.113.7/32"]; return !ok })
	br.WaitRoutes(t, "up6", 10*time.Second, "withdrawal", func(m map[string]birdtest.Route) bool { _, ok := m["2001:db8::7/128"]; return !ok })
}

// IPv4 routes with one action share their attributes (one COMMUNITIES
// attribute for a million blackholes, not one each); another action has
// its own; an IPv6 route's MP_REACH carries its own NLRI.
func TestRouteAttributesShared(t *testing.T) {
	var c attrCache
	nh4 := netip.MustParseAddr("192.0.2.1")
	path := func(text string) []string {
		t.Helper()
		r := parseRule(t, text)
		a := r.Action
		if _, own := a.NextHop(); !own {
			if r.Match.Family() == flowspec.IPv4Unicast {
				a = a.WithNextHop(nh4)
			} else {
				a = a.WithNextHop(netip.MustParseAddr("2001:db8::1"))
			}
		}
		p, err := routePath(&c, r.Match, a)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, len(p.Attrs))
		for i, at := range p.Attrs {
			out[i] = fmt.Sprintf("%p %v", at, at)
		}
		return out
	}
	a, b := path("route 203.0.113.7/32 then blackhole"), path("route 203.0.113.8/32 then blackhole")
	if len(a) != 3 || strings.Join(a, "|") != strings.Join(b, "|") {
		t.Errorf("two blackholes: attributes\n%v\n%v\nwant the same three objects", a, b)
	}
	other := path("route 203.0.113.9/32 then blackhole community 65000:1")
	if other[2] == a[2] || !strings.Contains(other[2], "65000:1") {
		t.Errorf("another action's communities %v, the blackholes' %v", other[2], a[2])
	}
	v6a, v6b := path("route 2001:db8::7/128 then blackhole"), path("route 2001:db8::8/128 then blackhole")
	if v6a[1] == v6b[1] || !strings.Contains(v6a[1], "2001:db8::7") || !strings.Contains(v6b[1], "2001:db8::8") {
		t.Errorf("IPv6 MP_REACH: %v, %v: each must carry its own route", v6a[1], v6b[1])
	}
}
