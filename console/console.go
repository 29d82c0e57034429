// Package console is ribkeeper's operator console: a few static pages
// (HTML, CSS and hand-written JavaScript, no build step, no third-party
// code) embedded in the binary and served by the API's TCP listener at
// /ui/ (api.WithConsole).
//
// The pages hold no data and no secret: everything they show comes from
// the /v1 API of the same origin, called with the bearer token the
// operator logs in with (kept in the tab's session storage, sent as an
// Authorization header; no cookies, so no cross-site request can act with
// it). They follow changes through the event stream (GET /v1/events), draw
// the chart from GET /v1/series, and check rule text as it is typed with
// POST /v1/validate. A read token gets the same pages without the controls
// that change anything.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// contentSecurityPolicy lets the pages load only their own files and talk
// only to their own origin: no inline script, no third-party anything.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// Handler serves the console's files under /ui/.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic("console: embedded files: " + err.Error()) // fixed at build time
	}
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		// The files change with the binary; a browser must not keep an
		// old script beside a new API.
		h.Set("Cache-Control", "no-cache")
		if strings.HasSuffix(r.URL.Path, "/") && r.URL.Path != "/ui/" {
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	})
}
