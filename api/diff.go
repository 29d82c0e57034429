package api

import (
	"fmt"
	"net/http"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
)

// Deliverer reports per-peer delivery of a path (implemented by
// *bgp.Speaker): the established peers whose Adj-RIB-Out holds it, and
// the number of configured peers of its family.
type Deliverer interface {
	Delivery(m flowspec.Match) (peers []string, total int)
}

// Diff is what the next reconcile pass would change.
type Diff struct {
	Add      []DiffItem `json:"add"`
	Update   []DiffItem `json:"update"`
	Withdraw []DiffItem `json:"withdraw"` // orphans
	Retire   []DiffItem `json:"retire"`   // withdrawn or expired rules still in the RIB
	Finish   []DiffItem `json:"finish"`   // retiring rules whose path is gone
	Adopted  int        `json:"adopted"`  // already in the RIB as wanted
	// Capped is set when the orphans exceed max_withdraw_per_pass: the pass
	// would withdraw none of them.
	Capped bool `json:"capped"`
}

// DiffItem is one change.
type DiffItem struct {
	ID     int64  `json:"id,omitempty"` // 0 for an orphan
	Family string `json:"family"`
	Match  string `json:"match"`
	Action string `json:"action,omitempty"`
	Old    string `json:"old_action,omitempty"` // for an update
	State  string `json:"state,omitempty"`      // for retire and finish
}

// diffItems are items as the API shows them to id: a scoped token sees
// only the items inside its prefixes.
func diffItems(id *identity, items []reconcile.Item) []DiffItem {
	out := make([]DiffItem, 0, len(items))
	for _, it := range items {
		if !id.sees(it.Match) {
			continue
		}
		d := DiffItem{ID: it.ID, Family: it.Match.Family().String(), Match: it.Match.String(), State: string(it.State)}
		if it.Action.IsValid() {
			d.Action = it.Action.String()
		}
		if it.Old.IsValid() {
			d.Old = it.Old.String()
		}
		out = append(out, d)
	}
	return out
}

// getDiff handles GET /v1/diff: the plan of the next pass, computed from
// the store and the RIB mirror, changing nothing.
func (s *Server) getDiff(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if s.opts.passes == nil {
		return 0, nil, newError(http.StatusServiceUnavailable, CodeUnavailable, "", "no reconciler to preview")
	}
	p, err := s.opts.passes.Preview(r.Context())
	if err != nil {
		return 0, nil, newError(http.StatusServiceUnavailable, CodeUnavailable, "", "%s", err.Error())
	}
	id := scopeOf(r.Context())
	adopted := 0
	for _, it := range p.Adopt {
		if id.sees(it.Match) {
			adopted++
		}
	}
	return http.StatusOK, Diff{
		Add: diffItems(id, p.Add), Update: diffItems(id, p.Update), Withdraw: diffItems(id, p.Withdraw),
		Retire: diffItems(id, p.Retire), Finish: diffItems(id, p.Finish), Adopted: adopted, Capped: p.Capped,
	}, nil
}

// withDelivery fills the delivery fields of an active rule.
func (s *Server) withDelivery(out *Rule, r store.Rule) {
	d, ok := s.rib.(Deliverer)
	if !ok || r.State != store.Active || !r.Rule.Match.IsValid() {
		return
	}
	peers, total := d.Delivery(r.Rule.Match)
	out.Peers = NonNil(peers)
	out.AnnouncedTo = fmt.Sprintf("%d/%d", len(peers), total)
}
