// Package bgp is ribkeeper's BGP speaker: GoBGP v3 embedded as a library,
// with upstream peers, a global import policy that rejects everything peers
// send, and an in-memory mirror of the FlowSpec paths we originate.
//
// It is the only package that imports GoBGP. Everything crosses its
// boundary as flowspec values; GoBGP types never leak out, so moving to a
// later GoBGP is this package's change alone.
//
// GoBGP facts this package is built around (v3.37.0, read in its source):
//   - Every API call is a round trip into one server loop and ignores its
//     context. Every call here is bounded by a timeout; a call that times out
//     may still take effect later, so the mirror, not the call's result, is
//     the truth about what is in the RIB.
//   - Paths are handed over as wire bytes (NLRI and attributes), the cheapest
//     form GoBGP accepts.
//   - Received routes never enter the RIB (import policy), but they still sit
//     in each peer's Adj-RIB-In and are parsed by GoBGP: a malformed IPv6
//     FlowSpec prefix component in an UPDATE panics GoBGP's parser in the
//     peer's goroutine (no recover; fixed upstream in v4 only) and takes
//     the process down. GoBGP parses MP_REACH by its AFI/SAFI before it
//     checks what was negotiated, so not negotiating ipv6-flowspec (the
//     default for IPv4 neighbors, see Neighbor.Families) only protects
//     against peers that follow the negotiation; peers must be trusted
//     routers (TCP MD5 where possible).
//   - Memory that is not given back: a withdrawn path leaves its table
//     destination behind (about 630 B per distinct NLRI ever announced; no
//     API path deletes it: only peers' Adj-RIB-In withdrawals are marked
//     "dropped", which table.deleteDest needs), and after Stop GoBGP's
//     server loop goroutine, which cannot be ended, keeps the stopped
//     server's RIB alive. Restart (StopBgp+StartBgp on the same server)
//     swaps in a fresh RIB and frees both; Compactor does it when Leaked
//     passes a threshold, at the price of a session reset.
package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	api "github.com/osrg/gobgp/v3/api"
	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
	"github.com/osrg/gobgp/v3/pkg/server"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// DefaultCallTimeout bounds each GoBGP API call when Config.CallTimeout is 0.
const DefaultCallTimeout = 10 * time.Second

// Config is the speaker's configuration (main.go maps config.Config to it).
type Config struct {
	ASN             uint32
	RouterID        netip.Addr
	ListenAddresses []string // e.g. ["127.0.0.1"]; empty: GoBGP's default (all, both families)
	ListenPort      int32    // -1: no listener (tests); 0: 179
	Neighbors       []Neighbor

	// GRPCListen, if set ("127.0.0.1:50051"), starts GoBGP's own gRPC API
	// there, for the stock gobgp CLI. It has no authentication: anything
	// added or deleted through it is drift that the reconciler repairs.
	// Non-loopback addresses are refused unless GRPCAllowRemote is set.
	GRPCListen      string
	GRPCAllowRemote bool

	// CallTimeout bounds each call into GoBGP (0: DefaultCallTimeout).
	CallTimeout time.Duration

	// RouteNextHop4 and RouteNextHop6 are this site's next hops for routes
	// (RTBH) whose action sets none (zero: such routes are refused until
	// SetRouteNextHops sets one). See unicast.go.
	RouteNextHop4 netip.Addr
	RouteNextHop6 netip.Addr

	// PeerGroups and DynamicNeighbors accept sessions from routers that
	// dial in from a prefix (neighbors.go).
	PeerGroups       []PeerGroup
	DynamicNeighbors []DynamicNeighbor
}

// Neighbor is one upstream BGP peer.
type Neighbor struct {
	Address      netip.Addr
	ASN          uint32
	Port         uint16     // 0: 179
	LocalAddress netip.Addr // zero: kernel's choice

	// Families are the families negotiated with the peer (FlowSpec, and
	// unicast for routes such as RTBH). Empty
	// means the family of Address only (an IPv4 neighbor gets
	// ipv4-flowspec). IPv6 FlowSpec is not negotiated unless asked for
	// because GoBGP v3 panics on a malformed IPv6 FlowSpec NLRI received
	// from a peer; a family is negotiated for both directions at once.
	Families    []flowspec.Family
	Passive     bool
	Description string

	// HoldTime is proposed in OPEN (0: GoBGP's 90 s). Keepalives are sent
	// at a third of the negotiated hold time unless KeepaliveInterval is set.
	HoldTime          time.Duration
	KeepaliveInterval time.Duration
	// GracefulRestart advertises the graceful restart capability (RFC
	// 4724) for every family with RestartTime (0: GoBGP's default), so
	// the router keeps our paths while the process restarts.
	GracefulRestart bool
	RestartTime     time.Duration
	// MultihopTTL enables eBGP multihop with this TTL (0: directly
	// connected, TTL 1, for eBGP).
	MultihopTTL uint8
	// Password enables TCP MD5 (RFC 2385) with this key (at most 80 bytes).
	// Start fails if the key cannot be installed. Go 1.24+ makes listeners
	// Multipath TCP by default and Linux refuses MD5 on those: a binary
	// that listens and uses MD5 needs //go:debug multipathtcp=0 in its main
	// package (or godebug in go.mod).
	Password string
}

