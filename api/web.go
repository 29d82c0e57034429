package api

import (
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// No web page can write. A browser lets any page send a "simple" POST
// (text/plain, no preflight) to any origin, and lets a page whose DNS name
// was rebound to a loopback address talk to the listener as its own
// origin. The TCP listener therefore refuses:
//
//   - every request whose Host header is not one of the listener's own
//     names (checkHost): a rebound page's requests carry the attacker's
//     name;
//   - every write from a web page of another origin (checkWrite: Origin,
//     or Sec-Fetch-Site when Origin is absent);
//   - every write whose body is not declared JSON (checkWrite): no page of
//     another origin can send that without a CORS preflight, which the
//     listener never grants.
//
// Clients that are not browsers (curl, the CLI, detectors) send no Origin
// and are unaffected, as long as they name the listener as they reach it
// and send "Content-Type: application/json" with a body.

// Error codes of the browser checks.
const (
	CodeUnknownHost          = "unknown_host"           // 421: the Host header is not a name of the listener ([api] hosts)
	CodeForeignOrigin        = "foreign_origin"         // 403: a write from a web page of another origin ([api] origins)
	CodeUnsupportedMediaType = "unsupported_media_type" // 415: a write whose body is not declared application/json
)

// hostPort is a Host header, or a listen address, split and canonical.
type hostPort struct {
	name string // lower case, no brackets, no trailing dot
	port string // "" when absent
}

// canonicalHost lower-cases a host name and drops the brackets of an IPv6
// literal and a trailing dot; an address is written as netip does.
func canonicalHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")), ".")
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String()
	}
	return h
}

func isAddr(h string) bool {
	_, err := netip.ParseAddr(h)
	return err == nil
}

// splitHost splits a Host header (or an origin's host) into name and port.
func splitHost(h string) hostPort {
	if name, port, err := net.SplitHostPort(h); err == nil {
		return hostPort{name: canonicalHost(name), port: port}
	}
	return hostPort{name: canonicalHost(h)}
}

// defaultPort is the port a Host header without one means.
func defaultPort(r *http.Request) string {
	if r.TLS != nil {
		return "443"
	}
	return "80"
}

// ownHost reports whether h names this listener as r reached it: its
// configured address, the address r's connection was accepted on, or
// "localhost" when the listener is on loopback, each with the listener's
// port or none (a client that leaves it out); or a name of [api] hosts,
// with any port. Only a DNS name can be rebound: these are names no web
// page can make its own.
func (a *tcpAccess) ownHost(r *http.Request, h hostPort) bool {
	if h.name == "" {
		return false
	}
	if a.hosts[h.name] {
		return true
	}
	if (h.port == "" || h.port == a.self.port) && (h.name == a.self.name || a.loopback && h.name == "localhost") {
		return true
	}
	// The address the connection was accepted on: on a wildcard listener,
	// the one the client dialled.
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	ap, err := netip.ParseAddrPort(la.String())
	if err != nil || h.port != "" && h.port != strconv.Itoa(int(ap.Port())) {
		return false
	}
	local := ap.Addr().Unmap().WithZone("")
	return h.name == local.String() || local.IsLoopback() && h.name == "localhost"
}

// checkHost refuses requests whose Host header does not name the listener
// (DNS rebinding): every request, the console's pages and /metrics
// included, so that a scraper or a proxy reaching the listener by another
// name needs that name in [api] hosts.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := s.tcp.load()
		if a.ownHost(r, splitHost(r.Host)) {
			next.ServeHTTP(w, r)
			return
		}
		s.log.Warn("request refused: unknown Host", "host", clip(r.Host), "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
		writeError(w, newError(http.StatusMisdirectedRequest, CodeUnknownHost, "Host",
			"Host %q is not a name of this listener: reach it by its address (or localhost on loopback), "+
				"or add the name to [api] hosts in the daemon's configuration; a web page reaching it by its own name (DNS rebinding) is refused", clip(r.Host)))
	})
}

// checkWrite refuses writes from web pages: a write (any method but GET,
// HEAD and OPTIONS) with an Origin other than the listener's own origin or
// one of [api] origins, or without Origin but with Sec-Fetch-Site
// cross-site or same-site; and a write with a body that is not declared
// application/json. A DELETE without a body needs no Content-Type: a
// browser sends one to another origin only after a preflight, which the
// listener never grants, and with an Origin, which is checked.
func (s *Server) checkWrite(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requiredRole(r) != RoleWrite {
			next.ServeHTTP(w, r)
			return
		}
		if e := s.tcp.load().foreignWrite(r); e != nil {
			s.log.Warn("write refused: from a web page", "origin", clip(r.Header.Get("Origin")),
				"sec_fetch_site", clip(r.Header.Get("Sec-Fetch-Site")), "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			writeError(w, e)
			return
		}
		if r.Method == http.MethodDelete && r.ContentLength == 0 && len(r.TransferEncoding) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		ct := r.Header.Get("Content-Type")
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			w.Header().Set("Accept-Post", "application/json")
			writeError(w, newError(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "Content-Type",
				"Content-Type %q: a write must send a JSON body with the header \"Content-Type: application/json\"", clip(ct)))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// foreignWrite returns the refusal of a write made by a page of another
// origin, or nil.
func (a *tcpAccess) foreignWrite(r *http.Request) *Error {
	origins := r.Header.Values("Origin")
	switch {
	case len(origins) == 1:
		o := origins[0]
		if a.sameOrigin(r, o) {
			return nil
		}
		if c, ok := canonicalOrigin(o); ok && a.origins[c] {
			return nil
		}
		return newError(http.StatusForbidden, CodeForeignOrigin, "Origin",
			"a web page of origin %q may not write here: only this listener's own pages may; "+
				"if that origin is yours (e.g. the console behind a reverse proxy), add it to [api] origins in the daemon's configuration", clip(o))
	case len(origins) > 1:
		return newError(http.StatusForbidden, CodeForeignOrigin, "Origin", "a write may carry at most one Origin header")
	}
	switch site := strings.ToLower(r.Header.Get("Sec-Fetch-Site")); site {
	case "cross-site", "same-site":
		return newError(http.StatusForbidden, CodeForeignOrigin, "Sec-Fetch-Site",
			"a web page of another origin (Sec-Fetch-Site: %s) may not write here: only this listener's own pages may", site)
	}
	return nil
}

// sameOrigin reports whether origin is the listener's own origin as r
// reached it: r's scheme and (already accepted) Host.
func (a *tcpAccess) sameOrigin(r *http.Request, origin string) bool {
	c, ok := canonicalOrigin(origin)
	if !ok {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	h := splitHost(r.Host)
	if h.port == "" {
		h.port = defaultPort(r)
	}
	own, _ := canonicalOrigin(scheme + "://" + net.JoinHostPort(h.name, h.port))
	return c == own
}

// canonicalOrigin writes an origin as scheme://host[:port] in lower case,
// without the scheme's default port; ok is false for anything else ("null",
// a path, user information).
func canonicalOrigin(s string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", false
	}
	h := splitHost(u.Host)
	if h.name == "" {
		return "", false
	}
	if (u.Scheme == "http" && h.port == "80") || (u.Scheme == "https" && h.port == "443") {
		h.port = ""
	}
	host := h.name
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if h.port != "" {
		host += ":" + h.port
	}
	return u.Scheme + "://" + host, true
}

// clip bounds what a client sent before it is logged or echoed.
func clip(s string) string {
	const max = 200
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
