package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/notify"
	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
)

// Rules is the desired state the API reads (implemented by
// *store.Store). Errors matching store.ErrNotFound become 404 and
// store.ErrUnavailable 503. The API never writes it: every write goes
// through the Gate.
type Rules interface {
	// Get returns store.ErrNotFound for an unknown id.
	Get(ctx context.Context, id int64) (store.Rule, error)
	// List returns rules newest first; every state when state is "".
	List(ctx context.Context, state store.State) ([]store.Rule, error)
	// ListPage returns one page of List's order after an id cursor.
	ListPage(ctx context.Context, p store.Page) ([]store.Rule, error)
	// History returns a rule's audit trail, oldest first; store.ErrNotFound
	// for an unknown id.
	History(ctx context.Context, id int64) ([]store.Event, error)
	// Counts counts the stored rules by family, state and this site's
	// announce status without reading them all.
	Counts(ctx context.Context) ([]store.Count, error)
	// DestinationCounts counts them by destination prefix too: what a
	// scoped token's status sums.
	DestinationCounts(ctx context.Context) ([]store.DestinationCount, error)
	// Sites returns the sites known to the store (each appliance
	// registers its own at start), sorted.
	Sites(ctx context.Context) ([]string, error)
	// Revision moves on every change of the rules or their status: what
	// the precedence order is computed again for (precedence.go).
	Revision(ctx context.Context) (int64, error)
	// SetCounts counts the active rules of each declarative set, per
	// set and last writer.
	SetCounts(ctx context.Context) ([]store.SetCount, error)
}

// Gate is the one door of every write (implemented by *admit.Gate): it
// takes the request's actor and answers typed refusals (*admit.Refusal),
// which the API maps to statuses and codes.
type Gate interface {
	Add(ctx context.Context, a admit.Actor, req admit.Request) (store.Rule, bool, error)
	AddMany(ctx context.Context, a admit.Actor, reqs []admit.Request) ([]store.Rule, error)
	Validate(ctx context.Context, a admit.Actor, req admit.Request) (admit.Verdict, error)
	Withdraw(ctx context.Context, a admit.Actor, id int64) (store.Rule, error)
	WithdrawMatch(ctx context.Context, a admit.Actor, text string) ([]store.Rule, error)
	WithdrawMatches(ctx context.Context, a admit.Actor, texts []string) ([]store.Rule, error)
	// NewSetLines, ApplySetLines and WithdrawSet write declarative sets
	// (PUT and DELETE /v1/sets/{name}); Limits are the bounds of
	// one request ([limits]): a 413 names max_batch_rules.
	NewSetLines(a admit.Actor) *admit.SetLines
	ApplySetLines(ctx context.Context, a admit.Actor, name string, lines *admit.SetLines) (admit.SetResult, error)
	WithdrawSet(ctx context.Context, a admit.Actor, name string) (admit.SetResult, error)
	Limits() admit.Limits
}

// RIB is the actual state the API shows (implemented by *bgp.Speaker).
type RIB interface {
	// Paths calls fn for each locally originated FlowSpec path; it returns
	// false, without calling fn, while the mirror is not initialised.
	Paths(fn func(m flowspec.Match, a flowspec.Action)) (ok bool)
	Peers(ctx context.Context) ([]bgp.PeerStatus, error)
	// Delivery returns the established peers whose Adj-RIB-Out holds the
	// path for m, and the number of configured peers of its family.
	Delivery(m flowspec.Match) (peers []string, total int)
	// NotSent says, per configured peer whose router profile keeps m's
	// rule back, why ("not sent to 127.0.0.4: frr resets sessions on !=").
	NotSent(m flowspec.Match) []string
	// PathAges says when each local path was announced (GET /v1/rib).
	PathAges(ctx context.Context) (map[flowspec.Match]time.Time, error)
}

// DefaultMaxBodyBytes is the default request body limit.
const DefaultMaxBodyBytes = 1 << 20

// socketActor is the actor recorded for every change made over the control
// socket: whoever can open the socket is the local operator.
const socketActor = "cli"

// Option tunes a Server.
type Option func(*options)

type options struct {
	maxBodyBytes    int64
	shutdownTimeout time.Duration
	socketCheck     time.Duration
	now             func() time.Time
	metrics         http.Handler
	observer        RequestObserver
	passes          Passes
	shutdown        Shutdowner
	events          *Events        // console.go
	series          *Series        // console.go
	console         http.Handler   // console.go
	store           StoreCondition // status.go
	notifications   Notifications
	incidents       Incidents    // incidents.go
	signalsIn       http.Handler // signals.go
	signalLog       SignalLog    // signals.go
}

// Notifications is the delivery state of the notification receivers
// (implemented by *notify.Notifier), shown by GET /v1/status.
type Notifications interface {
	Status() []notify.TargetStatus
}

