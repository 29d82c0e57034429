package api

import (
	"net/http"
	"time"

	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
)

// Status is the body of GET /v1/status: one look at the whole appliance.
// A part that cannot be read now is absent and its error is listed in
// Errors; the route still answers 200 so that a half-broken daemon can be
// inspected.
type Status struct {
	Peers    []Peer      `json:"peers"`
	Rules    *RuleCounts `json:"rules,omitempty"`
	LastPass *Pass       `json:"last_pass,omitempty"` // absent before the first pass
	Errors   []string    `json:"errors,omitempty"`
}

// RuleCounts counts the stored rules by state. Announced counts the active
// rules this site's reconciler has announced.
type RuleCounts struct {
	Active      int `json:"active"`
	Withdrawing int `json:"withdrawing"`
	Withdrawn   int `json:"withdrawn"`
	Expired     int `json:"expired"`
	Announced   int `json:"announced"`
	// ByFamily counts active (and withdrawing) rules by family.
	ByFamily map[string]int `json:"by_family"`
}

// Pass is the summary of a reconcile pass.
type Pass struct {
	Started         time.Time `json:"started"`
	DurationSeconds float64   `json:"duration_seconds"`
	// Result is "ok", "error" (something failed; see Err) or "dry-run".
	Result    string `json:"result"`
	Added     int    `json:"added"`
	Updated   int    `json:"updated"`
	Withdrawn int    `json:"withdrawn"`
	Adopted   int    `json:"adopted"`
	Finished  int    `json:"finished"`
	Orphans   int    `json:"orphans"`
	Pending   int    `json:"pending"`
	Errors    int    `json:"errors"`
	Capped    bool   `json:"capped"`
	Err       string `json:"err,omitempty"`
}

func passFromReconcile(p reconcile.PassResult) *Pass {
	if p.Started.IsZero() {
		return nil
	}
	return &Pass{
		Started: p.Started, DurationSeconds: p.Duration.Seconds(), Result: p.Outcome(),
		Added: p.Added, Updated: p.Updated, Withdrawn: p.Withdrawn, Adopted: p.Adopted,
		Finished: p.Finished, Orphans: p.Orphans, Pending: p.Pending, Errors: p.Errors,
		Capped: p.Capped, Err: p.Err,
	}
}

// getStatus handles GET /v1/status.
func (s *Server) getStatus(w http.ResponseWriter, r *http.Request) (int, any, error) {
	out := Status{Peers: []Peer{}}
	if peers, err := s.rib.Peers(r.Context()); err != nil {
		out.Errors = append(out.Errors, "peers: "+oneLine(err.Error()))
	} else {
		for _, p := range peers {
			out.Peers = append(out.Peers, peerFromBGP(p))
		}
	}
	if counts, err := s.rules.Counts(r.Context()); err != nil {
		out.Errors = append(out.Errors, "rules: "+oneLine(err.Error()))
	} else {
		c := &RuleCounts{ByFamily: map[string]int{}}
		for _, n := range counts {
			switch {
			case n.State == store.Active && n.WithdrawRequested:
				c.Withdrawing += n.N
			case n.State == store.Active:
				c.Active += n.N
			case n.State == store.Withdrawn:
				c.Withdrawn += n.N
			case n.State == store.Expired:
				c.Expired += n.N
			}
			if n.State == store.Active {
				c.ByFamily[n.Family.String()] += n.N
				if n.Announced {
					c.Announced += n.N
				}
			}
		}
		out.Rules = c
	}
	if s.opts.passes != nil {
		out.LastPass = passFromReconcile(s.opts.passes.LastPass())
	}
	return http.StatusOK, out, nil
}
