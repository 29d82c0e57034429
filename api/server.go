package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// Rules is the desired state the API reads and writes (implemented by
// *store.Store).
type Rules interface {
	// Upsert stores in; an active rule with the same match is updated in
	// place (created=false).
	Upsert(ctx context.Context, in store.Input) (r store.Rule, created bool, err error)
	// Get returns store.ErrNotFound for an unknown id.
	Get(ctx context.Context, id int64) (store.Rule, error)
	// List returns rules newest first; every state when state is "".
	List(ctx context.Context, state store.State) ([]store.Rule, error)
	// Withdraw asks for an active rule to be withdrawn.
	Withdraw(ctx context.Context, id int64, actor string) (store.Rule, error)
}

// RIB is the actual state the API shows (implemented by *bgp.Speaker).
type RIB interface {
	// Paths calls fn for each locally originated FlowSpec path; it returns
	// false, without calling fn, while the mirror is not initialised.
	Paths(fn func(m flowspec.Match, a flowspec.Action)) (ok bool)
	Peers(ctx context.Context) ([]bgp.PeerStatus, error)
}

// DefaultMaxBodyBytes is the request body limit when Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 1 << 20

// socketActor is the actor recorded for every change made over the control
// socket: whoever can open the socket is the local operator.
const socketActor = "cli"

// Options tunes a Server; the zero value is ready to use.
type Options struct {
	// MaxBodyBytes limits request bodies; larger ones get 413. 0: DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// ShutdownTimeout bounds how long Serve waits for in-flight requests
	// once its context is done. 0: 5 s.
	ShutdownTimeout time.Duration
	// Now is the clock used to turn a TTL into an expiry time. nil: time.Now.
	Now func() time.Time
}

// Server serves the HTTP JSON API.
type Server struct {
	log     hclog.Logger
	rules   Rules
	rib     RIB
	opts    Options
	handler http.Handler
}

// New returns a Server over rules and rib. A nil log discards logs.
func New(log hclog.Logger, rules Rules, rib RIB, opts Options) *Server {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{log: log, rules: rules, rib: rib, opts: opts}
	s.handler = s.routes()
	return s
}

// Handler returns the API as an http.Handler (with panic recovery, body
// limits and JSON errors), for serving on another listener or in tests.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve listens on the unix socket at socketPath and serves the API until
// ctx is done, then shuts down gracefully (in-flight requests may finish
// within Options.ShutdownTimeout) and removes the socket file. It creates
// the socket's directory if needed, replaces a stale socket file, and
// refuses to start if another process is listening on socketPath or if
// socketPath is not a socket.
func (s *Server) Serve(ctx context.Context, socketPath string) error {
	ln, cleanup, err := listenUnix(socketPath)
	if err != nil {
		return fmt.Errorf("api: control socket: %w", err)
	}
	defer cleanup()

	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          s.log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	s.log.Info("control socket listening", "socket", socketPath)

	select {
	case err := <-errc:
		return fmt.Errorf("api: serving %s: %w", socketPath, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		s.log.Warn("in-flight requests did not finish; closing", "error", err)
		hs.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("api: serving %s: %w", socketPath, err)
	}
	s.log.Info("control socket closed", "socket", socketPath)
	return nil
}
