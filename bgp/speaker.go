// Package bgp is ribkeeper's BGP speaker: GoBGP v4 embedded as a library,
// with upstream peers, a global import policy that rejects everything peers
// send, and an in-memory mirror of the paths we originate.
//
// It is the only package that imports GoBGP. Everything crosses its
// boundary as flowspec values; GoBGP types never leak out, so moving to a
// later GoBGP is this package's change alone.
//
// GoBGP facts this package is built around (v4.8.0, read in its source and
// measured; the files that depend on each say where in GoBGP):
//   - Every API call is a round trip into one server loop. Every call here
//     is bounded by a timeout; a call that times out may still take effect
//     later, so the mirror, not the call's result, is the truth about what
//     is in the RIB.
//   - Paths go in and come out as GoBGP's native types, many per call
//     (AddPath with a slice of paths; the watch delivers native paths), and
//     GoBGP packs NLRIs that share attributes into one UPDATE.
//   - Received routes never enter the RIB (import policy). They still sit
//     in each peer's Adj-RIB-In, which GoBGP cannot be told not to keep;
//     the neighbor's prefix limit bounds them (maxprefix.go). v4 bounds-checks the FlowSpec parsers that
//     v3 panicked in, and stores a malformed IPv6 FlowSpec NLRI as an
//     "unknown" prefix there, which the import policy and the mirror (local
//     paths only) keep out.
//   - Graceful restart: with a neighbor's GracefulRestart set, every start
//     of a server is a restarting speaker (R and F bits for every family).
//     GoBGP then sends nothing until it has End-of-RIB from its GR peers
//     (or its deferral timer ran out), so GR peers are added only once the
//     whole table is loaded (Config.HoldPeers, StartPeers): the routers
//     keep our stale rules meanwhile and sweep what the new table lacks.
//     Peers without GR flushed our rules anyway and come up at once.
//     Stop closes the sessions of GR peers without a NOTIFICATION so the
//     routers keep the rules through a restart; StopWithdrawn withdraws
//     everything and closes with a Cease.
//   - Memory that is not given back: a withdrawn path leaves its table
//     destination behind (about 0.84 KB heap per distinct NLRI ever
//     announced, internal/pkg/table/destination.go). A stopped BgpServer
//     cannot be started again, but its server loop ends, so Restart builds
//     a fresh server, replays the mirror into it and brings the peers back
//     (hitless with GR); Compactor does that when Leaked passes a
//     threshold.
package bgp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/profile"
)

// DefaultCallTimeout bounds each GoBGP API call when Config.CallTimeout is 0.
const DefaultCallTimeout = 10 * time.Second

// DefaultConnectRetry is Neighbor.ConnectRetry when unset.
const DefaultConnectRetry = 5 * time.Second

// grDeferral is how long a restarted speaker waits for End-of-RIB from
// every graceful-restart peer before it sends its table anyway (RFC 4724
// Selection_Deferral_Timer; GoBGP's default is 360 s, and 0 means that
// default). The deferral is for speakers that select among received
// routes; ribkeeper uses none, so waiting buys nothing, while one
// configured router that is down would hold back every other router's
// table for the whole deferral (measured with 30 s: 1,000 new rules
// reached BIRD after 29.8 s instead of 70-80 ms; e2e
// TestGRDownRouterDelaysNoOther). 1 s is GoBGP's smallest.
const grDeferral = time.Second

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

	// HintAfter is how long a session may take to come up before Peers
	// suggests what to check (0: DefaultHintAfter).
	HintAfter time.Duration

	// HoldPeers makes Start leave the graceful-restart peers out until
	// StartPeers: the
	// daemon loads the whole desired table first, so that a router gets
	// the complete table before End-of-RIB (with graceful restart it
	// sweeps every stale rule the table lacks at End-of-RIB).
	HoldPeers bool
	// PeerChange, if set, is told of every session that comes up or goes
	// down (not of the states between), on the peer watch: it must not
	// block (notifications queue it).
	PeerChange func(PeerChange)
}

