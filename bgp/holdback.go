package bgp

import (
	"fmt"
	"net/netip"
	"sync"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/profile"
)

// Per-peer hold-back: a rule a neighbor's router profile cannot take, or
// that falls outside its rule cap, is never sent to that neighbor, and
// neither is its withdrawal. One speaker, one RIB, one path per rule.
//
// The mechanism (GoBGP v4.8.0, pkg/server/server.go), and why withdrawals
// do not leak:
//
//  1. Every local path carries one BGP large community per profile in use
//     that holds it back (ASN:0x726b0000:N, N = the profile's class), and
//     a global export policy (exportpolicy.go) has, per restrictive
//     profile, a statement "neighbor in that profile's neighbor set AND
//     large community N → reject", then one that strips the tags from
//     what is sent. propagateUpdateToNeighbors → processOutgoingPaths →
//     (*BgpServer).filterpath calls peer.policy.ApplyPolicy(EXPORT) with
//     the target peer in PolicyOptions.Info, which NeighborCondition
//     matches against. So an announcement reaches exactly the peers whose
//     profile takes it; a held-back rule is never in such a peer's
//     Adj-RIB-Out (nor sent at session start: getBestFromLocalCallback
//     runs every best path through the same filterpath).
//  2. An explicit withdrawal (DeletePath, no path left) is NOT filtered:
//     RoutingPolicy.ApplyPolicy returns a withdrawal unchanged ("if
//     before.IsWithdraw { return before }"), so filterpath sends it to
//     every established peer of the family, whatever the tags. FRR 8.4
//     resets the session while parsing such a withdrawn NLRI (measured;
//     TestHoldBackFRR fails that way when Withdraw deletes instead). A
//     withdrawal carries the NLRI only, so what matters is whether some
//     profile in use refuses the match itself, whatever the action
//     (nlriRefused): such a rule is never deleted; Withdraw replaces its
//     path with a tombstone, the same NLRI with a tombstone tag that the
//     export policy rejects for every peer. That
//     is an implicit withdrawal, and for those filterpath does apply the
//     policy to both sides: the new path (tombstone) is rejected, so it
//     checks the old path ("if path == nil && old != nil", old through
//     ApplyPolicy): the peers that had the rule get old.Clone(true), a
//     withdrawal; the peers whose policy rejected the old path get
//     nothing. The mirror treats a tombstone as no path.
//  3. A tombstone is deleted only with its server: Restart (compaction)
//     builds a fresh GoBGP without them, which is also what gives back
//     the table destination any withdrawn NLRI leaves behind; Leaked
//     counts tombstones among those. Announcing the rule again replaces
//     the tombstone (implicit, so again per-peer correct).
//  4. A rule held back only by a cap, or only for its action, is
//     parseable by that router, so its plain withdrawal is harmless (a
//     withdrawal of an NLRI the router does not hold is ignored) and it is
//     deleted normally. When the cap's choice moves (a rule sorting
//     earlier displaces the last one kept, or a removal lets the next one
//     in), the moved rule is announced again with its new tags: an
//     implicit replacement, which filterpath turns into a withdrawal (old
//     accepted, new rejected) or an announcement for that peer alone. A
//     displaced rule goes into the same AddPath call just before the rule
//     that displaces it, a promoted one after the withdrawal that frees
//     its place: GoBGP handles a call's paths in order
//     (AddPath → addPathList → propagateUpdate per path) and queues them
//     to the peer in that order, and table.CreateUpdateMsgFromPaths packs
//     withdrawals before announcements, so the capped router never holds
//     more than its cap. TestHoldBackCapBIRD checks the choice with BIRD.
//  5. Tags are kept only for the profiles in use. When a reload changes
//     that set, Reconfigure first tags every rule again (retag: read from
//     GoBGP's RIB, not the lagging mirror, with Announce and Withdraw kept
//     out by tagMu), then puts every neighbor, old or new, in its
//     profile's neighbor set, and only then adds sessions. A neighbor
//     whose profile changes is deleted and added again; the sets are
//     narrowed to the new configuration afterwards, and a changed peer
//     that came up in between gets a soft reset out (softResetOut
//     withdraws only what hasPathAlreadyBeenSent). TestRetagOnProfileChange.
//
// TestHoldBackFRR (e2e) checks this against a real FRR with the frr
// profile next to BIRD, withdrawals included.
//
// Read in GoBGP v4.8.0 and not taken:
//   - Route-server clients (a per-peer table in rsRib and per-peer
//     policies): our paths enter the global RIB only (AddPath →
//     addPathList → propagateUpdate(nil, ...)), propagateUpdateToNeighbors
//     skips route-server clients for a path without a source peer
//     ("source == nil && targetPeer.isRouteServerClient()"), and nothing
//     adds a path to an rs client's table: apiutil.AddPathRequest has a
//     VRFID but no TableType/Name, the gRPC AddPathStream takes GLOBAL and
//     VRF only. Feeding them would take a second speaker.
//   - A per-neighbor export policy: toPolicyInfo refuses it for peers that
//     are not route-server clients, hence one global policy whose
//     statements match neighbor sets.
//   - A VRF per peer with route-target-tagged FlowSpec-VPN paths:
//     prePolicyFilterpath filters withdrawals by CanImportToVrf too, but
//     it changes the RIB's family, puts route targets on the wire, and
//     when a replacement is no longer importable it sends the peer nothing
//     (the old rule stays there).
//   - The AS-path loop check in filterpath (it does drop withdrawals):
//     per AS, not per peer, and it would need our AS_PATH changed.

