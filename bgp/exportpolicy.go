package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	api "github.com/osrg/gobgp/v4/api"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
)

const exportPolicyName = "ribkeeper-hold-back"

// nobody is in every neighbor set: GoBGP's NeighborCondition matches
// every neighbor when its set is empty, so a set must never be.
const nobody = "255.255.255.255/32"

func nbSetName(c int) string { return "rk-peers-" + restrictive[c].Name }
func lcSetName(c int) string { return "rk-tag-" + restrictive[c].Name }

// tagString is the large community of class c (c < 0: the tombstone) in
// GoBGP's text form, which its large-community sets match exactly.
func (s *Speaker) tagString(c int) string {
	return fmt.Sprintf("%d:%d:%d", s.cfg.ASN, tagData1, c+1)
}

// tagAttr is the large-communities attribute of mask (nil for 0).
func (s *Speaker) tagAttr(mask uint8) gobgp.PathAttributeInterface {
	if mask == 0 {
		return nil
	}
	var cs []*gobgp.LargeCommunity
	if mask&tombBit != 0 {
		cs = append(cs, gobgp.NewLargeCommunity(s.cfg.ASN, tagData1, 0))
	}
	for i := range restrictive {
		if mask&(1<<i) != 0 {
			cs = append(cs, gobgp.NewLargeCommunity(s.cfg.ASN, tagData1, uint32(i+1)))
		}
	}
	return gobgp.NewPathAttributeLargeCommunities(cs)
}

// isTombstone reports whether a path's attributes carry the tombstone tag.
func (s *Speaker) isTombstone(attrs []gobgp.PathAttributeInterface) bool {
	for _, a := range attrs {
		lc, ok := a.(*gobgp.PathAttributeLargeCommunities)
		if !ok {
			continue
		}
		for _, c := range lc.Values {
			if c.ASN == s.cfg.ASN && c.LocalData1 == tagData1 && c.LocalData2 == 0 {
				return true
			}
		}
	}
	return false
}

// installExportPolicy installs the global export policy of holdback.go:
// the tombstone is rejected for everyone; a path tagged for a profile is
// rejected for that profile's neighbor set; tags are stripped from what
// is sent; everything else is accepted. The statements cover every
// restrictive built-in profile (a profile not in use has no tagged paths
// and only the placeholder in its set), so the policy never changes while
// the server runs; only the neighbor sets do (syncNeighborSets).
func (s *Speaker) installExportPolicy(ctx context.Context, srv *server.BgpServer) error {
	s.nbSets = make(map[string][]string)
	sets := []*api.DefinedSet{{DefinedType: api.DefinedType_DEFINED_TYPE_LARGE_COMMUNITY, Name: "rk-tomb", List: []string{s.tagString(-1)}}}
	all := []string{s.tagString(-1)}
	var stmts []*api.Statement
	stmts = append(stmts, &api.Statement{
		Name:       exportPolicyName + "-tombstone",
		Conditions: &api.Conditions{LargeCommunitySet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: "rk-tomb"}},
		Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
	})
	for c := range restrictive {
		sets = append(sets,
			&api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: nbSetName(c), List: []string{nobody}},
			&api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_LARGE_COMMUNITY, Name: lcSetName(c), List: []string{s.tagString(c)}})
		s.nbSets[nbSetName(c)] = []string{nobody}
		all = append(all, s.tagString(c))
		stmts = append(stmts, &api.Statement{
			Name: exportPolicyName + "-" + restrictive[c].Name,
			Conditions: &api.Conditions{
				NeighborSet:       &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: nbSetName(c)},
				LargeCommunitySet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: lcSetName(c)},
			},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
		})
	}
	sets = append(sets, &api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_LARGE_COMMUNITY, Name: "rk-tags", List: all})
	stmts = append(stmts, &api.Statement{
		Name:       exportPolicyName + "-strip",
		Conditions: &api.Conditions{LargeCommunitySet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: "rk-tags"}},
		Actions:    &api.Actions{LargeCommunity: &api.CommunityAction{Type: api.CommunityAction_TYPE_REMOVE, Communities: all}},
	})
	for _, d := range sets {
		if err := s.call(ctx, "add defined set "+d.Name, func() error {
			return srv.AddDefinedSet(context.Background(), &api.AddDefinedSetRequest{DefinedSet: d})
		}); err != nil {
			return err
		}
	}
	pol := &api.Policy{Name: exportPolicyName, Statements: stmts}
	if err := s.call(ctx, "add export policy", func() error {
		return srv.AddPolicy(context.Background(), &api.AddPolicyRequest{Policy: pol})
	}); err != nil {
		return err
	}
	assign := &api.PolicyAssignment{
		Name:          "global",
		Direction:     api.PolicyDirection_POLICY_DIRECTION_EXPORT,
		Policies:      []*api.Policy{{Name: exportPolicyName}},
		DefaultAction: api.RouteAction_ROUTE_ACTION_ACCEPT,
	}
	return s.call(ctx, "assign export policy", func() error {
		return srv.AddPolicyAssignment(context.Background(), &api.AddPolicyAssignmentRequest{Assignment: assign})
	})
}

