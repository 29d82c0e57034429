package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// MaxNLRILen is the longest FlowSpec NLRI (length prefix included) that
// GoBGP v4.8.0 encodes correctly: 238 bytes of components. Its encoder
// picks the two-byte length form when components plus prefix reach 240
// bytes, i.e. already for 239 bytes of components, and then writes the
// length over the first component (osrg/gobgp#3596, still open).
// TestGoBGPRoundTripLimits measures it against the pinned GoBGP.
const MaxNLRILen = 239

// batchSize bounds the paths of one AddPath or DeletePath call: GoBGP runs
// a call as one step of its server loop, which serves nothing else (peer
// state, the other sessions' messages) until the step is done.
const batchSize = 2000

// RefusedError reports a rule that GoBGP would put on the wire wrongly.
// Retrying cannot help: the rule must change.
type RefusedError struct {
	Match  flowspec.Match
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("bgp: rule %q refused: %s", e.Match.String(), e.Reason)
}

// Terminal marks the error as not worth retrying.
func (e *RefusedError) Terminal() bool { return true }

// Sendable reports why m can never be announced through the embedded
// GoBGP, or nil. The API refuses such rules before storing them; Announce
// refuses them too. The limits are measured against the pinned GoBGP by
// TestGoBGPRoundTripLimits: a rule is sendable exactly when GoBGP
// re-encodes it to the bytes ribkeeper encoded.
func Sendable(m flowspec.Match) error {
	if !m.IsValid() {
		return &RefusedError{Match: m, Reason: "invalid match"}
	}
	if m.Family().IsRoute() {
		return nil
	}
	if n := m.Len(); n > MaxNLRILen {
		return &RefusedError{Match: m, Reason: fmt.Sprintf(
			"it encodes to %d bytes and GoBGP (the embedded BGP speaker) corrupts FlowSpec rules over %d bytes (osrg/gobgp#3596): split it into smaller rules (fewer prefixes, ports or ranges each)",
			n, MaxNLRILen)}
	}
	if m.Family() != flowspec.IPv6 {
		return nil
	}
	for _, t := range [...]flowspec.ComponentType{flowspec.DestinationPrefix, flowspec.SourcePrefix} {
		c, ok := m.Component(t)
		if !ok {
			continue
		}
		if _, off, _ := c.Prefix(); off != 0 {
			return &RefusedError{Match: m, Reason: fmt.Sprintf(
				"its %s prefix has offset %d, and GoBGP (the embedded BGP speaker) sizes IPv6 prefix patterns without the offset (RFC 8956 §3.1), so routers would misread the rule: use offset 0",
				t, off)}
		}
	}
	return nil
}

// Announce adds the local paths for rules, or replaces those with the same
// match, in as few calls into GoBGP as it can; GoBGP packs NLRIs with the
// same attributes into one UPDATE. Re-announcing an identical path sends
// nothing to peers. errs[i] is the outcome for rules[i] (nil: taken).
//
// It returns once GoBGP has taken the paths into its RIB; the mirror shows
// them shortly after (asynchronously, through the watch).
func (s *Speaker) Announce(ctx context.Context, rules []flowspec.Rule) []error {
	errs := make([]error, len(rules))
	srv, err := s.running()
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	// Not before running(): Reconfigure holds mu while it waits for tagMu.
	s.tagMu.RLock()
	defer s.tagMu.RUnlock()
	paths := make([]*apiutil.Path, 0, min(len(rules), batchSize))
	idx := make([]int, 0, cap(paths))
	flush := func() {
		if len(paths) == 0 {
			return
		}
		for i, err := range s.addPaths(ctx, srv, paths) {
			switch {
			case idx[i] >= 0:
				errs[idx[i]] = err
			case err != nil:
				s.log.Warn("rule whose place under a rule cap changed not announced again (the next reconcile pass does)", "rule", paths[i].Nlri.String(), "error", err)
			}
		}
		paths, idx = paths[:0], idx[:0]
	}
	for i, r := range rules {
		p, before, after, err := s.announcePath(r)
		// Rules a cap's choice moved go in the same call, in order (see
		// holdState.place); -1: no caller's rule.
		for _, mp := range before {
			paths, idx = append(paths, mp), append(idx, -1)
		}
		if err != nil {
			errs[i] = err
		} else {
			paths, idx = append(paths, p), append(idx, i)
		}
		for _, mp := range after {
			paths, idx = append(paths, mp), append(idx, -1)
		}
		if len(paths) >= batchSize {
			flush()
		}
	}
	flush()
	return errs
}

