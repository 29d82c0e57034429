package api

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"

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

// prefixList is id's prefixes for a message.
func (id *identity) prefixList() string {
	s := make([]string, len(id.prefixes))
	for i, p := range id.prefixes {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// outside is the 403 for a rule outside id's prefixes: what names it ("the
// rule" in a request, "rule 7" when stored) and field the request field at
// fault.
func (id *identity) outside(m flowspec.Match, field, what string, stored bool) *Error {
	d, ok := m.Destination()
	next := "use a destination inside them, or a token whose prefixes cover " + d.String()
	switch {
	case stored && ok:
		next = "it is another scope's rule: ask someone whose token covers " + d.String()
	case stored:
		next = "it is another scope's rule: ask someone with an unscoped token"
	}
	if !ok {
		if !stored {
			next = `add "destination PREFIX" inside one of them`
		}
		return newError(http.StatusForbidden, CodeOutOfScope, field,
			"token %q may act only on destinations inside %s; %s has no destination prefix, so it matches traffic to every address: %s",
			id.name, id.prefixList(), what, next)
	}
	return newError(http.StatusForbidden, CodeOutOfScope, field,
		"token %q may act only on destinations inside %s; %s has destination %s, outside them: %s",
		id.name, id.prefixList(), what, d, next)
}

// allowsWrite checks a rule a request is to store against id's prefixes
// and actions; field names the request's rule text.
func (id *identity) allowsWrite(r flowspec.Rule, field string) *Error {
	if id == nil {
		return nil
	}
	if !id.sees(r.Match) {
		return id.outside(r.Match, field, "the rule", false)
	}
	if len(id.actions) == 0 {
		return nil
	}
	for _, a := range flowspec.UsedActionNames(r) {
		if !slices.Contains(id.actions, a) {
			return newError(http.StatusForbidden, CodeOutOfScope, field,
				"token %q may not use action %s; it may use %s: change the rule's action, or ask for a token whose actions include %s",
				id.name, a, strings.Join(id.actions, ", "), a)
		}
	}
	return nil
}

// checkSees is the 403 for a stored rule outside id's prefixes, or nil.
func (id *identity) checkSees(sr store.Rule) *Error {
	if id.sees(sr.Rule.Match) {
		return nil
	}
	return id.outside(sr.Rule.Match, "id", fmt.Sprintf("rule %d", sr.ID), true)
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
