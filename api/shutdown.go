package api

import (
	"context"
	"net/http"
)

// Stopping the daemon from the CLI.
//
// A SIGTERM (systemctl stop|restart) keeps every rule on the routers that
// negotiated graceful restart: the sessions close without a NOTIFICATION
// and the next start sweeps only what is no longer desired. Taking every
// mitigation off the routers is a deliberate act, hence its own command:
//
//	ribkeeper shutdown --withdraw   withdraw everything, wait for the routers, stop
//	ribkeeper shutdown              stop like SIGTERM (rules stay with GR)
//
// Only the control socket serves it: stopping the appliance is for whoever
// can open the socket (the local operator), not for API token holders.

// Shutdowner stops the daemon (implemented in main). withdraw asks for
// every path to be withdrawn and the withdrawals to reach the routers
// first; Shutdown returns once that is done (or failed) and the speaker is
// stopped; the process exits after the answer is sent.
type Shutdowner interface {
	Shutdown(ctx context.Context, withdraw bool) error
}

// WithShutdown serves POST /v1/shutdown on the control socket.
func WithShutdown(sd Shutdowner) Option {
	return func(o *options) { o.shutdown = sd }
}

// ShutdownRequest is the body of POST /v1/shutdown.
type ShutdownRequest struct {
	// Withdraw takes every rule off the routers before stopping.
	Withdraw bool `json:"withdraw"`
}

// ShutdownResponse is its answer.
type ShutdownResponse struct {
	Withdrawn bool   `json:"withdrawn"`         // every path was withdrawn and sent
	Message   string `json:"message,omitempty"` // what happened, for the operator
}

// withShutdown serves POST /v1/shutdown next to h (control socket only).
func (s *Server) withShutdown(h http.Handler) http.Handler {
	if s.opts.shutdown == nil {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/shutdown", s.handle(s.shutdown))
	mux.Handle("/", h)
	return mux
}

func (s *Server) shutdown(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req ShutdownRequest
	if err := decodeJSON(r, &req, s.opts.maxBodyBytes); err != nil {
		return 0, nil, err
	}
	s.log.Warn("shutdown requested over the control socket", "withdraw", req.Withdraw)
	// Not the request's context: the client giving up must not leave the
	// withdrawal half done.
	err := s.opts.shutdown.Shutdown(context.WithoutCancel(r.Context()), req.Withdraw)
	if err != nil {
		return 0, nil, newError(http.StatusServiceUnavailable, CodeUnavailable, "",
			"%s", OneLine(err.Error()))
	}
	msg := "stopped; routers with graceful restart keep the rules until the next start"
	if req.Withdraw {
		msg = "every rule withdrawn and sent to the routers; stopped"
	}
	return http.StatusOK, ShutdownResponse{Withdrawn: req.Withdraw, Message: msg}, nil
}