// Speaker is the embedded GoBGP server plus the mirror of our own paths.
// Its methods are safe for concurrent use.
type Speaker struct {
	log     hclog.Logger
	cfg     Config
	timeout time.Duration

	srv    *server.BgpServer
	fam4   *api.Family
	fam6   *api.Family
	cancel context.CancelFunc // stops the watches

	mirror mirror
	// delivery and restarts: see delivery.go and restart.go.
	delivery deliveryTable
	restarts restartState
	routes   routeState
	peers    peerTable
	changes  chan struct{}

	mu      sync.Mutex
	started bool
	stopped bool

	// GoBGP only logs some failures; the log adapter reports them here.
	md5mu     sync.Mutex
	md5Failed map[string]string // neighbor address → error text
}

// New returns a speaker for cfg. Nothing runs until Start.
func New(log hclog.Logger, cfg Config) *Speaker {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	t := cfg.CallTimeout
	if t <= 0 {
		t = DefaultCallTimeout
	}
	s := &Speaker{
		log:     log,
		cfg:     cfg,
		timeout: t,
		fam4:    &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_FLOW_SPEC_UNICAST},
		fam6:    &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_FLOW_SPEC_UNICAST},
		changes: make(chan struct{}, 1),
	}
	s.mirror.init()
	s.routes.init(cfg.RouteNextHop4, cfg.RouteNextHop6)
	s.peers.init()
	return s
}

// ErrNotRunning is returned by calls made before Start succeeded or after
// Stop.
var ErrNotRunning = errors.New("bgp: speaker not running")

// TimeoutError reports a GoBGP call that did not answer in time. The
// operation may still complete later.
type TimeoutError struct {
	Op    string
	After time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("bgp: %s: GoBGP did not answer within %s", e.Op, e.After)
}

// Timeout marks the error as a timeout (net.Error style).
func (e *TimeoutError) Timeout() bool { return true }

// Start starts GoBGP, the import policy, the RIB and peer watches and the
// peers. It returns once the mirror holds the RIB's snapshot, so Paths
// answers ok right after a successful Start. On error everything started
// is stopped again.
func (s *Speaker) Start(ctx context.Context) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.stopped {
		return errors.New("bgp: Start called twice")
	}
	if err := s.cfg.validate(); err != nil {
		return err
	}

	opts := []server.ServerOption{server.LoggerOption(newGoBGPLogger(s.log.Named("gobgp"), s.observeGoBGP))}
	if s.cfg.GRPCListen != "" {
		if err := checkGRPCListen(s.cfg.GRPCListen, s.cfg.GRPCAllowRemote); err != nil {
			return err
		}
		opts = append(opts, server.GrpcListenAddress(s.cfg.GRPCListen))
		s.log.Warn("GoBGP gRPC API enabled (no authentication)", "addr", s.cfg.GRPCListen)
	}
	s.srv = server.NewBgpServer(opts...)
	go s.srv.Serve()
	s.started = true
	defer func() {
		if err != nil {
			s.stopLocked()
		}
	}()
	return s.boot(ctx)
}

// boot starts BGP on s.srv: global config, import policy, watches, peers.
// Start runs it once; Restart again on the same server after StopBgp.
func (s *Speaker) boot(ctx context.Context) error {
	wctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	global := &api.Global{
		Asn:             s.cfg.ASN,
		RouterId:        s.cfg.RouterID.String(),
		ListenPort:      s.cfg.ListenPort,
		ListenAddresses: s.cfg.ListenAddresses,
	}
	if err := s.call(ctx, "start", func() error {
		return s.srv.StartBgp(context.Background(), &api.StartBgpRequest{Global: global})
	}); err != nil {
		return err
	}
	if err := s.installImportPolicy(ctx); err != nil {
		return err
	}
	if err := s.watchRIB(ctx, wctx); err != nil {
		return err
	}
	if err := s.watchPeers(ctx, wctx); err != nil {
		return err
	}
	for _, n := range s.cfg.Neighbors {
		if err := s.addPeer(ctx, n); err != nil {
			return err
		}
	}
	if err := s.addDynamic(ctx, s.cfg.PeerGroups, s.cfg.DynamicNeighbors); err != nil {
		return err
	}
	s.log.Info("speaker started", "asn", s.cfg.ASN, "router_id", s.cfg.RouterID,
		"port", s.cfg.ListenPort, "neighbors", len(s.cfg.Neighbors))
	return nil
}

