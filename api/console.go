package api

import (
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
	if s.opts.events != nil {
		mux.HandleFunc("GET /v1/events", s.getEvents)
	}
	if s.opts.series != nil {
		mux.Handle("GET /v1/series", s.handle(s.getSeries))
	}
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