// Neighbor is one upstream BGP peer.
type Neighbor struct {
	Address      netip.Addr
	ASN          uint32
	Port         uint16     // 0: 179
	LocalAddress netip.Addr // zero: kernel's choice

	// Families are the families negotiated with the peer (FlowSpec, and
	// unicast for routes such as RTBH). Empty means the FlowSpec family
	// of Address only (an IPv4 neighbor gets ipv4-flowspec).
	Families    []flowspec.Family
	Passive     bool
	Description string

	// HoldTime is proposed in OPEN (0: GoBGP's 90 s). Keepalives are sent
	// at a third of the negotiated hold time unless KeepaliveInterval is set.
	HoldTime          time.Duration
	KeepaliveInterval time.Duration
	// GracefulRestart advertises the graceful restart capability (RFC
	// 4724) for every family with RestartTime (0: GoBGP's default) and
	// makes every start a restart (R bit, F bit per family), so the
	// router keeps our paths while the process restarts and sweeps only
	// what the new table lacks; Stop closes such a session without a
	// NOTIFICATION.
	GracefulRestart bool
	RestartTime     time.Duration
	// ConnectRetry is the time between connection attempts and the idle
	// hold time after a reset (0: DefaultConnectRetry; GoBGP's own default
	// of 120 s made a router that was not ready wait minutes).
	ConnectRetry time.Duration
	// MultihopTTL enables eBGP multihop with this TTL (0: directly
	// connected, TTL 1, for eBGP).
	MultihopTTL uint8
	// Profile names the router profile (package profile) that decides
	// which rules this neighbor can take; "" is the permissive generic.
	// Rules the profile refuses, or its rule cap leaves out, are never
	// sent to it (holdback.go).
	Profile string
	// MaxPrefixes is the most routes the neighbor may send in each
	// family (0: no limit). See maxprefix.go.
	MaxPrefixes uint32
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

	srv    *server.BgpServer // replaced by Restart; read under mu
	fam4   *api.Family
	fam6   *api.Family
	cancel context.CancelFunc // stops the watches

	mirror mirror
	attrs  attrCache
	// peerChange is Config.PeerChange.
	peerChange func(PeerChange)
	// delivery and restarts: see delivery.go and restart.go.
	delivery deliveryTable
	hold     holdState
	restarts restartState
	routes   routeState
	peers    peerTable
	changes  chan struct{}

	mu           sync.Mutex
	started      bool
	stopped      bool
	peersStarted bool                // StartPeers ran (or Start without HoldPeers)
	added        map[netip.Addr]bool // neighbors added to the current server
	dynAdded     bool                // peer groups and dynamic neighbors too
	nbSets       map[string][]string // the export policy's neighbor sets as installed
	// tagMu keeps Announce and Withdraw (read) out while retag
	// (Reconfigure, write) rebuilds the hold-back state from the RIB: a
	// rule placed in between would keep the tags of the old profiles.
	tagMu sync.RWMutex
	// tomb4 and tomb6 are the attributes of tombstones (holdback.go).
	tomb4, tomb6 []gobgp.PathAttributeInterface

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

		peerChange: cfg.PeerChange,
		fam4:       &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_FLOW_SPEC_UNICAST},
		fam6:       &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_FLOW_SPEC_UNICAST},
		changes:    make(chan struct{}, 1),
	}
	s.mirror.init()
	s.tomb4 = []gobgp.PathAttributeInterface{gobgp.NewPathAttributeOrigin(0), mpReachFS4, s.tagAttr(tombBit)}
	s.tomb6 = []gobgp.PathAttributeInterface{gobgp.NewPathAttributeOrigin(0), mpReachFS6, s.tagAttr(tombBit)}
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
// peers, except, with Config.HoldPeers, those with graceful restart: they
// wait for StartPeers. It returns once the mirror holds the RIB's
// snapshot, so Paths answers ok right after a successful Start. On error
// everything started is stopped again.
func (s *Speaker) Start(ctx context.Context) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.stopped {
		return errors.New("bgp: Start called twice")
	}
	if err := s.cfg.validate(); err != nil {
		return err
	}
	if s.cfg.GRPCListen != "" {
		if err := checkGRPCListen(s.cfg.GRPCListen, s.cfg.GRPCAllowRemote); err != nil {
			return err
		}
		s.log.Warn("GoBGP gRPC API enabled (no authentication)", "addr", s.cfg.GRPCListen)
	}
	s.started = true
	defer func() {
		if err != nil {
			s.stopLocked(false)
		}
	}()
	if err := s.boot(ctx, nil); err != nil {
		return err
	}
	if !s.cfg.HoldPeers {
		return s.startPeersLocked(ctx)
	}
	return s.addPeersLocked(ctx)
}

// newServer makes and serves a fresh GoBGP server (a stopped one cannot be
// started again).
func (s *Speaker) newServer() *server.BgpServer {
	opts := []server.ServerOption{server.LoggerOption(newGoBGPLogger(s.log.Named("gobgp"), s.observeGoBGP), nil)}
	if s.cfg.GRPCListen != "" {
		opts = append(opts, server.GrpcListenAddress(s.cfg.GRPCListen))
	}
	srv := server.NewBgpServer(opts...)
	go srv.Serve()
	return srv
}

