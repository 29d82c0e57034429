package api

import (
	"context"
	"net/http"
	"strings"
)

// The console's side of the API: the event stream (events.go), the time
// series (series.go), validation (validate.go), who the caller is, and
// the console's pages on the TCP listener.

// WithEvents serves the event stream e at GET /v1/events and wakes it
// after every write made through the API.
func WithEvents(e *Events) Option {
	return func(o *options) { o.events = e }
}

// WithSeries serves the points of se at GET /v1/series.
func WithSeries(se *Series) Option {
	return func(o *options) { o.series = se }
}

// WithConsole serves h, the operator console (package console), on the
// TCP listener at /ui/ (and / redirects there). Its pages are static and
// public; everything they show comes from /v1 with the bearer token the
// operator logs in with.
func WithConsole(h http.Handler) Option {
	return func(o *options) { o.console = h }
}

// consoleRoutes registers the routes of the console's side.
func (s *Server) consoleRoutes(mux *http.ServeMux) {
	mux.Handle("POST /v1/validate", s.handle(s.validateRule))
	mux.Handle("GET /v1/whoami", s.handle(s.whoami))
	if s.opts.events != nil {
		mux.HandleFunc("GET /v1/events", s.getEvents)
	}
	if s.opts.series != nil {
		mux.Handle("GET /v1/series", s.handle(s.getSeries))
	}
}

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

// withConsole serves the console's pages before authentication: a browser
// opening the console sends no token; the pages ask for one.
func (s *Server) withConsole(next http.Handler) http.Handler {
	c := s.opts.console
	if c == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		switch {
		case r.URL.Path == "/" || r.URL.Path == "/ui":
			http.Redirect(w, r, "/ui/", http.StatusFound)
		case strings.HasPrefix(r.URL.Path, "/ui/"):
			c.ServeHTTP(w, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}
