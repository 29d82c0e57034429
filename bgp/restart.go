package bgp

import (
	"context"
	"fmt"
	"hash/maphash"
	"net"
	"net/netip"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// restartState counts speaker restarts and peer re-establishments.
type restartState struct {
	restarts atomic.Uint64 // Restart calls that succeeded
	peerUps  atomic.Uint64 // peers that came back to established after another state

	mu   sync.Mutex
	seed maphash.Seed
	// gone holds hashes of the NLRIs whose local path the watch reported
	// removed (or made a tombstone) since the last (re)start and not
	// added again: each left a destination behind (Leaked).
	gone map[uint64]struct{}
}

// Restart replaces the GoBGP server with a fresh one, which is what gives
// back the table destinations GoBGP keeps for every NLRI ever withdrawn
// (see Compactor): the old server stops (graceful-restart peers see the
// TCP session close without a NOTIFICATION and keep our rules as stale),
// a new one starts, the paths the mirror held are loaded into it, and only
// then are the peers added, so they get the whole table and End-of-RIB:
// with graceful restart negotiated, the restart is hitless. Peers without
// it got a Cease and get the table when they come back.
//
// The mirror is emptied at once and answers not ready until the new RIB's
// snapshot arrived (the reconciler does nothing blindly meanwhile); what
// changed in the desired state in between is reconciled after.
func (s *Speaker) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.stopped || s.srv == nil {
		return ErrNotRunning
	}
	// What GoBGP's RIB holds, not the mirror: the mirror may not show yet
	// a path an Announce handed over just before (it would be lost with
	// the old server). tagMu keeps Announce and Withdraw out meanwhile.
	s.tagMu.Lock()
	defer s.tagMu.Unlock()
	held, err := s.ribRules(ctx, s.srv)
	if err != nil {
		return fmt.Errorf("bgp: restart: %w", err)
	}

	s.cancel()
	old := s.srv
	if err := s.call(ctx, "stop for restart", func() error {
		err := old.StopBgp(context.Background(), &api.StopBgpRequest{AllowGracefulRestart: true})
		old.Stop() // ends its BFD loop and gRPC listener: nothing keeps the old RIB alive
		return err
	}); err != nil {
		return err
	}
	s.mirror.reopen()
	s.peers.mu.Lock()
	clear(s.peers.state)
	s.peers.mu.Unlock()
	s.restarts.mu.Lock()
	s.restarts.gone = nil
	s.restarts.mu.Unlock()
	s.signal()
	if err := s.boot(ctx, held); err != nil {
		// The mirror stays not ready: the reconciler does nothing blindly.
		return fmt.Errorf("bgp: restart: %w", err)
	}
	// The new server has no peers yet: add those the old one had.
	s.added, s.dynAdded = nil, false
	if err := s.addPeersLocked(ctx); err != nil {
		return fmt.Errorf("bgp: restart: %w", err)
	}
	s.restarts.restarts.Add(1)
	s.log.Warn("speaker restarted on a fresh GoBGP server", "paths", len(held))
	return nil
}

