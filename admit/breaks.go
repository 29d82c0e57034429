package admit

import (
	"github.com/ribkeeper/ribkeeper/guard"
	"github.com/ribkeeper/ribkeeper/store"
)

// BreakCheck returns a check of active rules against the per-rule
// guardrails in force now, for a caller walking the store's active rules
// (store.Store.EachActive) ahead of EnforceAmong: the rules it reports
// are the ones to keep for EnforceAmong (which checks each again as it
// is then); the others break nothing, so the walk need not hold them.
func (g *Gate) BreakCheck() func(*store.Rule) bool {
	l, now := g.guard.Limits(), g.now()
	return func(r *store.Rule) bool { return guard.Breaks(l, r, now) }
}