// boot makes a fresh server and starts BGP on it: global config, import
// policy, the rules to load (Restart's replay), watches. Peers come later
// (startPeersLocked). Start runs it once; Restart again for each new
// server. Called with mu held.
func (s *Speaker) boot(ctx context.Context, load []flowspec.Rule) error {
	srv := s.newServer()
	s.srv = srv
	wctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	global := &api.Global{
		Asn:             s.cfg.ASN,
		RouterId:        s.cfg.RouterID.String(),
		ListenPort:      s.cfg.ListenPort,
		ListenAddresses: s.cfg.ListenAddresses,
	}
	if err := s.call(ctx, "start", func() error {
		return srv.StartBgp(context.Background(), &api.StartBgpRequest{Global: global})
	}); err != nil {
		return listenError(err, s.cfg.ListenPort)
	}
	if err := s.installImportPolicy(ctx, srv); err != nil {
		return err
	}
	if err := s.installExportPolicy(ctx, srv); err != nil {
		return err
	}
	pc, use := classesOf(&s.cfg)
	s.hold.reset(use, pc, false)
	if _, err := s.syncNeighborSets(ctx, &s.cfg); err != nil {
		return err
	}
	// Loaded before the watch, so that the mirror's snapshot holds them
	// and the reconciler finds nothing to re-announce.
	if err := s.replay(ctx, load); err != nil {
		return fmt.Errorf("loading the %d paths the previous server held: %w", len(load), err)
	}
	if err := s.watchRIB(ctx, wctx, srv); err != nil {
		return err
	}
	if err := s.watchPeers(ctx, wctx, srv); err != nil {
		return err
	}
	s.log.Info("speaker started", "asn", s.cfg.ASN, "router_id", s.cfg.RouterID,
		"port", s.cfg.ListenPort, "neighbors", len(s.cfg.Neighbors), "peers_held", s.cfg.HoldPeers)
	return nil
}

// StartPeers adds the neighbors, peer groups and dynamic neighbors Start
// held back (Config.HoldPeers), once: call it after the desired table is
// loaded. Later calls do nothing.
func (s *Speaker) StartPeers(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.stopped {
		return ErrNotRunning
	}
	if s.peersStarted {
		return nil
	}
	return s.startPeersLocked(ctx)
}

func (s *Speaker) startPeersLocked(ctx context.Context) error {
	s.peersStarted = true
	if err := s.addPeersLocked(ctx); err != nil {
		return err
	}
	s.log.Info("peers started", "neighbors", len(s.cfg.Neighbors), "paths", s.Len())
	return nil
}

// holds reports whether a session with graceful restart gr waits for
// StartPeers. A graceful-restart router must get the whole table before
// End-of-RIB (it sweeps what is missing then); a router without it flushed
// our rules when the session dropped and may as well get each rule as it
// is loaded, as in GoBGP's own initial sync, which starts sooner.
func (s *Speaker) holds(gr bool) bool {
	return gr && s.cfg.HoldPeers && !s.peersStarted
}

// addPeersLocked adds every configured neighbor (and the peer groups with
// their dynamic neighbors) not added yet that holds does not keep back.
func (s *Speaker) addPeersLocked(ctx context.Context) error {
	if s.added == nil {
		s.added = make(map[netip.Addr]bool)
	}
	for _, n := range s.cfg.Neighbors {
		if s.added[n.Address.Unmap()] || s.holds(n.GracefulRestart) {
			continue
		}
		if err := s.addPeer(ctx, n); err != nil {
			return err
		}
	}
	groupsGR := slices.ContainsFunc(s.cfg.PeerGroups, func(g PeerGroup) bool { return g.GracefulRestart })
	if !s.dynAdded && !s.holds(groupsGR) {
		if err := s.addDynamic(ctx, s.cfg.PeerGroups, s.cfg.DynamicNeighbors); err != nil {
			return err
		}
		s.dynAdded = true
	}
	return nil
}

// Stop stops the speaker for a restart: the sessions of peers that
// negotiated graceful restart close without a NOTIFICATION, so those
// routers keep our rules (as stale) until the next start sends the table
// and End-of-RIB; other peers get a Cease and flush at once. To take
// every rule off the routers, use StopWithdrawn.
func (s *Speaker) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(true)
}

// StopWithdrawn withdraws every path, waits until no established peer has
// any left in its Adj-RIB-Out (the withdrawals are queued to every router)
// or ctx ends, and stops with a Cease to every peer, which also makes a
// graceful-restart router flush whatever it still holds from us. It
// reports what was left when ctx ended first; the speaker is stopped in
// every case.
func (s *Speaker) StopWithdrawn(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.stopped {
		return ErrNotRunning
	}
	srv := s.srv
	var err error
	if s.hold.inUse() == 0 {
		err = s.call(ctx, "withdraw all", func() error {
			return srv.DeletePath(apiutil.DeletePathRequest{DeleteAll: true})
		})
	} else {
		// With router profiles in use, deleting everything would send
		// every router the withdrawals of rules it was never sent, some
		// of which it cannot parse (holdback.go): withdraw rule by rule.
		s.mirror.mu.RLock()
		ms := make([]flowspec.Match, 0, s.mirror.paths.len())
		s.mirror.paths.all(func(m flowspec.Match, _ flowspec.Action) { ms = append(ms, m) })
		s.mirror.mu.RUnlock()
		err = errors.Join(s.withdrawOn(ctx, srv, ms)...)
	}
	if err == nil {
		err = s.waitAdjOutEmpty(ctx, srv)
	}
	s.stopLocked(false)
	if err != nil {
		return fmt.Errorf("bgp: withdraw everything before stopping: %w (the sessions were closed with a Cease, so routers flush our rules anyway)", err)
	}
	return nil
}

