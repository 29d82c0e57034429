package bgp

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// mirror is the in-memory copy of every locally originated FlowSpec path
// in GoBGP's RIB, ours or added by anyone else through GoBGP (those are
// orphans for the reconciler to withdraw). It is fed by a BEST-path watch
// and read without a round trip into GoBGP's server loop.
type mirror struct {
	mu     sync.RWMutex
	ready  bool
	closed bool // after Stop: late watch events are dropped
	paths  pathTable
	// undecodable counts local FlowSpec paths whose NLRI flowspec cannot
	// decode; they cannot be keyed, so they are only logged and counted.
	undecodable int
	byFamily    map[flowspec.Family]int
	readyCh     chan struct{}
	// gen counts changes to paths and readiness (see Speaker.Generation).
	gen uint64
	// epoch numbers the RIB watches: events of an earlier watch (before a
	// Restart) are dropped.
	epoch uint64
	// dirty holds the Matches whose path was added, replaced or removed
	// since the last DrainDirty; dirtyAll replaces it when it overflowed
	// or the mirror was emptied (see DrainDirty).
	dirty    map[flowspec.Match]struct{}
	dirtyAll bool
}

// maxDirty bounds the dirty set: past it, and past a quarter of the
// mirror's paths, a reader is told to look at everything, which costs
// about as much as walking that many keys. The quarter keeps a large
// table's bursts incremental: with a fixed 65,536, every pass of a
// large load that handed GoBGP more paths than that (they all come back
// through the watch) compared every rule again (in 10 s of a
// 300,000-route load, 0.48 s of CPU in those comparisons' lookups).
// The set stays bounded by the table.
const maxDirty = 1 << 16

// dirtyCap is the dirty set's bound now. Called with mu held.
func (m *mirror) dirtyCap() int { return max(maxDirty, m.paths.len()/4) }

func (m *mirror) init() {
	m.byFamily = make(map[flowspec.Family]int)
	m.readyCh = make(chan struct{})
	m.dirty = make(map[flowspec.Match]struct{})
	m.dirtyAll = true
}

// markDirty records that the path of k changed. Called with mu held.
func (m *mirror) markDirty(k flowspec.Match) {
	if m.dirtyAll {
		return
	}
	if len(m.dirty) >= m.dirtyCap() {
		m.markAll()
		return
	}
	m.dirty[k] = struct{}{}
}

// markAll records that any path may have changed. Called with mu held.
func (m *mirror) markAll() {
	m.dirtyAll = true
	if len(m.dirty) > 1024 {
		m.dirty = make(map[flowspec.Match]struct{}) // give the memory back
	} else {
		clear(m.dirty)
	}
}

func (m *mirror) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ready = false
	m.closed = true
	m.gen++
	m.markAll()
	m.paths.reset()
	clear(m.byFamily)
}

// Generation returns a number that changes whenever the mirror changes: a
// path added, replaced or removed, readiness gained or lost. Two equal
// readings mean the mirror (and so the RIB's local paths, as far as the
// watch has delivered them) did not change in between, so a reconciler
// that saw nothing to do at the first reading has nothing to do at the
// second either, without walking the paths.
func (s *Speaker) Generation() uint64 {
	s.mirror.mu.RLock()
	defer s.mirror.mu.RUnlock()
	return s.mirror.gen
}

// DrainDirty calls fn for every Match whose local path was added, replaced
// or removed since the previous call, forgets them, and returns the
// generation they bring the reader up to (see Generation). complete is
// false when the changes cannot be listed: the mirror is not initialised,
// it was emptied and rebuilt since the previous call (Restart, Stop), the
// set overflowed, or what Paths reports changed for every route
// (SetRouteNextHops); fn is then not called and the reader must compare
// every path (Paths). The first call after Start is incomplete.
//
// It serves one reader: a reconciler that keeps what it drained until it
// has compared those Matches. fn runs under the mirror's lock: it must be
// quick and must not call back into the speaker.
func (s *Speaker) DrainDirty(fn func(flowspec.Match)) (gen uint64, complete bool) {
	m := &s.mirror
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ready {
		return m.gen, false
	}
	if m.dirtyAll {
		m.dirtyAll = false
		return m.gen, false
	}
	for k := range m.dirty {
		fn(k)
	}
	if len(m.dirty) > 1024 {
		m.dirty = make(map[flowspec.Match]struct{})
	} else {
		clear(m.dirty)
	}
	return m.gen, true
}

// Path returns the local path for k as Paths reports it: its action and
// whether there is one. ok is false (and present too) while the mirror is
// not initialised.
func (s *Speaker) Path(k flowspec.Match) (a flowspec.Action, present, ok bool) {
	s.mirror.mu.RLock()
	defer s.mirror.mu.RUnlock()
	if !s.mirror.ready {
		return flowspec.Action{}, false, false
	}
	a, present = s.mirror.paths.get(k)
	if present && k.Family().IsRoute() {
		a = s.routes.view(k, a)
	}
	return a, present, true
}

