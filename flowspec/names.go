package flowspec

import (
	"slices"
	"strings"
)

// RTBHActionName names, in a list of allowed actions (an API token's
// actions), a blackhole route exactly: "route PREFIX then blackhole"
// (BLACKHOLE and NO_EXPORT, the site's configured next hop, nothing
// else). BlackholeActionName ("blackhole", the word route text uses) is
// read as the same. RouteActionName names every other route: one that
// sets its own communities or next hop, which can steer traffic rather
// than drop it, so it is a permission of its own.
const (
	RTBHActionName      = "rtbh"
	BlackholeActionName = "blackhole"
	RouteActionName     = "route"
)

// actionNames are the FlowSpec actions by the word that starts them in
// rule text; "action" covers "action sample", "action terminal" and
// "action sample-terminal".
var actionNames = []string{"discard", "rate-limit", "rate-limit-packets", "accept", "action",
	"redirect", "redirect-ip", "mark", "ext", "ext6"}

// ActionNames lists every action name a list of allowed actions may hold:
// the FlowSpec actions as rule text starts them, then "rtbh" and "route".
func ActionNames() []string {
	return append(slices.Clone(actionNames), RTBHActionName, RouteActionName)
}

// CanonicalActionName returns the name of an allowed action as ActionNames
// spells it ("blackhole" is "rtbh"; case does not matter), and whether it
// is one.
func CanonicalActionName(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == BlackholeActionName {
		s = RTBHActionName
	}
	return s, slices.Contains(actionNames, s) || s == RTBHActionName || s == RouteActionName
}

// UsedActionNames returns the names of the actions r uses, as ActionNames
// spells them, each once, in the order the rule's text prints them: for a
// route "rtbh" when it is exactly a blackhole (Blackhole, no next hop of
// its own) and "route" otherwise; for a FlowSpec rule the words that start its actions ("rate-limit 125000
// action sample" uses "rate-limit" and "action").
func UsedActionNames(r Rule) []string {
	if r.Match.Family().IsRoute() {
		if r.Action == Blackhole() {
			return []string{RTBHActionName}
		}
		return []string{RouteActionName}
	}
	var out []string
	for _, w := range strings.Fields(r.Action.String()) {
		if slices.Contains(actionNames, w) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}
