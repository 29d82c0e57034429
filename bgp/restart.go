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

	api "github.com/osrg/gobgp/v3/api"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// restartState counts speaker restarts and peer re-establishments.
type restartState struct {
	restarts atomic.Uint64 // Restart calls that succeeded
	peerUps  atomic.Uint64 // peers that came back to established after another state

	mu       sync.Mutex
	seed     maphash.Seed
	distinct map[uint64]struct{} // hashes of the NLRIs announced since the last (re)start
}

// Restart restarts BGP inside the same GoBGP server: StopBgp (every
// session closes with Cease, so routers flush our routes), StartBgp with a
// fresh, empty RIB, then the import policy, the watches and the peers as
// in Start. The mirror is emptied at once and answers not ready until the
// new RIB's snapshot arrived; the reconciler then re-announces everything
// (paced). Restarting the same server object, not a new one, is what
// gives the old RIB back to the garbage collector: GoBGP's server loop
// goroutine cannot end, so a replaced server would stay in memory with
// its whole RIB. It is also the only way found to free the destinations
// GoBGP v3.37.0 leaks for withdrawn paths (see Compactor).
//
// The optional gRPC listener belongs to the server object and stays up.
func (s *Speaker) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.stopped || s.srv == nil {
		return ErrNotRunning
	}
	s.cancel()
	if err := s.call(ctx, "stop for restart", func() error {
		return s.srv.StopBgp(context.Background(), &api.StopBgpRequest{})
	}); err != nil {
		return err
	}
	s.mirror.reopen()
	s.peers.mu.Lock()
	clear(s.peers.state)
	s.peers.mu.Unlock()
	s.restarts.mu.Lock()
	s.restarts.distinct = nil
	s.restarts.mu.Unlock()
	s.signal()
	if err := s.boot(ctx); err != nil {
		// The mirror stays not ready: the reconciler does nothing blindly.
		return fmt.Errorf("bgp: restart: %w", err)
	}
	s.restarts.restarts.Add(1)
	s.log.Warn("speaker restarted: sessions were reset, everything is announced again")
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

// Leaked estimates the table destinations GoBGP v3.37.0 holds for
// FlowSpec NLRIs that have no path any more: the distinct NLRIs announced
// since the last (re)start minus the paths in the mirror. GoBGP has no
// counter for them (GetTable counts destinations with paths only), so the
// speaker keeps a set of 64-bit hashes of every NLRI it announced (about
// 40 B each against GoBGP's ~630 B per destination), emptied by Restart.
func (s *Speaker) Leaked() int {
	s.restarts.mu.Lock()
	n := len(s.restarts.distinct)
	s.restarts.mu.Unlock()
	return max(n-s.Len(), 0)
}

// noteAnnounced records m in the distinct-NLRI set.
func (s *Speaker) noteAnnounced(m flowspec.Match) {
	s.restarts.mu.Lock()
	defer s.restarts.mu.Unlock()
	if s.restarts.distinct == nil {
		if s.restarts.seed == (maphash.Seed{}) {
			s.restarts.seed = maphash.MakeSeed()
		}
		s.restarts.distinct = make(map[uint64]struct{})
	}
	k := maphash.String(s.restarts.seed, string(m.ComponentBytes())) ^ uint64(m.Family())
	s.restarts.distinct[k] = struct{}{}
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

// Compactor restarts the speaker when GoBGP's leaked destinations pass a
// threshold: memory stays bounded (about threshold × 630 B above the live
// table) at the price of a session reset per compaction, during which
// upstream routers flush our rules until the reconciler re-announced them.
// It returns when ctx ends.
func (s *Speaker) Compactor(ctx context.Context, threshold int, every time.Duration) {
	if threshold <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		leaked := s.Leaked()
		if leaked < threshold {
			continue
		}
		s.log.Warn("compacting GoBGP's RIB: restarting the speaker", "leaked_destinations", leaked, "paths", s.Len())
		if err := s.Restart(ctx); err != nil {
			s.log.Error("compaction restart failed", "err", err)
			continue
		}
		// The old RIB is garbage now; hand its pages back to the OS at
		// once rather than when the runtime's scavenger gets to them, so
		// RSS, not only the heap, stays bounded.
		debug.FreeOSMemory()
	}
}