// reopen empties the mirror for a new RIB watch (Restart): not ready
// until the new watch's snapshot arrives; events of older watches are
// dropped from now on.
func (m *mirror) reopen() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ready, m.closed = false, false
	m.epoch++
	m.gen++
	m.markAll()
	m.paths.reset()
	clear(m.byFamily)
	m.readyCh = make(chan struct{})
}

func (m *mirror) currentEpoch() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.epoch
}

// counts returns the number of mirrored paths per family.
func (m *mirror) counts() map[flowspec.Family]int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return maps.Clone(m.byFamily)
}

// Paths calls fn for every locally originated FlowSpec path in the mirror;
// ok is false (and fn is not called) until the mirror is initialised, and
// again after Stop. fn runs under the mirror's read lock: it must be quick
// and must not call back into the speaker.
func (s *Speaker) Paths(fn func(m flowspec.Match, a flowspec.Action)) (ok bool) {
	s.mirror.mu.RLock()
	defer s.mirror.mu.RUnlock()
	if !s.mirror.ready {
		return false
	}
	s.mirror.paths.all(func(m flowspec.Match, a flowspec.Action) {
		if m.Family().IsRoute() {
			a = s.routes.view(m, a)
		}
		fn(m, a)
	})
	return true
}

// Lookup returns the action of the local path for m, if the mirror has one.
func (s *Speaker) Lookup(m flowspec.Match) (flowspec.Action, bool) {
	s.mirror.mu.RLock()
	defer s.mirror.mu.RUnlock()
	return s.mirror.paths.get(m)
}

// Len returns the number of paths in the mirror.
func (s *Speaker) Len() int {
	s.mirror.mu.RLock()
	defer s.mirror.mu.RUnlock()
	return s.mirror.paths.len()
}

// RIB returns a copy of the mirror sorted by family and NLRI bytes (for
// `ribkeeper rib`); ok is false until the mirror is initialised.
func (s *Speaker) RIB() (rules []flowspec.Rule, ok bool) {
	s.mirror.mu.RLock()
	if !s.mirror.ready {
		s.mirror.mu.RUnlock()
		return nil, false
	}
	rules = make([]flowspec.Rule, 0, s.mirror.paths.len())
	s.mirror.paths.all(func(m flowspec.Match, a flowspec.Action) {
		rules = append(rules, flowspec.Rule{Match: m, Action: a})
	})
	s.mirror.mu.RUnlock()

	keys := make(map[flowspec.Match][]byte, len(rules))
	for _, r := range rules {
		keys[r.Match] = r.Match.AppendTo(nil)
	}
	slices.SortFunc(rules, func(a, b flowspec.Rule) int {
		if a.Match.Family() != b.Match.Family() {
			return int(a.Match.Family()) - int(b.Match.Family())
		}
		return bytes.Compare(keys[a.Match], keys[b.Match])
	})
	return rules, true
}

// watchRIB registers the BEST-path watch with the current table and waits
// until its snapshot is in the mirror.
//
// Why the first callback is the complete snapshot (GoBGP v4.8.0,
// server.go watch()): one server-loop step registers the watcher and queues
// the snapshot (GetBestPathList of every family) as one event on the
// watcher's FIFO; any later change is queued after it, and the snapshot is
// delivered in a single callback, even when empty. The callback runs on
// the watch's own goroutine, so WatchEvent returning only means the
// snapshot is queued, not applied; the mirror is ready after the first
// callback, and Start waits for that.
func (s *Speaker) watchRIB(ctx, wctx context.Context, srv *server.BgpServer) error {
	epoch := s.mirror.currentEpoch()
	cb := server.WatchEventMessageCallbacks{
		OnBestPath: func(paths []*apiutil.Path, _ time.Time) { s.onBestPaths(epoch, paths) },
	}
	if err := s.call(ctx, "watch rib", func() error {
		// wctx, not a call-scoped context: GoBGP stops the watch when it ends.
		return srv.WatchEvent(wctx, cb, server.WatchBestPath(true))
	}); err != nil {
		return err
	}
	s.mirror.mu.RLock()
	readyCh := s.mirror.readyCh
	s.mirror.mu.RUnlock()
	t := time.NewTimer(s.timeout)
	defer t.Stop()
	select {
	case <-readyCh:
		return nil
	case <-t.C:
		return &TimeoutError{Op: "rib snapshot", After: s.timeout}
	case <-ctx.Done():
		return fmt.Errorf("bgp: rib snapshot: %w", ctx.Err())
	}
}

