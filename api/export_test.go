package api

import "net/http"

// Internals the external tests (package api_test) check against.
var (
	MaxBatchInfoLogs = maxBatchInfoLogs
)

// TCPHandler is the handler of a TCP listener on 127.0.0.1:80 with tokens
// that also answers to the name "rk" (as if in [api] hosts), for tests
// that drive it without a socket ("http://rk/v1/...").
func (s *Server) TCPHandler(tokens []Token) (http.Handler, error) {
	a, err := TCPConfig{Addr: "127.0.0.1:80", Tokens: tokens, Hosts: []string{"rk"}}.access()
	if err != nil {
		return nil, err
	}
	s.tcp.swap(a)
	return s.tcpChain(), nil
}

// CheckTokens checks tokens as the TCP listener does when it is set up.
func CheckTokens(tokens []Token) error {
	_, err := newTokenSet(tokens)
	return err
}

// PrecedenceBuilds counts the precedence orderings computed so far.
func (s *Server) PrecedenceBuilds() uint64 { return s.order.builds.Load() }
