package api

import (
	"context"
	"net/http"
	"time"

	"github.com/ribkeeper/ribkeeper/notify"
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
	// Sites are the sites known to the store: the names --sites accepts.
	Sites []string `json:"sites,omitempty"`
	// SinceStart sums every pass since the daemon started, and the drift
	// it repaired.
	SinceStart *Totals `json:"since_start,omitempty"`
	// Store is the store's condition: whether it takes writes, and its
	// last integrity check.
	Store *StoreStatus `json:"store,omitempty"`
	// Notifications is the delivery state of each [[notify]] receiver.
	Notifications []notify.TargetStatus `json:"notifications,omitempty"`
	Errors        []string              `json:"errors,omitempty"`
}

// StoreStatus is the store's condition in GET /v1/status.
type StoreStatus struct {
	// State is "ok" while the store takes writes; otherwise the reason
	// it refuses them all: "lost" (its file was deleted or replaced
	// while running), "corrupt" (it failed its integrity check), "held"
	// (not the store this appliance ran with, until the operator
	// confirms it). Error then says what to do.
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// Integrity is the last integrity check (SQLite only).
	Integrity *IntegrityStatus `json:"integrity,omitempty"`
	// LateCommits counts writes answered 503 at their deadline while
	// their commit was still running.
	LateCommits uint64 `json:"late_commits"`
}

// IntegrityStatus is the last integrity check of the SQLite file.
type IntegrityStatus struct {
	At      time.Time `json:"at"`
	Result  string    `json:"result"` // "ok", "corrupt" or "incomplete"
	Problem string    `json:"problem,omitempty"`
}

// StoreCondition is the store's condition (implemented by *store.Store).
type StoreCondition interface {
	Refusal() *store.RefusedError
	Integrity() *store.IntegrityResult
	LateCommits() uint64
}

// WithStoreCondition shows the store's condition in GET /v1/status.
func WithStoreCondition(c StoreCondition) Option {
	return func(o *options) { o.store = c }
}

func storeStatus(c StoreCondition) *StoreStatus {
	out := &StoreStatus{State: "ok", LateCommits: c.LateCommits()}
	if r := c.Refusal(); r != nil {
		out.State, out.Error = r.Kind, r.Msg
	}
	if in := c.Integrity(); in != nil {
		is := &IntegrityStatus{At: in.At, Result: "incomplete", Problem: in.Problem}
		switch {
		case in.OK:
			is.Result = "ok"
		case in.Corrupt:
			is.Result = "corrupt"
		}
		out.Integrity = is
	}
	return out
}

// Totals counts what the reconciler did since the daemon started.
type Totals struct {
	Started time.Time `json:"started"`
	// Passes counts passes; ErrorPasses those with result error.
	Passes      uint64 `json:"passes"`
	ErrorPasses uint64 `json:"error_passes"`
	Added       uint64 `json:"added"`
	Updated     uint64 `json:"updated"`
	Withdrawn   uint64 `json:"withdrawn"`
	Finished    uint64 `json:"finished"`
	Errors      uint64 `json:"errors"`
	// Drift repaired (see reconcile.DriftCounts).
	Readded          uint64 `json:"readded"`
	OrphansWithdrawn uint64 `json:"orphans_withdrawn"`
	Replaced         uint64 `json:"replaced"`
	SpeakerRestarts  uint64 `json:"speaker_restarts"`
	PeerResets       uint64 `json:"peer_resets"`
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
	// Adopted is a level, not a change of this pass: the rules in the
	// RIB as wanted when the pass ended.
	Adopted  int    `json:"adopted"`
	Finished int    `json:"finished"`
	Orphans  int    `json:"orphans"`
	Pending  int    `json:"pending"`
	Errors   int    `json:"errors"`
	Capped   bool   `json:"capped"`
	Err      string `json:"err,omitempty"`
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
		out.Errors = append(out.Errors, "peers: "+OneLine(err.Error()))
	} else {
		for _, p := range peers {
			out.Peers = append(out.Peers, peerFromBGP(p))
		}
	}
	id := scopeOf(r.Context())
	if counts, err := s.countRules(r.Context(), id); err != nil {
		out.Errors = append(out.Errors, "rules: "+OneLine(err.Error()))
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
	if sites, err := s.rules.Sites(r.Context()); err != nil {
		out.Errors = append(out.Errors, "sites: "+OneLine(err.Error()))
	} else {
		out.Sites = sites
	}
	if s.opts.passes != nil {
		out.LastPass = passFromReconcile(s.opts.passes.LastPass())
	}
	if s.opts.observer != nil {
		t := s.opts.observer.PassTotals()
		if s.opts.passes != nil {
			dc := s.opts.passes.Drift()
			t.Readded, t.OrphansWithdrawn, t.Replaced = dc.Readded, dc.OrphansWithdrawn, dc.Replaced
			t.SpeakerRestarts, t.PeerResets = dc.SpeakerRestarts, dc.PeerResets
		}
		out.SinceStart = &t
	}
	if s.opts.notifications != nil {
		out.Notifications = s.opts.notifications.Status()
	}
	if s.opts.store != nil {
		out.Store = storeStatus(s.opts.store)
	}
	if id.scoped() {
		scopedStatus(id, &out)
	}
	return http.StatusOK, out, nil
}

// countRules counts the stored rules: all of them, or for a scoped token
// those inside its prefixes.
func (s *Server) countRules(ctx context.Context, id *identity) ([]store.Count, error) {
	if !id.scoped() {
		return s.rules.Counts(ctx)
	}
	all, err := s.rules.DestinationCounts(ctx)
	if err != nil {
		return nil, err
	}
	return countsWithin(all, id), nil
}

// countsWithin keeps the counts of the rules whose destination lies
// inside id's prefixes.
func countsWithin(all []store.DestinationCount, id *identity) []store.Count {
	var out []store.Count
	for _, c := range all {
		if c.Destination.IsValid() && id.covers(c.Destination) {
			out = append(out, c.Count)
		}
	}
	return out
}
