package reconcile

import (
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// Want is what desired state asks for one Match.
type Want struct {
	// ID is the rule that owns the Match.
	ID int64
	// Action is what the path must carry. It is ignored when Retire is set.
	Action flowspec.Action
	// Retire is store.Withdrawn or store.Expired when the rule is being
	// retired: its path must go, and the rule becomes final only once the
	// RIB no longer has it. It is "" for a rule that must stay announced.
	Retire store.State
}

// Item is one entry of a Plan.
type Item struct {
	// ID is the rule concerned; 0 for an orphan, which no rule owns.
	ID    int64
	Match flowspec.Match
	// Action is the action to announce (Add, Update, Adopt) or the action
	// found in the RIB (Withdraw, Retire). It is zero for Finish.
	Action flowspec.Action
	// Old is the action found in the RIB for an Update.
	Old flowspec.Action
	// State is the final state of a retiring rule (Retire, Finish).
	State store.State
}

// Rule returns the rule the item is about: its Match and Action.
func (it Item) Rule() flowspec.Rule { return flowspec.Rule{Match: it.Match, Action: it.Action} }

// Plan is the difference between desired and actual state: what a pass does.
// Paths are compared by Match and then by Action.
type Plan struct {
	// Add lists desired rules whose Match is not in the RIB.
	Add []Item
	// Update lists desired rules whose Match is in the RIB with another
	// action. Announcing replaces the path, so updates are make-before-break.
	Update []Item
	// Adopt lists desired rules already in the RIB as wanted: nothing to do,
	// they are adopted rather than re-added.
	Adopt []Item
	// Withdraw lists orphans: locally originated paths that nothing desires,
	// including paths some other local writer put there.
	Withdraw []Item
	// Retire lists retiring rules whose path is still in the RIB. They are
	// withdrawn explicitly and are not subject to the orphan cap.
	Retire []Item
	// Finish lists retiring rules whose path is gone: they become final.
	Finish []Item
	// Capped is set when the orphans in Withdraw exceed
	// Config.MaxWithdrawPerPass: then none of them is withdrawn.
	Capped bool
}

// Empty reports whether applying the plan would change anything.
func (p Plan) Empty() bool {
	return len(p.Add) == 0 && len(p.Update) == 0 && len(p.Retire) == 0 &&
		len(p.Finish) == 0 && (len(p.Withdraw) == 0 || p.Capped)
}

// Diff compares desired state (by Match) with the locally originated paths
// in the RIB (actual) and returns what must change. It is pure: it reads its
// arguments and does nothing else, so it can be used for previews.
func Diff(desired map[flowspec.Match]Want, actual map[flowspec.Match]flowspec.Action) Plan {
	// In the steady state nearly everything is adopted: size that list
	// once (it can hold at most min(desired, actual)) instead of growing it.
	p := Plan{Adopt: make([]Item, 0, min(len(desired), len(actual)))}
	for m, w := range desired {
		a, present := actual[m]
		switch {
		case w.Retire != "" && present:
			p.Retire = append(p.Retire, Item{ID: w.ID, Match: m, Action: a, State: w.Retire})
		case w.Retire != "":
			p.Finish = append(p.Finish, Item{ID: w.ID, Match: m, State: w.Retire})
		case !present:
			p.Add = append(p.Add, Item{ID: w.ID, Match: m, Action: w.Action})
		case a != w.Action:
			p.Update = append(p.Update, Item{ID: w.ID, Match: m, Action: w.Action, Old: a})
		default:
			p.Adopt = append(p.Adopt, Item{ID: w.ID, Match: m, Action: a})
		}
	}
	for m, a := range actual {
		if _, ok := desired[m]; !ok {
			p.Withdraw = append(p.Withdraw, Item{Match: m, Action: a})
		}
	}
	return p
}
