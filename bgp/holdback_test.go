package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/profile"
)

func parseMatch(t testing.TB, s string) flowspec.Match {
	t.Helper()
	m, err := flowspec.ParseMatch(flowspec.IPv4, s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// globalPaths counts the local paths of fam in GoBGP's global RIB,
// tombstones included, and how many are tombstones.
func globalPaths(t *testing.T, s *Speaker, fam flowspec.Family) (all, tombs int) {
	t.Helper()
	err := s.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: gobgpFamily(fam)},
		func(_ gobgp.NLRI, ps []*apiutil.Path) {
			for _, p := range ps {
				all++
				if s.isTombstone(p.Attrs) {
					tombs++
				}
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	return all, tombs
}

// TestHoldBackTombstone: BIRD configured with the frr profile stands in
// for FRR (BIRD parses everything, so an announcement leaking to it would
// show). Delivery still matches the Adj-RIB-Out; a held-back rule is
// withdrawn by a tombstone that the mirror does not show, that counts as
// leaked, that a new announcement replaces and that a restart drops.
func TestHoldBackTombstone(t *testing.T) {
	s, b := birdPair(t, Config{})
	ctx := context.Background()
	const peer = "127.0.0.3"
	cfg := s.cfg
	cfg.Neighbors = slices.Clone(cfg.Neighbors)
	cfg.Neighbors[0].Profile = "frr"
	if _, err := s.Reconfigure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "BIRD session back under the frr profile", birdUp(b))

	ok1 := parseMatch(t, "destination 10.40.0.1/32 port ==80")
	ok2 := parseMatch(t, "destination 10.40.0.2/32 port ==1 ==2 ==3 ==4 ==5")
	ne := parseMatch(t, "destination 10.40.0.3/32 port !=80")
	six := parseMatch(t, "destination 10.40.0.4/32 port ==1 ==2 ==3 ==4 ==5 ==6")
	for _, m := range []flowspec.Match{ok1, ok2, ne, six} {
		if err := announceOne(s, ctx, flowspec.Rule{Match: m, Action: flowspec.Discard()}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "mirror has all 4", func() bool { return s.Len() == 4 })
	eventually(t, 10*time.Second, "BIRD has the 2 the frr profile takes", func() bool {
		return strings.Count(birdRoutes(t, b, "ft4"), "flow4 {") == 2
	})
	out := adjOut(t, s, peer, flowspec.IPv4)
	for _, m := range []flowspec.Match{ok1, ok2, ne, six} {
		peers, total := s.Delivery(m)
		if got := slices.Contains(peers, peer); got != out[m] || total != 1 {
			t.Errorf("%s: Delivery %v/%d, in Adj-RIB-Out %v", m, peers, total, out[m])
		}
	}
	if out[ne] || out[six] || !out[ok1] || !out[ok2] {
		t.Errorf("Adj-RIB-Out %v: want the two ordinary rules only", out)
	}
	if ns := s.NotSent(ne); len(ns) != 1 || ns[0] != "not sent to "+peer+": frr resets sessions on !=" {
		t.Errorf("NotSent(!=) = %q", ns)
	}
	if ns := s.NotSent(ok1); len(ns) != 0 {
		t.Errorf("NotSent(ordinary) = %q", ns)
	}
	ps, err := s.Peers(ctx)
	if err != nil || len(ps) != 1 || ps[0].Profile != "frr" || ps[0].HeldBack != 2 || ps[0].Sent != 2 {
		t.Fatalf("Peers = %+v, %v; want profile frr, 2 held back, 2 sent", ps, err)
	}

	leaked := s.Leaked()
	if errs := s.Withdraw(ctx, []flowspec.Match{ne, ok1}); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	eventually(t, 10*time.Second, "mirror without the two", func() bool { return s.Len() == 2 })
	if _, ok := s.Lookup(ne); ok {
		t.Error("the tombstone shows in the mirror")
	}
	if all, tombs := globalPaths(t, s, flowspec.IPv4); all != 3 || tombs != 1 {
		t.Errorf("global RIB: %d paths, %d tombstones; want 3 and 1", all, tombs)
	}
	if got := s.Leaked(); got != leaked+2 {
		t.Errorf("Leaked %d, want %d (the tombstone and the withdrawn destination)", got, leaked+2)
	}
	// Withdrawing it again changes nothing; announcing it again replaces
	// the tombstone.
	if err := withdrawOne(s, ctx, ne); err != nil {
		t.Fatal(err)
	}
	if err := announceOne(s, ctx, flowspec.Rule{Match: ne, Action: flowspec.Discard()}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "mirror has it again", func() bool { _, ok := s.Lookup(ne); return ok })
	if all, tombs := globalPaths(t, s, flowspec.IPv4); all != 3 || tombs != 0 {
		t.Errorf("global RIB after re-announcing: %d paths, %d tombstones; want 3 and 0", all, tombs)
	}
	if err := withdrawOne(s, ctx, ne); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "mirror without it", func() bool { _, ok := s.Lookup(ne); return !ok })
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "mirror rebuilt", func() bool { return s.Len() == 2 })
	if all, tombs := globalPaths(t, s, flowspec.IPv4); all != 2 || tombs != 0 {
		t.Errorf("global RIB after Restart: %d paths, %d tombstones; want 2 and 0", all, tombs)
	}
	eventually(t, 30*time.Second, "BIRD back with the one ordinary rule left", func() bool {
		return birdUp(b)() && strings.Count(birdRoutes(t, b, "ft4"), "flow4 {") == 1
	})
	if p, _ := s.Delivery(six); len(p) != 0 {
		t.Errorf("after Restart the six-item rule is delivered to %v", p)
	}
}

// TestHoldStateCap: with the iosxr profile in use (3,000 rules), the
// rules kept are the first 3,000 in precedence order; a more specific rule
// displaces the last one kept, which is reported as moved, and withdrawing
// it lets that one back in.
func TestHoldStateCap(t *testing.T) {
	c := classOf("iosxr")
	p, _ := profile.Lookup("iosxr")
	if c < 0 || p.MaxRules == 0 {
		t.Fatal("iosxr is not a capped profile")
	}
	var h holdState
	h.reset(1<<c, peerClasses{}, false)
	rule := func(s string) flowspec.Rule {
		return flowspec.Rule{Match: parseMatch(t, s), Action: flowspec.Discard()}
	}
	// /24s sort after /32s: a /32 displaces a /24.
	var last flowspec.Match
	for i := range p.MaxRules + 1 {
		r := rule(fmt.Sprintf("destination 10.%d.%d.0/24", i/256, i%256))
		mask, displaced, promoted := h.place(r)
		if len(displaced)+len(promoted) != 0 {
			t.Fatalf("rule %d moved %v %v", i, displaced, promoted)
		}
		if (mask != 0) != (i == p.MaxRules) {
			t.Fatalf("rule %d: mask %#x", i, mask)
		}
		if i == p.MaxRules-1 {
			last = r.Match
		}
	}
	if got := h.heldCount(c, []flowspec.Family{flowspec.IPv4}); got != 1 {
		t.Errorf("held %d, want 1", got)
	}
	host := rule("destination 10.0.0.1/32")
	mask, displaced, promoted := h.place(host)
	if mask != 0 || len(displaced) != 1 || displaced[0] != last || len(promoted) != 0 || h.maskOf(last) != 1<<c {
		t.Fatalf("more specific rule: mask %#x, displaced %v, promoted %v (want %s displaced)", mask, displaced, promoted, last)
	}
	// Its action changing to one iosxr refuses takes it out of the cap:
	// the displaced rule is promoted back, and displaced again when the
	// action changes back.
	host.Action = flowspec.RedirectIP(netip.MustParseAddr("192.0.2.1"))
	if mask, displaced, promoted := h.place(host); mask != 1<<c || len(displaced) != 0 || len(promoted) != 1 || promoted[0] != last || h.maskOf(last) != 0 {
		t.Fatalf("refused action: mask %#x, displaced %v, promoted %v", mask, displaced, promoted)
	}
	host.Action = flowspec.Discard()
	if mask, displaced, _ := h.place(host); mask != 0 || len(displaced) != 1 || displaced[0] != last {
		t.Fatalf("action back: mask %#x, displaced %v", mask, displaced)
	}
	if r, m, ok := h.again(last); !ok || m != 1<<c || r.Action != flowspec.Discard() {
		t.Errorf("again(%s) = %v %#x %v", last, r, m, ok)
	}
	if why := h.reason(c, flowspec.Rule{Match: last, Action: flowspec.Discard()}); !strings.Contains(why, "not among the first 3000") {
		t.Errorf("reason %q", why)
	}
	tomb, moved := h.remove(host.Match)
	if tomb || len(moved) != 1 || moved[0] != last || h.maskOf(last) != 0 {
		t.Fatalf("withdrawing it: tomb %v, moved %v, mask of %s %#x", tomb, moved, last, h.maskOf(last))
	}
	if got := h.heldCount(c, []flowspec.Family{flowspec.IPv4}); got != 1 {
		t.Errorf("held %d, want 1", got)
	}
	// A rule the profile refuses is not in the cap and is a tombstone on
	// withdrawal; it does not count against the cap.
	ne := rule("destination 10.0.0.2/32 protocol ==6 ==17 port ==1 ==2 destination-port ==1 ==2 source-port ==1 ==2 packet-length ==1 ==2 dscp ==1 ==2")
	if mask, displaced, promoted := h.place(ne); mask != 1<<c || len(displaced)+len(promoted) != 0 {
		t.Errorf("refused rule: mask %#x, moved %v %v", mask, displaced, promoted)
	}
	if tomb, _ := h.remove(ne.Match); !tomb || !h.tombstoned(ne.Match) {
		t.Error("refused rule not tombstoned on withdrawal")
	}
}

// TestHoldBackCapBIRD: BIRD configured with the iosxr profile (3,000
// rules) gets the first 3,000 in precedence order; a more specific rule
// takes the place of the last one, which BIRD loses; withdrawing it gives
// that one back. Delivery agrees with BIRD throughout.
func TestHoldBackCapBIRD(t *testing.T) {
	s, b := birdPair(t, Config{})
	ctx := context.Background()
	cfg := s.cfg
	cfg.Neighbors = slices.Clone(cfg.Neighbors)
	cfg.Neighbors[0].Profile = "iosxr"
	if _, err := s.Reconfigure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "BIRD session back under the iosxr profile", birdUp(b))
	p, _ := profile.Lookup("iosxr")
	var rules []flowspec.Rule
	for i := range p.MaxRules + 1 {
		rules = append(rules, flowspec.Rule{Match: parseMatch(t, fmt.Sprintf("destination 10.%d.%d.0/24", i/256, i%256)), Action: flowspec.Discard()})
	}
	for i, err := range s.Announce(ctx, rules) {
		if err != nil {
			t.Fatalf("rule %d: %v", i, err)
		}
	}
	last, over := rules[p.MaxRules-1].Match, rules[p.MaxRules].Match
	has := func(m flowspec.Match) bool {
		d, _ := m.Destination()
		return strings.Contains(birdRoutes(t, b, "ft4"), "dst "+d.String()+";")
	}
	count := func() int { return strings.Count(birdRoutes(t, b, "ft4"), "flow4 {") }
	eventually(t, 30*time.Second, "BIRD holds 3,000 rules", func() bool { return s.Len() == len(rules) && count() == p.MaxRules })
	if !has(last) || has(over) {
		t.Fatalf("BIRD: has the last kept %v, the one over the cap %v", has(last), has(over))
	}
	if d, _ := s.Delivery(over); len(d) != 0 {
		t.Errorf("Delivery(over the cap) = %v", d)
	}
	if ns := s.NotSent(over); len(ns) != 1 || !strings.Contains(ns[0], "iosxr applies at most 3,000 FlowSpec rules") {
		t.Errorf("NotSent(over the cap) = %q", ns)
	}

	host := flowspec.Rule{Match: parseMatch(t, "destination 10.0.0.1/32"), Action: flowspec.Discard()}
	if err := announceOne(s, ctx, host); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the host rule in, the last one out", func() bool { return has(host.Match) && !has(last) && count() == p.MaxRules })
	if d, _ := s.Delivery(last); len(d) != 0 {
		t.Errorf("Delivery(displaced) = %v", d)
	}
	if err := withdrawOne(s, ctx, host.Match); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the last one back", func() bool { return !has(host.Match) && has(last) && count() == p.MaxRules })
	if ps, err := s.Peers(ctx); err != nil || ps[0].HeldBack != 1 || ps[0].Sent != p.MaxRules {
		t.Errorf("Peers = %+v, %v; want 1 held back, 3,000 sent", ps, err)
	}
}