// movedPaths builds the paths of rules whose place under a rule cap
// changed (holdback.go, point 4), with their current tags.
func (s *Speaker) movedPaths(ms []flowspec.Match) []*apiutil.Path {
	var paths []*apiutil.Path
	for _, m := range ms {
		r, mask, ok := s.hold.again(m)
		if !ok {
			continue
		}
		p, err := s.flowspecPath(r, mask)
		if err != nil {
			s.log.Warn("rule whose place under a rule cap changed cannot be announced again", "rule", m.String(), "error", err)
			continue
		}
		paths = append(paths, p)
	}
	return paths
}

// announceMoved announces again, with their new hold-back tags, the rules
// whose place under a rule cap changed. Nothing maps them to a caller's
// rule, so failures are logged; the reconciler's next pass announces every
// desired rule again anyway.
func (s *Speaker) announceMoved(ctx context.Context, srv *server.BgpServer, moved []flowspec.Match) {
	paths := s.movedPaths(moved)
	for len(paths) > 0 {
		n := min(len(paths), batchSize)
		for i, err := range s.addPaths(ctx, srv, paths[:n]) {
			if err != nil {
				s.log.Warn("rule whose place under a rule cap changed not announced again", "rule", paths[i].Nlri.String(), "error", err)
			}
		}
		paths = paths[n:]
	}
}

// announcePath checks r and builds its GoBGP path, tagged with the
// profiles that must not get it (holdback.go). before and after are the
// paths of other rules whose tags changed with it (rule caps), to hand to
// GoBGP before and after it (holdState.place).
func (s *Speaker) announcePath(r flowspec.Rule) (p *apiutil.Path, before, after []*apiutil.Path, err error) {
	if r.Match.Family().IsRoute() {
		p, err := s.routeAnnouncePath(r)
		return p, nil, nil, err
	}
	if !r.Match.IsValid() || !r.Action.IsValid() {
		return nil, nil, nil, &RefusedError{Match: r.Match, Reason: "invalid rule (zero match or action)"}
	}
	if err := Sendable(r.Match); err != nil {
		return nil, nil, nil, err
	}
	// Parsed once: before place, so that a rule GoBGP cannot take
	// changes no rule cap's choice, and used for the path itself.
	nlri, err := nativeNLRI(r.Match)
	if err != nil {
		return nil, nil, nil, err
	}
	mask, displaced, promoted := s.hold.place(r)
	before, after = s.movedPaths(displaced), s.movedPaths(promoted)
	p, err = s.flowspecPathOf(r, nlri, mask)
	if err != nil {
		return nil, before, after, err
	}
	return p, before, after, nil
}

// flowspecPath builds the GoBGP path of FlowSpec rule r with the
// hold-back tags of mask.
func (s *Speaker) flowspecPath(r flowspec.Rule, mask uint8) (*apiutil.Path, error) {
	nlri, err := nativeNLRI(r.Match)
	if err != nil {
		return nil, err
	}
	return s.flowspecPathOf(r, nlri, mask)
}

// flowspecPathOf is flowspecPath with r's NLRI already parsed.
func (s *Speaker) flowspecPathOf(r flowspec.Rule, nlri gobgp.NLRI, mask uint8) (*apiutil.Path, error) {
	attrs, err := s.attrs.flowspec(r.Match.Family(), r.Action, mask, s.tagAttr)
	if err != nil {
		return nil, &RefusedError{Match: r.Match, Reason: "action cannot be encoded: " + err.Error()}
	}
	return &apiutil.Path{Family: gobgpFamily(r.Match.Family()), Nlri: nlri, Attrs: attrs, Age: pathAge()}, nil
}

// addPaths hands paths to GoBGP in one call. GoBGP answers a failed batch
// with one error and no per-path results, so a failed batch is retried
// path by path to tell which paths failed.
func (s *Speaker) addPaths(ctx context.Context, srv *server.BgpServer, paths []*apiutil.Path) []error {
	errs := make([]error, len(paths))
	err := s.call(ctx, "announce", func() error {
		_, err := srv.AddPath(apiutil.AddPathRequest{Paths: paths})
		return err
	})
	if err == nil {
		return errs
	}
	var te *TimeoutError
	if len(paths) == 1 || errors.As(err, &te) || ctx.Err() != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	for i, p := range paths {
		errs[i] = s.call(ctx, "announce", func() error {
			_, err := srv.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{p}})
			return err
		})
	}
	return errs
}