// replay loads rules (what the old server's RIB held, actions as found
// there) into the current server. Called with mu held, by boot.
func (s *Speaker) replay(ctx context.Context, rules []flowspec.Rule) error {
	paths := make([]*apiutil.Path, 0, min(len(rules), batchSize))
	var errs []error
	flush := func() {
		for _, err := range s.addPaths(ctx, s.srv, paths) {
			if err != nil {
				errs = append(errs, err)
			}
		}
		paths = paths[:0]
	}
	for _, r := range rules {
		var p *apiutil.Path
		var err error
		if r.Match.Family().IsRoute() {
			p, err = routePath(&s.attrs, r.Match, r.Action) // the next hop as found
		} else {
			// No peer is added yet: the order of rules a cap moved does
			// not matter, only that each one's last path has its last tags.
			var before, after []*apiutil.Path
			p, before, after, err = s.announcePath(r)
			paths = append(paths, before...)
			paths = append(paths, after...)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		paths = append(paths, p)
		if len(paths) >= batchSize {
			flush()
		}
	}
	if len(paths) > 0 {
		flush()
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d paths not loaded, first: %w", len(errs), errs[0])
	}
	return nil
}

// Epoch returns a number that changes on every Restart: paths seen under
// another epoch are gone from the RIB.
func (s *Speaker) Epoch() uint64 { return s.mirror.currentEpoch() }

// Restarts returns the number of successful Restarts.
func (s *Speaker) Restarts() uint64 { return s.restarts.restarts.Load() }

// PeerReestablished returns how many times a peer came back to
// established after having been in another state (a reset). GoBGP sends
// such a peer its full Adj-RIB-Out again by itself; nothing to repair, but
// it is counted as drift.
func (s *Speaker) PeerReestablished() uint64 { return s.restarts.peerUps.Load() }

// Leaked estimates the table destinations GoBGP v4.8.0 holds for NLRIs
// that have no path any more: the NLRIs whose local path the mirror's
// watch reported removed since the last (re)start and not added again (a
// re-added NLRI gets its old destination back); a tombstone counts as
// removed until a Restart drops it. GoBGP has no counter for them
// (GetTable counts destinations with paths only), so the speaker keeps
// a set of 64-bit hashes of those NLRIs (about 40 B each against GoBGP's
// ~0.84 KB per destination), emptied by Restart. Only removals are kept:
// a load of a million routes that withdraws nothing holds none (a set of
// every NLRI ever seen held 35 MB at a million RTBH routes), and a path
// on its way to the mirror is never counted as leaked.
func (s *Speaker) Leaked() int {
	s.restarts.mu.Lock()
	defer s.restarts.mu.Unlock()
	return len(s.restarts.gone)
}

// noteLocked records that the path of m was removed (del) or is there
// (Leaked); r.mu is held.
func (r *restartState) noteLocked(m flowspec.Match, del bool) {
	if !del && len(r.gone) == 0 {
		return // nothing to forget: no hash to compute
	}
	if r.seed == (maphash.Seed{}) {
		r.seed = maphash.MakeSeed()
	}
	k := maphash.Comparable(r.seed, m) // the family and every byte; no copy
	if !del {
		delete(r.gone, k)
		return
	}
	if r.gone == nil {
		r.gone = make(map[uint64]struct{})
	}
	r.gone[k] = struct{}{}
}

// checkGRPCListen refuses an unusable gRPC address before GoBGP gets it:
// GoBGP calls its logger's Fatal when the listen fails. Non-loopback
// addresses need allowRemote: the gRPC API has no authentication and can
// add and delete paths and peers.
func checkGRPCListen(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bgp: config: grpc_listen %q: %w", addr, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil && host != "localhost" {
		return fmt.Errorf("bgp: config: grpc_listen %q: host must be an IP address", addr)
	}
	if host != "localhost" && !ip.IsLoopback() && !allowRemote {
		return fmt.Errorf("bgp: config: grpc_listen %q is not a loopback address; the GoBGP gRPC API has no authentication (set grpc_allow_remote to accept)", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("bgp: grpc_listen %q: %w", addr, err)
	}
	return l.Close()
}

// Compactor restarts the speaker on a fresh GoBGP server when GoBGP's
// leaked destinations pass a threshold: memory stays bounded (about
// threshold × 0.84 KB above the live table). With graceful restart
// negotiated the routers keep every rule through it; peers without it
// flush and get the table back when their session returns. It returns
// when ctx ends.
func (s *Speaker) Compactor(ctx context.Context, threshold int, every time.Duration) {
	if threshold <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	s.compact(ctx, threshold, t.C)
}

// compact is Compactor's loop, looking at Leaked at each tick.
func (s *Speaker) compact(ctx context.Context, threshold int, ticks <-chan time.Time) {
	// Over the threshold on two ticks in a row. It used to wait for a
	// mirror that had not changed for a whole tick too, because Leaked
	// counted rules still on their way to the mirror: under a sustained
	// churn (BenchmarkChurn: 10,000 rules a second through a live set of
	// 10,000) the mirror never settled, nothing was compacted, and the
	// leak grew with every rule churned (peak RSS +19.5 % from the first
	// half of a million rules to the second). Leaked no longer counts
	// paths in flight, and Restart replays GoBGP's own RIB with Announce
	// and Withdraw held out, so a compaction in the middle of changes
	// loses none of them.
	wasOver := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		leaked := s.Leaked()
		over := leaked >= threshold
		ready := over && wasOver
		wasOver = over
		if !ready {
			continue
		}
		wasOver = false
		s.log.Warn("compacting GoBGP's RIB: restarting the speaker", "leaked_destinations", leaked, "paths", s.Len())
		if err := s.Restart(ctx); err != nil {
			s.log.Error("compaction restart failed", "error", err)
			continue
		}
		// The old RIB is garbage now; hand its pages back to the OS at
		// once rather than when the runtime's scavenger gets to them, so
		// RSS, not only the heap, stays bounded.
		debug.FreeOSMemory()
	}
}

// ribRules returns every local path of srv's RIB, tombstones left out,
// decoded as the mirror decodes them (a path it cannot decode is left
// out, as the mirror leaves it out). It reads GoBGP's tables, so it sees
// every path an AddPath call that returned put there, which the mirror
// may not show yet.
func (s *Speaker) ribRules(ctx context.Context, srv *server.BgpServer) ([]flowspec.Rule, error) {
	var rules []flowspec.Rule
	for _, fam := range []flowspec.Family{flowspec.IPv4, flowspec.IPv6, flowspec.IPv4Unicast, flowspec.IPv6Unicast} {
		err := s.call(ctx, "list rib "+fam.String(), func() error {
			return srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: gobgpFamily(fam)},
				func(n gobgp.NLRI, ps []*apiutil.Path) {
					for _, p := range ps {
						if !isLocal(p) || (!fam.IsRoute() && s.isTombstone(p.Attrs)) {
							continue
						}
						m, err := decodeNLRI(fam, n)
						if err != nil {
							continue
						}
						a, err := s.pathAction(fam, p)
						if err != nil {
							continue
						}
						rules = append(rules, flowspec.Rule{Match: m, Action: a})
					}
				})
		})
		if err != nil {
			return nil, err
		}
	}
	return rules, nil
}

// PathAges returns when each local path in the RIB was announced (the
// timestamp GoBGP keeps with it, see pathAge), tombstones left out. It
// lists GoBGP's tables: for an operator's look at the RIB, not for
// anything that runs per change.
func (s *Speaker) PathAges(ctx context.Context) (map[flowspec.Match]time.Time, error) {
	srv, err := s.running()
	if err != nil {
		return nil, err
	}
	out := make(map[flowspec.Match]time.Time, s.Len())
	for _, fam := range []flowspec.Family{flowspec.IPv4, flowspec.IPv6, flowspec.IPv4Unicast, flowspec.IPv6Unicast} {
		err := s.call(ctx, "list rib "+fam.String(), func() error {
			return srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: gobgpFamily(fam)},
				func(n gobgp.NLRI, ps []*apiutil.Path) {
					for _, p := range ps {
						if !isLocal(p) || p.Age <= 0 || (!fam.IsRoute() && s.isTombstone(p.Attrs)) {
							continue
						}
						if m, err := decodeNLRI(fam, n); err == nil {
							out[m] = time.Unix(p.Age, 0)
						}
					}
				})
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
