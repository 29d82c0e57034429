package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Role is what a bearer token may do.
type Role string

const (
	// RoleRead may call every GET route, /metrics included.
	RoleRead Role = "read"
	// RoleWrite may also add, update and withdraw rules.
	RoleWrite Role = "write"
)

// allows reports whether a token with role r may make a request that needs
// role need: write includes read.
func (r Role) allows(need Role) bool {
	return r == RoleWrite || r == need
}

// Token is one bearer token of the TCP listener. Its Name is the actor
// recorded in the audit trail for every change made with it.
type Token struct {
	Name   string
	Role   Role
	Secret string
	// Prefixes, if any, scope the token: it adds, sees (rule list and
	// show, history, diff, rib) and withdraws only rules whose
	// destination lies wholly inside one of them; a FlowSpec rule
	// without a destination is refused for it (403 out_of_scope).
	Prefixes []netip.Prefix
	// Actions, if any, are the only actions its rules may use, as
	// flowspec.ActionNames names them ("rtbh" for any RTBH route).
	Actions []string
	// MaxActiveRules caps the active rules the token created or last
	// changed (0: no cap). It is enforced where the guardrails are
	// by the admission gate, with the guardrails on top.
	MaxActiveRules int
	// MaxNewRulesPerMinute caps the new rules it may create in any minute
	// (0: the gate's default for a scoped token, [limits]
	// scoped_new_rules_per_minute; negative: no cap).
	MaxNewRulesPerMinute int
	// NeverExpires lets it store rules that never expire; OthersRules
	// lets a scoped token change and withdraw rules other actors wrote.
	NeverExpires bool
	OthersRules  bool
}

// tokenSet checks bearer tokens. Secrets are kept as SHA-256 digests and
// compared in constant time against every token, so neither the timing nor
// the order of the list tells a guesser anything.
type tokenSet struct {
	tokens []*hashedToken
}

type hashedToken struct {
	id     *identity
	digest [sha256.Size]byte
	live   *live // ended when a reload removes or changes the token
}

func newTokenSet(tokens []Token) (*tokenSet, error) {
	ts := &tokenSet{}
	seen := map[string]bool{}
	for i, t := range tokens {
		switch {
		case t.Name == "":
			return nil, fmt.Errorf("token %d has no name", i+1)
		case seen[t.Name]:
			return nil, fmt.Errorf("token name %q is used twice", t.Name)
		case t.Role != RoleRead && t.Role != RoleWrite:
			return nil, fmt.Errorf("token %q: role %q is not %q or %q", t.Name, t.Role, RoleRead, RoleWrite)
		case len(t.Secret) < 16:
			return nil, fmt.Errorf("token %q: secret is shorter than 16 characters", t.Name)
		case t.MaxActiveRules < 0:
			return nil, fmt.Errorf("token %q: max_active_rules %d is negative: use a positive number, or 0 for no cap", t.Name, t.MaxActiveRules)
		}
		id := &identity{name: t.Name, role: t.Role, maxActive: t.MaxActiveRules,
			maxNewPerMinute: t.MaxNewRulesPerMinute, neverExpires: t.NeverExpires, othersRules: t.OthersRules}
		for _, p := range t.Prefixes {
			if !p.IsValid() || p.Masked() != p || p.Addr().Zone() != "" || p.Addr().Is4In6() {
				return nil, fmt.Errorf("token %q: prefix %s is not a masked IPv4 or IPv6 prefix (write %s)", t.Name, p, p.Masked())
			}
			id.prefixes = append(id.prefixes, p)
		}
		for _, a := range t.Actions {
			name, ok := flowspec.CanonicalActionName(a)
			if !ok {
				return nil, fmt.Errorf("token %q: %q is not an action: use %s", t.Name, a, strings.Join(flowspec.ActionNames(), ", "))
			}
			if !slices.Contains(id.actions, name) {
				id.actions = append(id.actions, name)
			}
		}
		seen[t.Name] = true
		ts.tokens = append(ts.tokens, &hashedToken{id: id, digest: sha256.Sum256([]byte(t.Secret)), live: newLive()})
	}
	return ts, nil
}

// lookup returns the token whose secret is secret.
func (ts *tokenSet) lookup(secret string) (*hashedToken, bool) {
	d := sha256.Sum256([]byte(secret))
	var found *hashedToken
	for _, t := range ts.tokens {
		if subtle.ConstantTimeCompare(d[:], t.digest[:]) == 1 {
			found = t
		}
	}
	return found, found != nil
}

// requiredRole is the role a request needs: reads need read, anything that
// can change state needs write.
func requiredRole(r *http.Request) Role {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return RoleRead
	}
	return RoleWrite
}

// authenticate requires a bearer token with a role allowing the request
// and records the token's name as the request's actor. A listener without
// tokens (allowed on loopback only) lets every request through as actor
// "tcp". The request runs under the token's lifetime as well as its own:
// a reload that removes or changes the token ends it (an event stream
// closes), so a revoked token keeps nothing open.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := s.tcp.load()
		if public(r) {
			next.ServeHTTP(w, r)
			return
		}
		if a.tokens == nil {
			serveWhile(a.anonymous, next, w, withActor(r, tcpActor))
			return
		}
		scheme, secret, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ribkeeper"`)
			writeError(w, newError(http.StatusUnauthorized, CodeUnauthorized, "",
				"missing bearer token: send the header \"Authorization: Bearer TOKEN\""))
			return
		}
		t, ok := a.tokens.lookup(strings.TrimSpace(secret))
		if !ok || t.live.ctx.Err() != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ribkeeper", error="invalid_token"`)
			writeError(w, newError(http.StatusUnauthorized, CodeUnauthorized, "",
				"unknown bearer token: use a token of an [[api.token]] of the daemon's configuration (a removed or rotated one stops working at the reload)"))
			return
		}
		if need := requiredRole(r); !t.id.role.allows(need) {
			s.log.Warn("request refused", "actor", t.id.name, "role", t.id.role, "method", r.Method, "path", r.URL.Path)
			writeError(w, newError(http.StatusForbidden, CodeForbidden, "",
				"token %q has role %s; %s %s needs role %s", t.id.name, t.id.role, r.Method, r.URL.Path, need))
			return
		}
		serveWhile(t.live, next, w, withIdentity(withActor(r, t.id.name), t.id))
	})
}

// serveWhile serves r with a context that also ends when l does.
func serveWhile(l *live, next http.Handler, w http.ResponseWriter, r *http.Request) {
	if l == nil {
		next.ServeHTTP(w, r)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(l.ctx, cancel)
	defer stop()
	next.ServeHTTP(w, r.WithContext(ctx))
}

// tcpActor is the actor of changes made over a TCP listener that has no
// tokens (loopback only).
const tcpActor = "tcp"

type actorKey struct{}

func withActor(r *http.Request, name string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), actorKey{}, name))
}

// actor is who makes the request: the token's name over TCP, socketActor
// over the control socket.
func actor(r *http.Request) string {
	if a, ok := r.Context().Value(actorKey{}).(string); ok {
		return a
	}
	return socketActor
}
