package flowspec

// IsValid reports whether both the match and the action are valid and of
// the same kind: a route (IPv4Unicast, IPv6Unicast) takes a route action
// whose next hop, if any, is of its family; a FlowSpec rule takes no route
// action.
func (r Rule) IsValid() bool {
	if !r.Match.IsValid() || !r.Action.IsValid() {
		return false
	}
	if r.Match.fam().IsRoute() {
		nh, ok := r.Action.NextHop()
		return r.Action.IsRoute() && (!ok || RouteFamily(nh) == r.Match.fam())
	}
	return r.Action.d().comm == "" && r.Action.d().nh == ""
}
