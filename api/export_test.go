package api

import "net/http"

// Internals the external tests (package api_test) check against.
var (
	MaxBatchInfoLogs = maxBatchInfoLogs
)

// TCPHandler is the TCP listener's handler with tokens, for tests that
// drive it without a socket.
func (s *Server) TCPHandler(tokens []Token) (http.Handler, error) {
	ts, err := newTokenSet(tokens)
	if err != nil {
		return nil, err
	}
	return s.tcpHandler(ts), nil
}

// CheckTokens checks tokens as the TCP listener does when it is set up.
func CheckTokens(tokens []Token) error {
	_, err := newTokenSet(tokens)
	return err
}
