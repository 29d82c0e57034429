package bgp

import (
	"context"
	"fmt"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/server"
)

const importPolicyName = "ribkeeper-accept-local"

// installImportPolicy makes the global RIB accept locally originated paths
// only: a policy that accepts RouteType LOCAL, default REJECT. Peers cannot
// inject routes into what we announce, and the mirror never sees their
// paths. GoBGP applies the global import policy to our own paths too, hence
// the explicit accept. Received routes still occupy each peer's Adj-RIB-In
// (maxprefix.go: GoBGP stores them before this policy runs).
//
// The assignment is read back, so a policy GoBGP did not take fails Start.
func (s *Speaker) installImportPolicy(ctx context.Context, srv *server.BgpServer) error {
	pol := &api.Policy{
		Name: importPolicyName,
		Statements: []*api.Statement{{
			Name:       importPolicyName + "-stmt",
			Conditions: &api.Conditions{RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
			Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT},
		}},
	}
	if err := s.call(ctx, "add import policy", func() error {
		return srv.AddPolicy(context.Background(), &api.AddPolicyRequest{Policy: pol})
	}); err != nil {
		return err
	}
	assign := &api.PolicyAssignment{
		Name:          "global",
		Direction:     api.PolicyDirection_POLICY_DIRECTION_IMPORT,
		Policies:      []*api.Policy{{Name: importPolicyName}},
		DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT,
	}
	if err := s.call(ctx, "assign import policy", func() error {
		return srv.AddPolicyAssignment(context.Background(), &api.AddPolicyAssignmentRequest{Assignment: assign})
	}); err != nil {
		return err
	}

	var got []*api.PolicyAssignment
	if err := s.call(ctx, "list import policy", func() error {
		return srv.ListPolicyAssignment(context.Background(),
			&api.ListPolicyAssignmentRequest{Name: "global", Direction: api.PolicyDirection_POLICY_DIRECTION_IMPORT},
			func(a *api.PolicyAssignment) { got = append(got, a) })
	}); err != nil {
		return err
	}
	for _, a := range got {
		if a.DefaultAction == api.RouteAction_ROUTE_ACTION_REJECT && len(a.Policies) == 1 && a.Policies[0].Name == importPolicyName {
			return nil
		}
	}
	return fmt.Errorf("bgp: global import policy not in place after assignment (got %v)", got)
}
