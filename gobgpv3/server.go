// Package gobgpv3 lets a detector that announces through GoBGP v3's gRPC
// API — FastNetMon community with gobgp = on, unchanged — talk to
// ribkeeper instead of a gobgpd: what it would add to gobgpd's RIB becomes
// a signal from its configured source ([[source]] kind = "gobgp"), handed
// to a signals.Sink (the playbook engine), which decides what rule, if
// any, to write through the admission gate.
//
// The contract:
//   - The service is GoBGP v3's apipb.GobgpApi, from v3's generated api
//     package alone (no v3 parser or server code is linked). Two methods
//     are served: AddPath (a path → a signal; is_withdraw → its end) and
//     DeletePath with a path (its end). Every other method answers
//     codes.Unimplemented, and any other service codes.Unimplemented too,
//     saying what is served.
//   - A path is an IPv4 or IPv6 unicast prefix (IPAddressPrefix) in the
//     GLOBAL table; its attributes ORIGIN, NEXT_HOP (or MP_REACH's next
//     hop), COMMUNITIES and LARGE_COMMUNITIES go into the signal's Detail
//     for people; nothing of them is announced. Anything else (another
//     family, a VRF, a malformed prefix or attribute) is refused with
//     codes.InvalidArgument naming the field.
//   - ribkeeper keeps no paths here: no RIB, no uuid table. The answer to
//     AddPath carries no uuid, and DeletePath by uuid alone is refused.
//   - The call returns once the Sink accepted or refused the signal: a
//     refusal is the call's error (InvalidArgument for a bad signal,
//     FailedPrecondition otherwise), in the Sink's words.
//   - Bounded: a request is at most MaxMessageBytes, a path at most
//     MaxAttributes attributes, a connection at most MaxStreams calls at
//     once, a listener at most MaxConnections connections (more are
//     closed at once, with a log line), a handshake at most
//     HandshakeTimeout, and the Sink at most AcceptTimeout per signal.
//
// Listen binds the listeners (loopback, or any address with mTLS from
// TLSConfig: the GoBGP API carries no credentials).
package gobgpv3

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	apipb "github.com/osrg/gobgp/v3/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/signals"
)

// Bounds of a listener; fixed, since one detector needs one connection
// and one call at a time.
const (
	MaxMessageBytes  = 64 << 10
	MaxHeaderBytes   = 16 << 10
	MaxAttributes    = 64
	MaxStreams       = 16
	MaxConnections   = 64
	HandshakeTimeout = 10 * time.Second
	AcceptTimeout    = 10 * time.Second
	// IdleTimeout closes a connection without calls (gracefully: a
	// client dials again at its next call).
	IdleTimeout = 10 * time.Minute
)

// The served methods.
const (
	methodAddPath    = "/apipb.GobgpApi/AddPath"
	methodDeletePath = "/apipb.GobgpApi/DeletePath"
)

// Config is what a Server needs.
type Config struct {
	// Source names the configured source whose signals these are.
	Source string
	Sink   signals.Sink
	Log    hclog.Logger
	// Clock stamps signals (default clock.Real).
	Clock clock.Clock
	// TLS, if set, is the listeners' mTLS (TLSConfig).
	TLS *tls.Config
	// AcceptTimeout bounds the Sink's Accept (default AcceptTimeout).
	AcceptTimeout time.Duration
}

// Server serves one source's listeners.
type Server struct {
	apipb.UnimplementedGobgpApiServer
	cfg Config
	log hclog.Logger

	mu      sync.Mutex
	refused time.Time // the last log line about a refused connection
}

// New returns a Server for cfg.
func New(cfg Config) *Server {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	if cfg.AcceptTimeout <= 0 {
		cfg.AcceptTimeout = AcceptTimeout
	}
	return &Server{cfg: cfg, log: cfg.Log}
}