// waitAdjOutEmpty waits until every established peer's Adj-RIB-Out is
// empty, re-checking after every mirror change and at least every 50 ms.
func (s *Speaker) waitAdjOutEmpty(ctx context.Context, srv *server.BgpServer) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		left, err := s.adjOutPaths(ctx, srv)
		if err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d paths still in the peers' Adj-RIB-Out: %w", left, ctx.Err())
		case <-t.C:
		case <-s.changes:
		}
	}
}

// adjOutPaths counts the paths in the Adj-RIB-Out of every established
// peer, over the families each negotiated.
func (s *Speaker) adjOutPaths(ctx context.Context, srv *server.BgpServer) (int, error) {
	s.delivery.mu.RLock()
	peers := maps.Clone(s.delivery.peers)
	s.delivery.mu.RUnlock()
	n := 0
	for addr, fams := range peers {
		for _, f := range fams {
			err := s.call(ctx, "list adj-rib-out "+addr, func() error {
				return srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_ADJ_OUT, Name: addr, Family: gobgpFamily(f)},
					func(_ gobgp.NLRI, ps []*apiutil.Path) { n += len(ps) })
			})
			if err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

// stopLocked stops the server; graceful keeps the routers' rules where
// graceful restart was negotiated. GoBGP's server loop ends with it.
func (s *Speaker) stopLocked(graceful bool) {
	if !s.started || s.stopped {
		s.stopped = true
		return
	}
	s.stopped = true
	s.cancel()
	srv := s.srv
	err := s.call(context.Background(), "stop", func() error {
		err := srv.StopBgp(context.Background(), &api.StopBgpRequest{AllowGracefulRestart: graceful})
		srv.Stop() // the gRPC listener, if any (its StopBgp finds BGP stopped)
		return err
	})
	if err != nil {
		s.log.Warn("stopping GoBGP", "error", err)
	}
	s.mirror.reset()
	s.signal()
	if !graceful {
		s.log.Info("speaker stopped", "graceful_restart", false)
		return
	}
	// Graceful restart is each neighbor's setting: say which routers may
	// keep the rules through the restart and which flush them now.
	keep, flush := s.grPeers()
	s.log.Info("speaker stopped", "graceful_restart_peers", keep, "flushing_peers", flush)
}

// grPeers names the configured neighbors (and peer groups) with graceful
// restart on, and those with it off; "none" for an empty list.
func (s *Speaker) grPeers() (on, off string) {
	var yes, no []string
	for _, n := range s.cfg.Neighbors {
		if n.GracefulRestart {
			yes = append(yes, n.Address.String())
		} else {
			no = append(no, n.Address.String())
		}
	}
	for _, g := range s.cfg.PeerGroups {
		if g.GracefulRestart {
			yes = append(yes, "group "+g.Name)
		} else {
			no = append(no, "group "+g.Name)
		}
	}
	list := func(l []string) string {
		if len(l) == 0 {
			return "none"
		}
		return strings.Join(l, ",")
	}
	return list(yes), list(no)
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

// observeGoBGP sees GoBGP's warnings and errors (see gobgpHandler).
func (s *Speaker) observeGoBGP(msg string, fields map[string]string) {
	if msg != "failed to set md5" {
		return
	}
	addr := fields["Key"]
	s.md5mu.Lock()
	defer s.md5mu.Unlock()
	if s.md5Failed == nil {
		s.md5Failed = make(map[string]string)
	}
	s.md5Failed[addr] = fields["Err"]
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
		if _, err := profile.Lookup(n.Profile); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		seen[n.Address.Unmap()] = true
	}
	groups := map[string]bool{}
	for _, g := range c.PeerGroups {
		if g.Name == "" || groups[g.Name] || g.ASN == 0 {
			return fmt.Errorf("bgp: config: peer group %q: empty or duplicate name, or asn 0", g.Name)
		}
		if _, err := profile.Lookup(g.Profile); err != nil {
			return fmt.Errorf("bgp: config: peer group %q: %w", g.Name, err)
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
