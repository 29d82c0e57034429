package api

import (
	"context"
	"net/http"
	"net/netip"
	"strings"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// CodeOutOfScope is the code of a 403 answer to a scoped token (one with
// prefixes, actions or max_active_rules): the rule's destination lies
// outside the token's prefixes, it uses an action the token may not use,
// or the token's quota is full. The message names the prefix, action or
// quota and what to do.
const CodeOutOfScope = "out_of_scope"

// identity is who makes a request over the TCP listener: a token's name,
// role and scope. The control socket, and a TCP listener without tokens,
// have none: they may do everything.
type identity struct {
	name      string
	role      Role
	prefixes  []netip.Prefix // none: every destination
	actions   []string       // none: every action
	maxActive int            // 0: no quota of its own
	// maxNewPerMinute, neverExpires and othersRules are the token's
	// rate of new rules and permissions (admit.Scope).
	maxNewPerMinute int
	neverExpires    bool
	othersRules     bool
}

// writer is the actor of a write request, as the gate takes it: the
// token's name and scope over TCP, "tcp" on a tokenless TCP listener,
// "cli" over the control socket.
func writer(r *http.Request) admit.Actor {
	a := admit.Actor{Name: actor(r), Source: admit.SourceSocket}
	if _, tcp := r.Context().Value(actorKey{}).(string); tcp {
		a.Source = admit.SourceTCP
	}
	if id := scopeOf(r.Context()); id != nil {
		a.ReadOnly = !id.role.allows(RoleWrite)
		a.Scope = admit.Scope{Prefixes: id.prefixes, Actions: id.actions, MaxActive: id.maxActive,
			MaxNewPerMinute: id.maxNewPerMinute, NeverExpires: id.neverExpires, OthersRules: id.othersRules}
	}
	return a
}

type identityKey struct{}

func withIdentity(r *http.Request, id *identity) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), identityKey{}, id))
}

// scopeOf returns the identity of the token making the request, or nil
// (everything allowed).
func scopeOf(ctx context.Context) *identity {
	id, _ := ctx.Value(identityKey{}).(*identity)
	return id
}

// sees reports whether id may see, and act on, rules with match m: every
// rule when it has no prefixes, else a rule whose destination lies wholly
// inside one of them.
func (id *identity) sees(m flowspec.Match) bool {
	if id == nil || len(id.prefixes) == 0 {
		return true
	}
	d, ok := m.Destination()
	return ok && id.covers(d)
}

// covers reports whether d lies wholly inside one of id's prefixes.
func (id *identity) covers(d netip.Prefix) bool {
	for _, p := range id.prefixes {
		if p.Addr().Is4() == d.Addr().Is4() && p.Bits() <= d.Bits() && p.Contains(d.Addr()) {
			return true
		}
	}
	return false
}

// checkSees answers a stored rule outside id's prefixes exactly as an
// unknown id: another scope's rule is indistinguishable from one that
// does not exist.
func (id *identity) checkSees(sr store.Rule) *Error {
	if id.sees(sr.Rule.Match) {
		return nil
	}
	return newError(http.StatusNotFound, CodeNotFound, "id", "no rule with id %d", sr.ID)
}

// Whoami is the answer of GET /v1/whoami: who the request acts as and
// what it may do. Prefixes and actions are empty when unlimited;
// max_active_rules is 0 without a quota of its own (the [guardrails]
// apply to everyone).
type Whoami struct {
	Name           string   `json:"name"`
	Role           Role     `json:"role"`
	Prefixes       []string `json:"prefixes"`
	Actions        []string `json:"actions"`
	MaxActiveRules int      `json:"max_active_rules"`
}

// getWhoami handles GET /v1/whoami.
func (s *Server) getWhoami(w http.ResponseWriter, r *http.Request) (int, any, error) {
	out := Whoami{Name: actor(r), Role: RoleWrite, Prefixes: []string{}, Actions: []string{}}
	if id := scopeOf(r.Context()); id != nil {
		out.Name, out.Role, out.MaxActiveRules = id.name, id.role, id.maxActive
		for _, p := range id.prefixes {
			out.Prefixes = append(out.Prefixes, p.String())
		}
		out.Actions = append(out.Actions, id.actions...)
	}
	return http.StatusOK, out, nil
}

// prefixList is id's prefixes for a message or a key.
func (id *identity) prefixList() string {
	s := make([]string, len(id.prefixes))
	for i, p := range id.prefixes {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