// Stop stops the server. GoBGP sends Cease (peer de-configured) to every
// peer, so routers flush our routes at once; graceful restart does not
// protect a clean stop. GoBGP's server loop goroutine cannot be ended and
// stays behind (idle) until the process exits.
func (s *Speaker) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Speaker) stopLocked() {
	if !s.started || s.stopped {
		s.stopped = true
		return
	}
	s.stopped = true
	s.cancel()
	err := s.call(context.Background(), "stop", func() error {
		s.srv.Stop() // StopBgp, then the gRPC listener if any
		return nil
	})
	if err != nil {
		s.log.Warn("stopping GoBGP", "error", err)
	}
	s.mirror.reset()
	s.signal()
	s.log.Info("speaker stopped")
}

// running returns the server if the speaker is between Start and Stop.
func (s *Speaker) running() (*server.BgpServer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.stopped || s.srv == nil {
		return nil, ErrNotRunning
	}
	return s.srv, nil
}

// call runs f, a GoBGP API call, and gives up after the speaker's timeout
// or when ctx ends, whichever is first. GoBGP ignores contexts, so f keeps
// running in the background after a timeout.
func (s *Speaker) call(ctx context.Context, op string, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	t := time.NewTimer(s.timeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("bgp: %s: %w", op, err)
		}
		return nil
	case <-t.C:
		return &TimeoutError{Op: op, After: s.timeout}
	case <-ctx.Done():
		return fmt.Errorf("bgp: %s: %w", op, ctx.Err())
	}
}

// Changes delivers a coalesced wake-up after any mirror change or peer
// state change. One slot: a burst of changes is one wake-up; the receiver
// re-reads state, it never learns what changed.
func (s *Speaker) Changes() <-chan struct{} { return s.changes }

func (s *Speaker) signal() {
	select {
	case s.changes <- struct{}{}:
	default:
	}
}

// observeGoBGP sees GoBGP's warnings and errors (see gobgpLogger).
func (s *Speaker) observeGoBGP(msg string, fields gobgplog.Fields) {
	if msg != "failed to set md5" {
		return
	}
	addr, _ := fields["Key"].(string)
	s.md5mu.Lock()
	defer s.md5mu.Unlock()
	if s.md5Failed == nil {
		s.md5Failed = make(map[string]string)
	}
	s.md5Failed[addr] = fmt.Sprint(fields["Err"])
}

func (s *Speaker) takeMD5Failure(addr string) (string, bool) {
	s.md5mu.Lock()
	defer s.md5mu.Unlock()
	e, ok := s.md5Failed[addr]
	delete(s.md5Failed, addr)
	return e, ok
}

func (c *Config) validate() error {
	if c.ASN == 0 {
		return errors.New("bgp: config: asn is 0")
	}
	if !c.RouterID.Is4() {
		return fmt.Errorf("bgp: config: router id %q is not an IPv4 address", c.RouterID)
	}
	seen := make(map[netip.Addr]bool, len(c.Neighbors))
	for i := range c.Neighbors {
		n := &c.Neighbors[i]
		where := fmt.Sprintf("bgp: config: neighbor %d (%s)", i, n.Address)
		switch {
		case !n.Address.IsValid():
			return fmt.Errorf("%s: no address", where)
		case n.Address.Zone() != "":
			return fmt.Errorf("%s: zoned addresses are not supported", where)
		case seen[n.Address.Unmap()]:
			return fmt.Errorf("%s: duplicate neighbor", where)
		case n.ASN == 0:
			return fmt.Errorf("%s: asn is 0", where)
		case len(n.Password) > 80:
			return fmt.Errorf("%s: password longer than 80 bytes (TCP MD5 limit)", where)
		case n.Passive && c.ListenPort < 0:
			return fmt.Errorf("%s: passive neighbor but the speaker does not listen (port %d)", where, c.ListenPort)
		case n.HoldTime != 0 && (n.HoldTime < 3*time.Second || n.HoldTime > 65535*time.Second):
			return fmt.Errorf("%s: hold time %s out of range (3s..65535s, or 0 for default)", where, n.HoldTime)
		}
		for _, f := range n.Families {
			if !f.IsValid() {
				return fmt.Errorf("%s: unknown family %d", where, f)
			}
		}
		seen[n.Address.Unmap()] = true
	}
	groups := map[string]bool{}
	for _, g := range c.PeerGroups {
		if g.Name == "" || groups[g.Name] || g.ASN == 0 {
			return fmt.Errorf("bgp: config: peer group %q: empty or duplicate name, or asn 0", g.Name)
		}
		groups[g.Name] = true
	}
	for _, d := range c.DynamicNeighbors {
		if !groups[d.PeerGroup] || !d.Prefix.IsValid() {
			return fmt.Errorf("bgp: config: dynamic neighbor %s: unknown peer group %q or invalid prefix", d.Prefix, d.PeerGroup)
		}
	}
	return nil
}