// onBestPaths runs on GoBGP's watch goroutine. Decoding happens before the
// lock; under it the map is updated and nothing else. Events queue in
// GoBGP's unbounded buffer, so a slow callback delays the mirror but never
// blocks the server loop.
func (s *Speaker) onBestPaths(epoch uint64, paths []*apiutil.Path) {
	type upd struct {
		m   flowspec.Match
		a   flowspec.Action
		del bool
	}
	ups := make([]upd, 0, len(paths))
	bad := 0
	for _, p := range paths {
		if !isLocal(p) {
			continue
		}
		fam, ok := familyOf(p.Family)
		if !ok {
			continue
		}
		m, err := decodeNLRI(fam, p.Nlri)
		if err != nil {
			bad++
			s.log.Error("local path in the RIB cannot be decoded; it cannot be withdrawn by ribkeeper",
				"family", fam, "error", err, "path", p.Nlri.String())
			continue
		}
		// A tombstone (holdback.go) is a withdrawn rule kept in the RIB
		// so that its withdrawal reaches only the peers that had it.
		if p.Withdrawal || (!fam.IsRoute() && s.isTombstone(p.Attrs)) {
			ups = append(ups, upd{m: m, del: true})
			continue
		}
		a, err := s.pathAction(fam, p)
		if err != nil {
			// Kept with a zero Action: it differs from any desired action,
			// so the reconciler replaces or withdraws it.
			s.log.Warn("local path has no usable action", "text", m.String(), "error", err)
		}
		ups = append(ups, upd{m: m, a: a})
	}

	s.mirror.mu.Lock()
	if s.mirror.closed || s.mirror.epoch != epoch {
		s.mirror.mu.Unlock()
		return
	}
	// Under the mirror's lock: Restart empties the set after reopen, so
	// an older watch's paths never count against the new server (Leaked).
	s.restarts.mu.Lock()
	for _, u := range ups {
		s.restarts.noteLocked(u.m, u.del)
	}
	s.restarts.mu.Unlock()
	first := !s.mirror.ready
	readyCh := s.mirror.readyCh
	changed := first
	for _, u := range ups {
		if u.del {
			if s.mirror.paths.del(u.m) {
				s.mirror.byFamily[u.m.Family()]--
				s.mirror.markDirty(u.m)
				changed = true
			}
			continue
		}
		old, ok := s.mirror.paths.set(u.m, u.a)
		if !ok {
			s.mirror.byFamily[u.m.Family()]++
		}
		if !ok || old != u.a {
			s.mirror.markDirty(u.m)
			changed = true
		}
	}
	s.mirror.undecodable += bad
	s.mirror.ready = true
	if changed {
		s.mirror.gen++
	}
	s.mirror.mu.Unlock()

	if first {
		close(readyCh)
	}
	if changed {
		s.signal()
	}
}

// isLocal: GoBGP gives locally originated paths no source peer. Paths
// received from peers never reach the global RIB (import policy), and the
// "unknown" prefixes GoBGP keeps for malformed NLRI from a peer stay in
// that peer's Adj-RIB-In; this check keeps the mirror to our own paths
// whatever the policy does.
func isLocal(p *apiutil.Path) bool {
	return !p.PeerAddress.IsValid() && p.PeerASN == 0
}

// decodeNLRI decodes GoBGP's NLRI of a local path of family fam through
// its wire bytes.
func decodeNLRI(fam flowspec.Family, n gobgp.NLRI) (flowspec.Match, error) {
	if n == nil {
		return flowspec.Match{}, fmt.Errorf("path without NLRI")
	}
	b, err := n.Serialize()
	if err != nil {
		return flowspec.Match{}, err
	}
	m, k, err := flowspec.DecodeMatch(fam, b)
	if err != nil {
		return flowspec.Match{}, err
	}
	if k != len(b) {
		return flowspec.Match{}, fmt.Errorf("%d trailing bytes after the NLRI", len(b)-k)
	}
	return m, nil
}

// pathAction decodes the action of a local path of family fam.
func (s *Speaker) pathAction(fam flowspec.Family, p *apiutil.Path) (flowspec.Action, error) {
	if fam.IsRoute() {
		return decodeRouteAction(p)
	}
	return s.decodeAction(p)
}

// decodeAction reads the action of a FlowSpec path from its extended
// communities (8-byte ones and the 20-byte IPv6 address specific ones).
// Paths ribkeeper announced carry attributes from the speaker's cache and
// are looked up there; others (added through GoBGP's gRPC API, say) are
// serialised and decoded. A path without any yields an error.
func (s *Speaker) decodeAction(p *apiutil.Path) (flowspec.Action, error) {
	for _, at := range p.Attrs {
		switch at.(type) {
		case *gobgp.PathAttributeExtendedCommunities, *gobgp.PathAttributeIP6ExtendedCommunities:
			if a, ok := s.attrs.actionOf(at); ok {
				return a, nil
			}
		}
	}
	var ext, ext6 []byte
	for _, at := range p.Attrs {
		var cs []gobgp.ExtendedCommunityInterface
		v6 := false
		switch a := at.(type) {
		case *gobgp.PathAttributeExtendedCommunities:
			cs = a.Value
		case *gobgp.PathAttributeIP6ExtendedCommunities:
			cs, v6 = a.Value, true
		default:
			continue
		}
		for _, c := range cs {
			b, err := c.Serialize()
			if err != nil {
				return flowspec.Action{}, err
			}
			if v6 {
				ext6 = append(ext6, b...)
			} else {
				ext = append(ext, b...)
			}
		}
	}
	return flowspec.DecodeActionIPv6(ext, ext6)
}