// TestRetagOnProfileChange: rules announced while no profile is in use
// get the tags of a profile that a reload brings into use before the
// neighbor comes back under it, and lose them when it goes.
func TestRetagOnProfileChange(t *testing.T) {
	s, b := birdPair(t, Config{})
	ctx := context.Background()
	ok1 := parseMatch(t, "destination 10.41.0.1/32 port ==80")
	ne := parseMatch(t, "destination 10.41.0.2/32 port !=80")
	for _, m := range []flowspec.Match{ok1, ne} {
		if err := announceOne(s, ctx, flowspec.Rule{Match: m, Action: flowspec.Discard()}); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int { return strings.Count(birdRoutes(t, b, "ft4"), "flow4 {") }
	eventually(t, 10*time.Second, "BIRD has both (generic)", func() bool { return count() == 2 })
	reconf := func(name string) {
		t.Helper()
		cfg := s.cfg
		cfg.Neighbors = slices.Clone(cfg.Neighbors)
		cfg.Neighbors[0].Profile = name
		if _, err := s.Reconfigure(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	reconf("frr")
	eventually(t, 30*time.Second, "BIRD back under frr with the ordinary rule only", func() bool {
		return birdUp(b)() && count() == 1 && !strings.Contains(birdRoutes(t, b, "ft4"), "10.41.0.2")
	})
	if p, _ := s.Delivery(ne); len(p) != 0 {
		t.Errorf("Delivery(!=) under frr = %v", p)
	}
	reconf("")
	eventually(t, 30*time.Second, "BIRD back under generic with both", func() bool { return birdUp(b)() && count() == 2 })
	if all, tombs := globalPaths(t, s, flowspec.IPv4); all != 2 || tombs != 0 {
		t.Errorf("global RIB: %d paths, %d tombstones; want 2, 0", all, tombs)
	}
}