// neighborSetsOf is the membership of each restrictive profile's neighbor
// set for cfg's neighbors and dynamic neighbors.
func neighborSetsOf(cfgs ...*Config) map[string][]string {
	out := make(map[string][]string, len(restrictive))
	for c := range restrictive {
		out[nbSetName(c)] = []string{nobody}
	}
	for _, cfg := range cfgs {
		for _, n := range cfg.Neighbors {
			if c := classOf(n.Profile); c >= 0 {
				a := n.Address.Unmap()
				out[nbSetName(c)] = append(out[nbSetName(c)], netip.PrefixFrom(a, a.BitLen()).String())
			}
		}
		groups := map[string]int{}
		for _, g := range cfg.PeerGroups {
			groups[g.Name] = classOf(g.Profile)
		}
		for _, d := range cfg.DynamicNeighbors {
			if c, ok := groups[d.PeerGroup]; ok && c >= 0 {
				out[nbSetName(c)] = append(out[nbSetName(c)], d.Prefix.Masked().String())
			}
		}
	}
	for k, v := range out {
		slices.Sort(v)
		out[k] = slices.Compact(v)
	}
	return out
}

// syncNeighborSets makes the export policy's neighbor sets those of cfgs
// (their union): entries are appended and removed in place, because
// GoBGP's policy statements hold the set they were built with (replacing
// a set would leave them on the old one). It reports whether anything was
// removed (peers still established may need a soft reset out). Called
// with mu held.
func (s *Speaker) syncNeighborSets(ctx context.Context, cfgs ...*Config) (removed bool, err error) {
	want := neighborSetsOf(cfgs...)
	for c := range restrictive {
		name := nbSetName(c)
		have := s.nbSets[name]
		var add, del []string
		for _, e := range want[name] {
			if !slices.Contains(have, e) {
				add = append(add, e)
			}
		}
		for _, e := range have {
			if !slices.Contains(want[name], e) {
				del = append(del, e)
			}
		}
		if len(add) > 0 {
			if err := s.call(ctx, "add to neighbor set "+name, func() error {
				return s.srv.AddDefinedSet(context.Background(), &api.AddDefinedSetRequest{
					DefinedSet: &api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: name, List: add}})
			}); err != nil {
				return removed, err
			}
		}
		if len(del) > 0 {
			if err := s.call(ctx, "remove from neighbor set "+name, func() error {
				return s.srv.DeleteDefinedSet(context.Background(), &api.DeleteDefinedSetRequest{
					DefinedSet: &api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: name, List: del}})
			}); err != nil {
				return removed, err
			}
			removed = true
		}
		s.nbSets[name] = want[name]
		if len(add)+len(del) > 0 {
			s.log.Info("router profile neighbor set", "profile", restrictive[c].Name, "members", len(want[name])-1)
		}
	}
	return removed, nil
}

// softResetOut makes GoBGP re-run the export policy for addr's table
// ("all": every peer): what it now rejects and had sent is withdrawn,
// what it now accepts is sent.
func (s *Speaker) softResetOut(ctx context.Context, addr string) error {
	return s.call(ctx, "soft reset out "+addr, func() error {
		return s.srv.ResetPeer(context.Background(), &api.ResetPeerRequest{Address: addr, Soft: true, Direction: api.ResetPeerRequest_DIRECTION_OUT})
	})
}