// WithNotifications lets GET /v1/status show the notification receivers'
// delivery state (queued, delivered, retries, last error).
func WithNotifications(n Notifications) Option {
	return func(o *options) { o.notifications = n }
}

// RequestObserver is the metrics sink (implemented by *metrics.Metrics):
// it is told about every request the API answered, and it counts passes
// for GET /v1/status. route is the matched route pattern without its
// method, e.g. "/v1/rules/{id}", or "unmatched".
type RequestObserver interface {
	APIRequest(route, method string, code int, d time.Duration)
	// PassTotals counts the reconcile passes since start.
	PassTotals() Totals
}

// Passes is the reconciler as the API shows it (implemented by
// *reconcile.Reconciler).
type Passes interface {
	// LastPass is the result of the most recent pass (GET /v1/status).
	LastPass() reconcile.PassResult
	// Drift counts the drift repairs since start (GET /v1/status).
	Drift() reconcile.DriftCounts
	// Preview is the plan the next pass would apply (GET /v1/diff).
	Preview(ctx context.Context) (reconcile.Plan, error)
}

// WithMetrics serves h at GET /metrics and reports every request to obs;
// either may be nil.
func WithMetrics(h http.Handler, obs RequestObserver) Option {
	return func(o *options) {
		o.metrics = h
		o.observer = obs
	}
}

// WithReconciler lets GET /v1/status report the last reconcile pass.
func WithReconciler(p Passes) Option {
	return func(o *options) { o.passes = p }
}

// WithMaxBodyBytes limits request bodies (default DefaultMaxBodyBytes);
// larger ones get 413 body_too_large.
func WithMaxBodyBytes(n int64) Option {
	return func(o *options) {
		if n > 0 {
			o.maxBodyBytes = n
		}
	}
}

// WithShutdownTimeout bounds how long Serve waits for in-flight requests
// once its context is done (default 5 s).
func WithShutdownTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.shutdownTimeout = d
		}
	}
}

// WithSocketCheck sets how often Serve checks that the control socket's
// file is still there (default DefaultSocketCheck).
func WithSocketCheck(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.socketCheck = d
		}
	}
}

// WithClock sets the clock of the API's own times (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// Server serves the HTTP JSON API.
type Server struct {
	log     hclog.Logger
	rules   Rules
	gate    Gate
	rib     RIB
	opts    options
	mux     *http.ServeMux
	inner   http.Handler // routes with body limits and JSON 404/405, no auth
	handler http.Handler // what the control socket serves
	tcp     tcpState     // the TCP listener's tokens, names and origins
	order   orderCache   // the precedence order, once per store revision
}

// New returns a Server that reads rules and rib and writes through gate.
// A nil log discards logs.
func New(log hclog.Logger, rules Rules, gate Gate, rib RIB, opts ...Option) *Server {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	o := options{maxBodyBytes: DefaultMaxBodyBytes, shutdownTimeout: 5 * time.Second, socketCheck: DefaultSocketCheck, now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	s := &Server{log: log, rules: rules, gate: gate, rib: rib, opts: o}
	if s.opts.metrics != nil {
		s.opts.metrics = unscopedOnly(s.opts.metrics)
	}
	s.mux = s.routes()
	s.inner = s.limitBody(jsonFallback(s.mux))
	s.handler = s.instrument(s.recoverer(s.inner))
	return s
}

// Handler returns the API as an http.Handler (with panic recovery, body
// limits and JSON errors), for serving on another listener or in tests.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve listens on the unix socket at socketPath and serves the API until
// ctx is done, then shuts down gracefully (in-flight requests may finish
// within the shutdown timeout) and removes the socket file. It creates
// the socket's directory if needed, replaces a stale socket file, and
// refuses to start if another process is listening on socketPath or if
// socketPath is not a socket. While it serves, a socket file that was
// removed is recreated within the socket check interval
// (WithSocketCheck), with a log line.
func (s *Server) Serve(ctx context.Context, socketPath string) error {
	ln, err := newSocketListener(socketPath, s.log)
	if err != nil {
		return fmt.Errorf("api: control socket: %w", err)
	}
	defer ln.Close()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go ln.watch(wctx, s.opts.socketCheck)
	return s.serve(ctx, ln, s.withShutdown(withProfiling(s.handler)), "control socket", socketPath)
}

// serve serves h on ln until ctx is done, then shuts down gracefully.
func (s *Server) serve(ctx context.Context, ln net.Listener, h http.Handler, what, where string) error {
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          s.log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	s.log.Info(what+" listening", "address", where)

	select {
	case err := <-errc:
		return fmt.Errorf("api: serving %s: %w", where, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		s.log.Warn("in-flight requests did not finish; closing", "error", err)
		hs.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("api: serving %s: %w", where, err)
	}
	s.log.Info(what+" closed", "address", where)
	return nil
}
