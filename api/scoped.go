package api

import (
	"net/http"
	"time"
)

// What a scoped token (one with prefixes) sees of the appliance as a
// whole: its own world, never the appliance's totals. Rules of other
// scopes do not exist for it (404 as for an unknown id, id lines alone in
// the event stream); status and series count only the rules inside its
// prefixes; a pass shows when it ran and how it ended, not what it did;
// peers show their sessions (address, state, uptime, flaps, last error:
// whether its rules can reach the routers, which its rules' delivery
// names anyway) without the paths they were sent (sent and held_back are
// 0: they count every scope's rules); the known sites are listed for a
// write token (it may target them, and a refused site name lists them)
// and not for a read token; /metrics, which counts every scope's rules,
// is refused to it.

// scoped reports whether id sees only part of the rules.
func (id *identity) scoped() bool {
	return id != nil && len(id.prefixes) > 0
}

// scopedPass is a pass as a scoped token sees it: when it ran and how it
// ended.
type scopedPassView struct {
	Started         time.Time `json:"started"`
	DurationSeconds float64   `json:"duration_seconds"`
	Result          string    `json:"result"`
}

func scopedPass(p *Pass) *scopedPassView {
	if p == nil {
		return nil
	}
	return &scopedPassView{Started: p.Started, DurationSeconds: p.DurationSeconds, Result: p.Result}
}

// scopedPeer is a peer without the counts of paths sent to it, which
// count every scope's rules.
func scopedPeer(p Peer) Peer {
	p.Sent, p.HeldBack = 0, 0
	return p
}

// scopedStatus trims out, the status of the whole appliance, to what id
// may see; rules are already counted within its prefixes.
func scopedStatus(id *identity, out *Status) {
	for i := range out.Peers {
		out.Peers[i] = scopedPeer(out.Peers[i])
	}
	out.LastPass, out.SinceStart, out.Notifications = nil, nil, nil
	if out.Store != nil {
		out.Store = &StoreStatus{State: out.Store.State} // the appliance's files are not a scope's
	}
	if id.role != RoleWrite {
		out.Sites = nil
	}
}

// unscopedOnly serves next to every caller but scoped tokens, which get
// 403: what it shows (the Prometheus metrics) counts the whole appliance.
func unscopedOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := scopeOf(r.Context()); id.scoped() {
			writeError(w, newError(http.StatusForbidden, CodeForbidden, "",
				"token %q is scoped to %s; %s counts every scope's rules: scrape it with an unscoped read token",
				id.name, id.prefixList(), r.URL.Path))
			return
		}
		next.ServeHTTP(w, r)
	})
}