// tagData1 marks ribkeeper's hold-back large communities ("rk").
const tagData1 = 0x726b0000

// tombBit in a mask marks a tombstone (LocalData2 0).
const tombBit uint8 = 0x80

// restrictive is the built-in profiles that can hold rules back, in
// profile.Names order; a profile's class is its index here (bit 1<<i in
// masks, LocalData2 i+1 in tags). At most 7.
var restrictive = func() []*profile.Profile {
	var out []*profile.Profile
	for _, p := range profile.All() {
		if p.Restrictive() {
			out = append(out, p)
		}
	}
	if len(out) > 7 {
		panic("bgp: more than 7 restrictive profiles do not fit a mask")
	}
	return out
}()

// classOf returns the class of the profile called name, or -1 when it
// holds nothing back (generic, bird, "").
func classOf(name string) int {
	for i, p := range restrictive {
		if p.Name == name {
			return i
		}
	}
	return -1
}

// holdState is which rules are held back from which profile's peers.
type holdState struct {
	mu   sync.Mutex
	use  uint8           // classes configured on some neighbor or peer group
	caps [7]*profile.Cap // per class in use with a rule cap
	// refused and capOut hold, per FlowSpec rule announced, the classes
	// whose profile refuses it and whose cap leaves it out (non-zero
	// entries only).
	refused map[flowspec.Match]uint8
	capOut  map[flowspec.Match]uint8
	// capAct is the action of every rule in some cap, to announce it
	// again with new tags when the cap's choice moves.
	capAct map[flowspec.Match]flowspec.Action
	tombs  map[flowspec.Match]struct{}
	// held counts the rules held back per class and FlowSpec family.
	held [7][2]int
	// peers maps peer addresses to classes.
	peers peerClasses
}

// reset empties the state for the classes in use and the peers' classes
// pc. keepTombs keeps the record of tombstones (their paths stay in the
// RIB: only a new server drops them).
func (h *holdState) reset(use uint8, pc peerClasses, keepTombs bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.use, h.peers = use, pc
	for i := range h.caps {
		h.caps[i] = nil
		if use&(1<<i) != 0 && restrictive[i].MaxRules > 0 {
			h.caps[i] = profile.NewCap(restrictive[i].MaxRules)
		}
	}
	h.refused = make(map[flowspec.Match]uint8)
	h.capOut = make(map[flowspec.Match]uint8)
	h.capAct = make(map[flowspec.Match]flowspec.Action)
	if !keepTombs || h.tombs == nil {
		h.tombs = make(map[flowspec.Match]struct{})
	}
	h.held = [7][2]int{}
}

func famIdx(f flowspec.Family) int {
	if f == flowspec.IPv6 {
		return 1
	}
	return 0
}

// setMask records m's new masks and keeps the counts. Called with mu held.
func (h *holdState) setMask(m flowspec.Match, ref, out uint8) {
	old := h.refused[m] | h.capOut[m]
	if ref == 0 {
		delete(h.refused, m)
	} else {
		h.refused[m] = ref
	}
	if out == 0 {
		delete(h.capOut, m)
	} else {
		h.capOut[m] = out
	}
	now := ref | out
	fi := famIdx(m.Family())
	for i := range restrictive {
		b := uint8(1) << i
		switch {
		case old&b == 0 && now&b != 0:
			h.held[i][fi]++
		case old&b != 0 && now&b == 0:
			h.held[i][fi]--
		}
	}
}

// outOf recomputes the cap bits of m. Called with mu held.
func (h *holdState) outOf(m flowspec.Match) uint8 {
	var out uint8
	for i, c := range h.caps {
		if c != nil && c.Has(m) && !c.Kept(m) {
			out |= 1 << i
		}
	}
	return out
}