// Serve serves the GoBGP v3 API on lns until ctx is done, then closes
// them. It returns nil at ctx's end, or the first listener's error.
func (s *Server) Serve(ctx context.Context, lns ...net.Listener) error {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxHeaderListSize(MaxHeaderBytes),
		grpc.MaxConcurrentStreams(MaxStreams),
		grpc.ConnectionTimeout(HandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: IdleTimeout}),
		grpc.ChainUnaryInterceptor(s.onlyServedUnary),
		grpc.ChainStreamInterceptor(onlyServedStream),
		grpc.UnknownServiceHandler(unknownService),
	}
	if s.cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.cfg.TLS)))
	}
	gs := grpc.NewServer(opts...)
	apipb.RegisterGobgpApiServer(gs, s)

	errs := make(chan error, len(lns))
	for _, ln := range lns {
		s.log.Info("serving the GoBGP v3 API (AddPath, DeletePath) for a detector", "source", s.cfg.Source, "listen", ln.Addr().String(), "mtls", s.cfg.TLS != nil)
		go func() { errs <- gs.Serve(&capped{Listener: ln, slots: make(chan struct{}, MaxConnections), s: s}) }()
	}
	select {
	case <-ctx.Done():
		gs.Stop()
		return nil
	case err := <-errs:
		gs.Stop()
		return fmt.Errorf("GoBGP v3 API listener of source %q: %w", s.cfg.Source, err)
	}
}

// notServed is the message of every call that is not AddPath or
// DeletePath.
func notServed(method string) error {
	return status.Errorf(codes.Unimplemented,
		"ribkeeper serves only AddPath and DeletePath of GoBGP v3's apipb.GobgpApi, for detectors such as FastNetMon (gobgp = on): %s is not served; read ribkeeper's rules and routes with `ribkeeper rule list`, `ribkeeper rib` or its HTTP API", method)
}

// onlyServedUnary refuses every unary method but AddPath and DeletePath,
// and turns a panic of theirs (a bug: nothing a client sends may stop the
// daemon) into the call's error.
func (s *Server) onlyServedUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (_ any, err error) {
	if info.FullMethod != methodAddPath && info.FullMethod != methodDeletePath {
		return nil, notServed(info.FullMethod)
	}
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("BUG: a GoBGP v3 API call panicked; the call is refused, please report it", "source", s.cfg.Source, "op", info.FullMethod, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = status.Errorf(codes.Internal, "%s: ribkeeper failed on this call (a bug, logged): the signal was not taken", info.FullMethod)
		}
	}()
	return handler(ctx, req)
}

// onlyServedStream refuses every streaming method of apipb.GobgpApi;
// other services go on to unknownService.
func onlyServedStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if strings.HasPrefix(info.FullMethod, "/apipb.GobgpApi/") {
		return notServed(info.FullMethod)
	}
	return handler(srv, ss)
}

func unknownService(srv any, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	if strings.HasPrefix(method, "/api.GoBgpService/") {
		return status.Errorf(codes.Unimplemented,
			"%s is GoBGP v4's API: this listener serves GoBGP v3's apipb.GobgpApi (AddPath, DeletePath) for detectors; ribkeeper's own GoBGP v4 API is on [bgp] grpc_listen", method)
	}
	return status.Errorf(codes.Unimplemented,
		"%s is not served: this listener serves GoBGP v3's apipb.GobgpApi (AddPath, DeletePath) for detectors such as FastNetMon", method)
}

// AddPath turns a path into a signal: its start, or its end when the path
// is a withdrawal.
func (s *Server) AddPath(ctx context.Context, req *apipb.AddPathRequest) (*apipb.AddPathResponse, error) {
	if err := table(req.GetTableType(), req.GetVrfId()); err != nil {
		return nil, invalid("AddPath", err)
	}
	if req.GetPath() == nil {
		return nil, invalid("AddPath", errors.New("no path: set path to the attacked prefix (IPAddressPrefix)"))
	}
	state := signals.Start
	if req.GetPath().GetIsWithdraw() {
		state = signals.End
	}
	if err := s.signal(ctx, "AddPath", req.GetPath(), state); err != nil {
		return nil, err
	}
	return &apipb.AddPathResponse{}, nil
}

