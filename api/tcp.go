package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// TCPConfig is the optional TCP listener of the API.
type TCPConfig struct {
	// Addr is host:port, e.g. "127.0.0.1:8080".
	Addr string
	// Tokens are the bearer tokens accepted. Without tokens the listener
	// must be on a loopback address; every request then acts as "tcp".
	Tokens []Token
	// CertFile and KeyFile, both set, serve HTTPS (TLS 1.2 or later).
	CertFile, KeyFile string
	// Hosts are further names (or addresses) clients use to reach the
	// listener, matched against the Host header whatever its port: a name
	// of the operator's DNS, or the name a reverse proxy passes on. The
	// listener's own address needs no entry (see checkHost).
	Hosts []string
	// Origins are further web origins ("https://noc.example.net") whose
	// pages may write, e.g. the console behind a reverse proxy; the
	// listener's own origin needs no entry (see checkWrite).
	Origins []string
	// MaxConnections caps the open connections (0: derived from the
	// open-file limit, see DeriveLimits); one more is closed at once.
	MaxConnections int
}

// ErrNoTokens is returned by ServeTCP (and CheckTCP) for a listener on a
// non-loopback address without tokens: anyone who can reach it could
// blackhole traffic.
var ErrNoTokens = errors.New("a TCP listener on a non-loopback address needs at least one token")

// CheckTCP validates c without listening: the address, the tokens, the
// loopback rule, the names and origins, and the TLS key pair.
func CheckTCP(c TCPConfig) error {
	if _, err := c.access(); err != nil {
		return err
	}
	_, err := c.tls()
	return err
}

// access validates what SetTCPAccess may change: the tokens, the loopback
// rule, the names and the origins.
func (c TCPConfig) access() (*tcpAccess, error) {
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", c.Addr, err)
	}
	a := &tcpAccess{self: hostPort{name: canonicalHost(host), port: port}, loopback: IsLoopback(host),
		hosts: map[string]bool{}, origins: map[string]bool{}}
	if len(c.Tokens) > 0 {
		if a.tokens, err = newTokenSet(c.Tokens); err != nil {
			return nil, err
		}
	} else if !a.loopback {
		return nil, fmt.Errorf("listen address %s: %w", c.Addr, ErrNoTokens)
	} else {
		a.anonymous = newLive()
	}
	for _, h := range c.Hosts {
		n := canonicalHost(h)
		if n == "" || strings.ContainsAny(n, ":/ ") && !isAddr(n) {
			return nil, fmt.Errorf("[api] hosts: %q is not a name or an address (write it without scheme or port)", h)
		}
		a.hosts[n] = true
	}
	for _, o := range c.Origins {
		n, ok := canonicalOrigin(o)
		if !ok {
			return nil, fmt.Errorf("[api] origins: %q is not scheme://host[:port], e.g. \"https://noc.example.net\"", o)
		}
		a.origins[n] = true
	}
	return a, nil
}

// tls loads the key pair, if any.
func (c TCPConfig) tls() (*tls.Config, error) {
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, errors.New("TLS needs both a certificate and a key file")
	}
	if c.CertFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS key pair: %w", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}

// IsLoopback reports whether host names only loopback addresses. An empty
// host or a wildcard address listens everywhere and is not loopback.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// ServeTCP serves the API on a TCP listener until ctx is done. Requests
// need a bearer token ("Authorization: Bearer SECRET") whose role allows
// them: read for GET routes and /metrics, write for the rest; the token's
// name is the actor recorded for changes. It refuses to listen on a
// non-loopback address without tokens (ErrNoTokens). Every request must
// name the listener in its Host header, and a write must be JSON from no
// web page but the listener's own (checkHost, checkWrite). The tokens,
// names and origins can be changed while it serves (SetTCPAccess; one
// made before it starts is kept); the address and the key pair cannot.
func (s *Server) ServeTCP(ctx context.Context, c TCPConfig) error {
	a, err := c.access()
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	tc, err := c.tls()
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", c.Addr)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	maxConns := c.MaxConnections
	if maxConns <= 0 {
		maxConns = DeriveLimits(OpenFileLimit()).MaxConnections
	}
	ln = newLimitListener(ln, maxConns, s.log)
	what := "HTTP API"
	if tc != nil {
		ln = tls.NewListener(ln, tc)
		what = "HTTPS API"
	}
	s.tcp.install(a)
	if s.tcp.load().tokens == nil {
		s.log.Warn("TCP API without tokens: every local user can change rules", "address", c.Addr)
	}
	return s.serve(ctx, ln, s.tcpChain(), what, ln.Addr().String())
}

// SetTCPAccess replaces the TCP listener's tokens, names and origins (a
// reload): c's address only decides whether it may be without tokens; the
// listener keeps the address and key pair it was started with. A token
// that is gone, or whose secret, role or scope changed, stops working at
// once, and every request it has open (an event stream) ends; so do the
// open requests of a listener without tokens that now has some. On error
// nothing changes.
func (s *Server) SetTCPAccess(c TCPConfig) (TokenChanges, error) {
	a, err := c.access()
	if err != nil {
		return TokenChanges{}, fmt.Errorf("api: %w", err)
	}
	return s.tcp.swap(a), nil
}

// tcpHandler is the TCP listener's chain with the tokens ts (nil: none),
// for tests that serve it themselves.
func (s *Server) tcpHandler(ts *tokenSet) http.Handler {
	a := &tcpAccess{tokens: ts, hosts: map[string]bool{}, origins: map[string]bool{}}
	if ts == nil {
		a.loopback, a.anonymous = true, newLive()
	}
	s.tcp.swap(a)
	return s.tcpChain()
}

// tcpChain is what the TCP listener serves: the Host check before anything
// (the console's pages included), then the console, the write check and
// authentication by token, or, for the detectors' ways in, by their
// source's secret (signals.go).
func (s *Server) tcpChain() http.Handler {
	return viaTCP(s.instrument(s.recoverer(s.checkHost(s.withConsole(s.checkWrite(s.withSignalsIn(s.authenticate(s.inner))))))))
}