// Withdraw deletes the local paths whose NLRIs are ms. Withdrawing a path
// that is not there is not an error. errs[i] is the outcome for ms[i].
func (s *Speaker) Withdraw(ctx context.Context, ms []flowspec.Match) []error {
	srv, err := s.running()
	if err != nil {
		errs := make([]error, len(ms))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	return s.withdrawOn(ctx, srv, ms)
}

// withdrawOn is Withdraw on srv (StopWithdrawn holds mu).
func (s *Speaker) withdrawOn(ctx context.Context, srv *server.BgpServer, ms []flowspec.Match) []error {
	s.tagMu.RLock()
	defer s.tagMu.RUnlock()
	errs := make([]error, len(ms))
	paths := make([]*apiutil.Path, 0, min(len(ms), batchSize))
	idx := make([]int, 0, cap(paths))
	var routes []flowspec.Match
	// Rules some router profile in use cannot take are replaced by
	// tombstones instead of deleted (holdback.go, point 2).
	var tombs []*apiutil.Path
	var tombIdx []int
	var moved []flowspec.Match
	flush := func() {
		if len(paths) == 0 {
			return
		}
		// Deleting by path (NLRI + family) is a direct lookup; deleting by
		// the UUID AddPath returned scans the whole RIB.
		err := s.call(ctx, "withdraw", func() error {
			return srv.DeletePath(apiutil.DeletePathRequest{Paths: paths})
		})
		for _, i := range idx {
			errs[i] = err
		}
		if err == nil {
			s.routes.forget(routes)
		}
		paths, idx, routes = paths[:0], idx[:0], routes[:0]
	}
	for i, m := range ms {
		if !m.IsValid() {
			errs[i] = &RefusedError{Match: m, Reason: "invalid match"}
			continue
		}
		nlri, err := nativeNLRI(m)
		if err != nil {
			errs[i] = err
			continue
		}
		if m.Family().IsRoute() {
			routes = append(routes, m)
		} else if _, inRIB := s.Lookup(m); !inRIB && s.hold.tombstoned(m) {
			continue // withdrawn from every peer already
		} else {
			tomb, mv := s.hold.remove(m)
			moved = append(moved, mv...)
			if tomb {
				attrs := s.tomb4
				if m.Family() == flowspec.IPv6 {
					attrs = s.tomb6
				}
				tombs = append(tombs, &apiutil.Path{Family: gobgpFamily(m.Family()), Nlri: nlri, Attrs: attrs, Age: pathAge()})
				tombIdx = append(tombIdx, i)
				continue
			}
		}
		paths = append(paths, &apiutil.Path{Family: gobgpFamily(m.Family()), Nlri: nlri, Attrs: originIGP, Withdrawal: true})
		idx = append(idx, i)
		if len(paths) == batchSize {
			flush()
		}
	}
	flush()
	for len(tombs) > 0 {
		n := min(len(tombs), batchSize)
		for j, err := range s.addPaths(ctx, srv, tombs[:n]) {
			errs[tombIdx[j]] = err
		}
		tombs, tombIdx = tombs[n:], tombIdx[n:]
	}
	s.announceMoved(ctx, srv, moved)
	return errs
}

// originIGP is the attribute list of a withdrawal: GoBGP needs none but
// builds its own MP_UNREACH from the NLRI.
var originIGP = []gobgp.PathAttributeInterface{gobgp.NewPathAttributeOrigin(0)}

// nativeNLRI is m as GoBGP's NLRI type, decoded from ribkeeper's own wire
// encoding by GoBGP's parser.
func nativeNLRI(m flowspec.Match) (gobgp.NLRI, error) {
	var buf [64]byte
	b := m.AppendTo(buf[:0])
	n, err := gobgp.NLRIFromSlice(gobgpFamily(m.Family()), b)
	if err != nil {
		return nil, &RefusedError{Match: m, Reason: "GoBGP cannot parse its NLRI: " + err.Error()}
	}
	return n, nil
}

// gobgpFamily is GoBGP's family of f.
func gobgpFamily(f flowspec.Family) gobgp.Family {
	switch f {
	case flowspec.IPv6:
		return gobgp.RF_FS_IPv6_UC
	case flowspec.IPv4Unicast:
		return gobgp.RF_IPv4_UC
	case flowspec.IPv6Unicast:
		return gobgp.RF_IPv6_UC
	}
	return gobgp.RF_FS_IPv4_UC
}

// familyOf is the ribkeeper family of a GoBGP family, if it has one.
func familyOf(f gobgp.Family) (flowspec.Family, bool) {
	switch f {
	case gobgp.RF_FS_IPv4_UC:
		return flowspec.IPv4, true
	case gobgp.RF_FS_IPv6_UC:
		return flowspec.IPv6, true
	case gobgp.RF_IPv4_UC:
		return flowspec.IPv4Unicast, true
	case gobgp.RF_IPv6_UC:
		return flowspec.IPv6Unicast, true
	}
	return 0, false
}

// attrCache holds the GoBGP attribute lists of the actions in use, shared
// by every path with the same action (GoBGP never modifies a path's
// attributes in place: export policies and AS_PATH prepending work on
// copies). Actions are interned values, so the cache is small: one entry
// per distinct action, dropped as a whole when it grows past maxAttrCache.
type attrCache struct {
	mu sync.Mutex
	m  map[attrKey][]gobgp.PathAttributeInterface
	// back maps an extended-communities attribute this cache built back
	// to its action, so the watch decodes our own paths without
	// re-serialising their communities.
	back map[gobgp.PathAttributeInterface]flowspec.Action
}

type attrKey struct {
	fam  flowspec.Family
	a    flowspec.Action
	mask uint8 // hold-back tags (holdback.go)
}

const maxAttrCache = 1 << 14

// mpReachFS4/6 carry FlowSpec's MP_REACH next hop (0.0.0.0 / ::): GoBGP
// rebuilds MP_REACH from the path's own NLRI, but wants one present (with
// some NLRI in it) to accept a FlowSpec path without a next hop. Their
// NLRI is "destination 0.0.0.0/0" (::/0), never sent.
var (
	mpReachFS4 = mustMPReach(gobgp.RF_FS_IPv4_UC, []byte{2, 1, 0}, netip.IPv4Unspecified())
	mpReachFS6 = mustMPReach(gobgp.RF_FS_IPv6_UC, []byte{3, 1, 0, 0}, netip.IPv6Unspecified())
)

func mustMPReach(f gobgp.Family, nlri []byte, nh netip.Addr) gobgp.PathAttributeInterface {
	n, err := gobgp.NLRIFromSlice(f, nlri)
	if err != nil {
		panic(err)
	}
	a, err := gobgp.NewPathAttributeMpReachNLRI(f, []gobgp.PathNLRI{{NLRI: n}}, nh)
	if err != nil {
		panic(err)
	}
	return a
}

// flowspec returns the attributes of a FlowSpec path of family f with
// action a: ORIGIN IGP, MP_REACH, EXTENDED_COMMUNITIES and IPv6
// EXTENDED_COMMUNITIES with the action, and LARGE_COMMUNITIES with the
// hold-back tags of mask (holdback.go; built by tags) when it is not 0.
// No AS_PATH: GoBGP prepends our AS for eBGP peers and attaches an empty
// one for iBGP peers.
func (c *attrCache) flowspec(f flowspec.Family, a flowspec.Action, mask uint8, tags func(uint8) gobgp.PathAttributeInterface) ([]gobgp.PathAttributeInterface, error) {
	k := attrKey{f, a, mask}
	c.mu.Lock()
	defer c.mu.Unlock()
	if attrs, ok := c.m[k]; ok {
		return attrs, nil
	}
	mp := mpReachFS4
	if f == flowspec.IPv6 {
		mp = mpReachFS6
	}
	attrs := []gobgp.PathAttributeInterface{gobgp.NewPathAttributeOrigin(0), mp}
	var ext gobgp.PathAttributeInterface
	if b := a.AppendExtCommunities(nil); len(b) > 0 {
		at, err := decodeAttr(appendAttr(nil, 0xc0, 16, b))
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, at)
		ext = at
	}
	if b := a.AppendIPv6ExtCommunities(nil); len(b) > 0 {
		at, err := decodeAttr(appendAttr(nil, 0xc0, 25, b))
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, at)
		if ext == nil {
			ext = at
		}
	}
	if mask != 0 {
		attrs = append(attrs, tags(mask))
	}
	c.put(k, attrs)
	if ext != nil {
		c.back[ext] = a
	}
	return attrs, nil
}

