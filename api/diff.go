package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
)

// Previewer is the reconciler's dry preview (implemented by
// *reconcile.Reconciler); GET /v1/diff needs it.
type Previewer interface {
	Preview(ctx context.Context) (reconcile.Plan, error)
}

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

func diffItems(items []reconcile.Item) []DiffItem {
	out := make([]DiffItem, 0, len(items))
	for _, it := range items {
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
	pv, ok := s.opts.passes.(Previewer)
	if !ok {
		return 0, nil, newError(http.StatusServiceUnavailable, CodeUnavailable, "", "no reconciler to preview")
	}
	p, err := pv.Preview(r.Context())
	if err != nil {
		return 0, nil, newError(http.StatusServiceUnavailable, CodeUnavailable, "", "%s", err.Error())
	}
	return http.StatusOK, Diff{
		Add: diffItems(p.Add), Update: diffItems(p.Update), Withdraw: diffItems(p.Withdraw),
		Retire: diffItems(p.Retire), Finish: diffItems(p.Finish), Adopted: len(p.Adopt), Capped: p.Capped,
	}, nil
}

// withDelivery fills the delivery fields of an active rule.
func (s *Server) withDelivery(out *Rule, r store.Rule) {
	d, ok := s.rib.(Deliverer)
	if !ok || r.State != store.Active || !r.Rule.Match.IsValid() {
		return
	}
	peers, total := d.Delivery(r.Rule.Match)
	out.Peers = nonNil(peers)
	out.AnnouncedTo = fmt.Sprintf("%d/%d", len(peers), total)
	if h, ok := s.rib.(HeldBacker); ok {
		out.NotSent = h.NotSent(r.Rule.Match)
	}
}

// HeldBacker says why a rule is not sent to some peers (implemented by
// *bgp.Speaker: router profiles).
type HeldBacker interface {
	NotSent(m flowspec.Match) []string
}

// Diff returns what the next reconcile pass would change.
func (c *Client) Diff(ctx context.Context) (Diff, error) {
	var d Diff
	_, err := c.do(ctx, http.MethodGet, "/v1/diff", nil, &d)
	return d, err
}

func (c *cli) diff(ctx context.Context, args []string) error {
	fs := c.flagSet("diff")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("diff", "unexpected argument %q", pos[0])
	}
	d, err := c.client.Diff(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(d)
	}
	return printDiff(c.stdout, d)
}

func printDiff(w io.Writer, d Diff) error {
	n := len(d.Add) + len(d.Update) + len(d.Retire) + len(d.Finish)
	if !d.Capped {
		n += len(d.Withdraw)
	}
	if n == 0 {
		_, err := fmt.Fprintf(w, "nothing to change (%d rules in the RIB as wanted)\n", d.Adopted)
		return err
	}
	t := newTable(w, "OP", "ID", "FAMILY", "MATCH", "ACTION")
	id := func(i int64) string {
		if i == 0 {
			return "-"
		}
		return strconv.FormatInt(i, 10)
	}
	for _, it := range d.Add {
		t.row("add", id(it.ID), it.Family, it.Match, it.Action)
	}
	for _, it := range d.Update {
		t.row("update", id(it.ID), it.Family, it.Match, it.Old+" -> "+it.Action)
	}
	for _, it := range d.Retire {
		t.row("withdraw ("+it.State+")", id(it.ID), it.Family, it.Match, it.Action)
	}
	op := "withdraw (orphan)"
	if d.Capped {
		op = "orphan (capped: kept)"
	}
	for _, it := range d.Withdraw {
		t.row(op, id(it.ID), it.Family, it.Match, it.Action)
	}
	for _, it := range d.Finish {
		t.row("finish ("+it.State+")", id(it.ID), it.Family, it.Match, "")
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d changes; %d rules in the RIB as wanted\n", n, d.Adopted)
	return err
}
