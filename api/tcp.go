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
	// MaxConnections caps the open connections (0: derived from the
	// open-file limit, see DeriveLimits); one more is closed at once.
	MaxConnections int
}

// ErrNoTokens is returned by ServeTCP (and CheckTCP) for a listener on a
// non-loopback address without tokens: anyone who can reach it could
// blackhole traffic.
var ErrNoTokens = errors.New("a TCP listener on a non-loopback address needs at least one token")

// CheckTCP validates c without listening: the address, the tokens, the
// loopback rule and the TLS key pair.
func CheckTCP(c TCPConfig) error {
	_, _, err := c.prepare()
	return err
}

func (c TCPConfig) prepare() (*tokenSet, *tls.Config, error) {
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen address %q: %w", c.Addr, err)
	}
	var ts *tokenSet
	if len(c.Tokens) > 0 {
		if ts, err = newTokenSet(c.Tokens); err != nil {
			return nil, nil, err
		}
	} else if !IsLoopback(host) {
		return nil, nil, fmt.Errorf("listen address %s: %w", c.Addr, ErrNoTokens)
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, nil, errors.New("TLS needs both a certificate and a key file")
	}
	var tc *tls.Config
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("TLS key pair: %w", err)
		}
		tc = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	}
	return ts, tc, nil
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
// non-loopback address without tokens (ErrNoTokens).
func (s *Server) ServeTCP(ctx context.Context, c TCPConfig) error {
	ts, tc, err := c.prepare()
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
	if ts == nil {
		s.log.Warn("TCP API without tokens: every local user can change rules", "address", c.Addr)
	}
	return s.serve(ctx, ln, s.tcpHandler(ts), what, ln.Addr().String())
}

func (s *Server) tcpHandler(ts *tokenSet) http.Handler {
	return viaTCP(s.instrument(s.recoverer(s.withConsole(s.authenticate(ts, s.inner)))))
}