func (c *attrCache) put(k attrKey, attrs []gobgp.PathAttributeInterface) {
	if c.m == nil || len(c.m) >= maxAttrCache {
		c.m = make(map[attrKey][]gobgp.PathAttributeInterface)
		c.back = make(map[gobgp.PathAttributeInterface]flowspec.Action)
	}
	c.m[k] = attrs
}

// actionOf returns the action an attribute of this cache was built for.
func (c *attrCache) actionOf(at gobgp.PathAttributeInterface) (flowspec.Action, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.back[at]
	return a, ok
}

// appendAttr appends a path attribute in wire form.
func appendAttr(b []byte, flags, typ byte, v []byte) []byte {
	if len(v) > 255 {
		b = append(b, flags|0x10, typ, byte(len(v)>>8), byte(len(v)))
	} else {
		b = append(b, flags, typ, byte(len(v)))
	}
	return append(b, v...)
}

// decodeAttr parses one path attribute with GoBGP's parser.
func decodeAttr(b []byte) (gobgp.PathAttributeInterface, error) {
	at, err := gobgp.GetPathAttribute(b)
	if err != nil {
		return nil, err
	}
	if err := at.DecodeFromBytes(b); err != nil {
		return nil, err
	}
	return at, nil
}

// pathAge is the timestamp of a path announced now, in Unix seconds.
// GoBGP keeps it as the path's age (the gobgp CLI's "Age" column, a
// router's view is its own); without it every path reads as announced at
// the Unix epoch, ~20,000 days ago.
func pathAge() int64 { return time.Now().Unix() }