// DeletePath ends the signal of its path.
func (s *Server) DeletePath(ctx context.Context, req *apipb.DeletePathRequest) (*emptypb.Empty, error) {
	if err := table(req.GetTableType(), req.GetVrfId()); err != nil {
		return nil, invalid("DeletePath", err)
	}
	if req.GetPath() == nil {
		return nil, invalid("DeletePath", errors.New("no path: ribkeeper keeps no paths for this API, so it ends the signal of the path given; a uuid or a whole family is not accepted"))
	}
	if err := s.signal(ctx, "DeletePath", req.GetPath(), signals.End); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

// signal decodes p and hands the signal to the Sink.
func (s *Server) signal(ctx context.Context, method string, p *apipb.Path, state signals.State) error {
	d, err := decodePath(p)
	if err != nil {
		s.log.Warn("GoBGP v3 API call refused", "source", s.cfg.Source, "op", method, "error", err)
		return invalid(method, err)
	}
	sig := signals.Signal{
		Source: s.cfg.Source,
		Target: d.prefix,
		State:  state,
		At:     s.cfg.Clock.Now(),
		Detail: d.detail(method),
	}
	if err := sig.Check(); err != nil {
		s.log.Warn("GoBGP v3 API call refused", "source", s.cfg.Source, "op", method, "error", err)
		return invalid(method, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.AcceptTimeout)
	defer cancel()
	if err := s.cfg.Sink.Accept(ctx, sig); err != nil {
		s.log.Warn("signal refused", "source", s.cfg.Source, "op", method, "target", sig.Target, "state", sig.State, "error", err)
		switch {
		case errors.Is(err, signals.ErrInvalid):
			return invalid(method, err)
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
			return status.Errorf(codes.DeadlineExceeded, "%s: the signal for %s was not taken in time (the call's deadline, or ribkeeper's bound of %v): see ribkeeper's log for what held it", method, sig.Target, s.cfg.AcceptTimeout)
		default:
			return status.Errorf(codes.FailedPrecondition, "%s: ribkeeper refused the signal for %s from source %q: %v", method, sig.Target, s.cfg.Source, err)
		}
	}
	s.log.Info("signal accepted", "source", s.cfg.Source, "op", method, "target", sig.Target, "state", sig.State, "detail", sig.Detail)
	return nil
}

func invalid(method string, err error) error {
	return status.Errorf(codes.InvalidArgument, "%s: %v", method, err)
}

// table accepts the global table only: a detector's announcement is not a
// VRF's route.
func table(t apipb.TableType, vrf string) error {
	if t != apipb.TableType_GLOBAL || vrf != "" {
		return fmt.Errorf("table %s, vrf %q: ribkeeper takes paths of the GLOBAL table only (table_type GLOBAL, no vrf_id)", t, vrf)
	}
	return nil
}

// capped is a listener that holds at most cap(slots) connections open;
// one past it is closed at once.
type capped struct {
	net.Listener
	slots chan struct{}
	s     *Server
}

func (c *capped) Accept() (net.Conn, error) {
	for {
		conn, err := c.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case c.slots <- struct{}{}:
			return &slotConn{Conn: conn, free: func() { <-c.slots }}, nil
		default:
			conn.Close()
			c.s.refusedConn(conn.RemoteAddr())
		}
	}
}

// refusedConn logs a connection refused by the cap, at most every ten
// seconds.
func (s *Server) refusedConn(from net.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if now.Sub(s.refused) < 10*time.Second {
		return
	}
	s.refused = now
	s.log.Warn("connection to the GoBGP v3 API refused: the listener holds its fixed maximum of connections (a detector needs one); find the client that opens them", "source", s.cfg.Source, "remote", from.String(), "max_connections", MaxConnections)
}

type slotConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *slotConn) Close() error {
	c.once.Do(c.free)
	return c.Conn.Close()
}
