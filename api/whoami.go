package api

// A minimal GET /v1/whoami for the console: the token's name and role.
// The scoped tokens' GET /v1/whoami (branch scoped, api/scope.go) answers
// the same name and role and more (prefixes, actions, max_active_rules);
// when both meet, that one stays: delete this file, the whoami route in
// consoleRoutes and withRole in tcpHandler.

import (
	"context"
	"net/http"
	"strings"
)

// Whoami is the body of GET /v1/whoami: who the caller is and what it may
// do.
type Whoami struct {
	// Name is the actor recorded for the caller's changes: the token's
	// name over TCP, "cli" over the control socket.
	Name string `json:"name"`
	// Role is read or write.
	Role Role `json:"role"`
}

// whoami handles GET /v1/whoami.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) (int, any, error) {
	role := RoleWrite // the control socket, or a TCP listener without tokens
	if rl, ok := r.Context().Value(roleKey{}).(Role); ok {
		role = rl
	}
	return http.StatusOK, Whoami{Name: actor(r), Role: role}, nil
}

type roleKey struct{}

// withRole records the role of the request's bearer token for whoami;
// authenticate has already refused unknown tokens.
func withRole(ts *tokenSet, next http.Handler) http.Handler {
	if ts == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, secret, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if t, ok := ts.lookup(strings.TrimSpace(secret)); ok {
			r = r.WithContext(context.WithValue(r.Context(), roleKey{}, t.role))
		}
		next.ServeHTTP(w, r)
	})
}