// place records r as announced and returns its mask (the classes that
// must not get it) and the other rules whose mask changed because a cap's
// choice moved: they must be announced again with their new tags,
// displaced ones (a capped router loses them) before r, so that the
// router never holds more than its cap, promoted ones (r left a cap, they
// take its place) after r.
func (h *holdState) place(r flowspec.Rule) (mask uint8, displaced, promoted []flowspec.Match) {
	m := r.Match
	if m.Family().IsRoute() {
		return 0, nil, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refused == nil {
		return 0, nil, nil
	}
	delete(h.tombs, m)
	var ref uint8
	for i, p := range restrictive {
		if h.use&(1<<i) != 0 && p.Check(r) != nil {
			ref |= 1 << i
		}
	}
	inCap := false
	for i, c := range h.caps {
		if c == nil {
			continue
		}
		if ref&(1<<i) == 0 {
			for _, d := range c.Add(m) {
				h.setMask(d, h.refused[d], h.outOf(d))
				displaced = append(displaced, d)
			}
			inCap = true
		} else {
			for _, d := range c.Remove(m) {
				h.setMask(d, h.refused[d], h.outOf(d))
				promoted = append(promoted, d)
			}
		}
	}
	if inCap {
		h.capAct[m] = r.Action
	} else {
		delete(h.capAct, m)
	}
	out := h.outOf(m)
	h.setMask(m, ref, out)
	return ref | out, displaced, promoted
}

// nlriRefused reports whether some profile in use refuses the match m
// itself (an operator, component or item count; not an action): a
// router of that profile cannot even parse a withdrawal of m. It depends
// on m and the profiles in use only, not on what was announced, so a
// withdrawal racing an announcement of the same rule still decides right.
// Called with mu held.
func (h *holdState) nlriRefused(m flowspec.Match) bool {
	r := flowspec.Rule{Match: m, Action: flowspec.Discard()}
	for i, p := range restrictive {
		if h.use&(1<<i) != 0 && p.Check(r) != nil {
			return true
		}
	}
	return false
}

// remove records m as withdrawn. tomb reports that some profile in use
// cannot parse m (nlriRefused): its path must be replaced by a
// tombstone, not deleted. moved are the rules a cap now keeps instead
// (to announce again).
func (h *holdState) remove(m flowspec.Match) (tomb bool, moved []flowspec.Match) {
	if m.Family().IsRoute() {
		return false, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refused == nil {
		return false, nil
	}
	tomb = h.nlriRefused(m)
	for _, c := range h.caps {
		if c == nil {
			continue
		}
		for _, d := range c.Remove(m) {
			h.setMask(d, h.refused[d], h.outOf(d))
			moved = append(moved, d)
		}
	}
	delete(h.capAct, m)
	h.setMask(m, 0, 0)
	if tomb {
		h.tombs[m] = struct{}{}
	}
	return tomb, moved
}

// tombstoned reports whether m's path is a tombstone.
func (h *holdState) tombstoned(m flowspec.Match) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.tombs[m]
	return ok
}

// again returns the rule and mask to announce for a moved rule.
func (h *holdState) again(m flowspec.Match) (flowspec.Rule, uint8, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.capAct[m]
	return flowspec.Rule{Match: m, Action: a}, h.refused[m] | h.capOut[m], ok
}

// maskOf returns the classes m is held back from.
func (h *holdState) maskOf(m flowspec.Match) uint8 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refused[m] | h.capOut[m]
}

// heldCount returns how many rules of the families fams class c holds
// back.
func (h *holdState) heldCount(c int, fams []flowspec.Family) int {
	if c < 0 {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, f := range fams {
		if !f.IsRoute() {
			n += h.held[c][famIdx(f)]
		}
	}
	return n
}

// classOfPeer returns the class of the peer at addr (-1: none).
func (h *holdState) classOfPeer(addr string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.peers.of(addr)
}

// setPeers replaces the peers' classes.
func (h *holdState) setPeers(pc peerClasses) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.peers = pc
}

// inUse returns the classes in use.
func (h *holdState) inUse() uint8 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.use
}

// reason says why class c does not get rule r (its mask has c).
func (h *holdState) reason(c int, r flowspec.Rule) string {
	p := restrictive[c]
	if why := p.Check(r); why != nil {
		return why.Error()
	}
	return fmt.Sprintf("%s %s; this rule is not among the first %d in RFC 8955 precedence order", p.Name, p.RulesWhy, p.MaxRules)
}

// peerClasses maps peers to classes: configured neighbors by address,
// dynamic ones by the prefix of their peer group.
type peerClasses struct {
	addr map[netip.Addr]int
	dyn  []dynClass
}

type dynClass struct {
	prefix netip.Prefix
	class  int
}

func (pc peerClasses) of(addr string) int {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return -1
	}
	a = a.Unmap()
	if c, ok := pc.addr[a]; ok {
		return c
	}
	for _, d := range pc.dyn {
		if d.prefix.Contains(a) {
			return d.class
		}
	}
	return -1
}

// classesOf maps cfg's neighbors and dynamic neighbors to their classes
// and returns the classes in use.
func classesOf(cfg *Config) (peerClasses, uint8) {
	pc := peerClasses{addr: make(map[netip.Addr]int)}
	var use uint8
	for _, n := range cfg.Neighbors {
		c := classOf(n.Profile)
		pc.addr[n.Address.Unmap()] = c
		if c >= 0 {
			use |= 1 << c
		}
	}
	groups := map[string]int{}
	for _, g := range cfg.PeerGroups {
		groups[g.Name] = classOf(g.Profile)
	}
	for _, d := range cfg.DynamicNeighbors {
		c, ok := groups[d.PeerGroup]
		if !ok {
			c = -1
		}
		pc.dyn = append(pc.dyn, dynClass{d.Prefix.Masked(), c})
		if c >= 0 {
			use |= 1 << c
		}
	}
	return pc, use
}
