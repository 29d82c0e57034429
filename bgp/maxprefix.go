package bgp

// What GoBGP v4.8.0 keeps of the routes a peer sends, and why ribkeeper
// bounds it with a prefix limit rather than dropping them (read in the
// module's source):
//
//   - Every path of an UPDATE is stored in the peer's Adj-RIB-In before
//     any policy runs: pkg/server/peer.go, (*peer).handleUpdate calls
//     peer.adjRibIn.Update(pathList) for each UPDATE, unconditionally;
//     internal/pkg/table/adj.go, (*AdjRib).Update keeps one destination
//     and one *Path per NLRI of every configured family. It is in effect
//     "soft-reconfiguration inbound" that cannot be turned off: soft reset
//     in (pkg/server/server.go, resetNeighbor with soft in) replays
//     peer.adjRibIn.PathList through the import policy again, and the
//     prefix limit counts it.
//   - The global import policy (policy.go) runs afterwards, in
//     (*BgpServer).propagateUpdate: a rejected path is turned into a
//     withdrawal (path.Clone(true)) for the global RIB, whose destination
//     is created and deleted again at once (internal/pkg/table/table.go,
//     (*Table).update, deleteDest). The rejection itself is not stored;
//     ListPath with EnableFiltered recomputes it (getAdjRib). The only
//     rejections AdjRib records (Path.SetRejected) are AS loops and our
//     own ORIGINATOR_ID, and those paths are stored too.
//   - No setting of api.Peer, api.AfiSafi or api.Global disables the
//     Adj-RIB-In or drops rejected paths; only a family that is not
//     configured is not stored (AdjRib has no table for it), and
//     ribkeeper needs every family it configures to send. So keeping
//     nothing would take a patch of GoBGP (skip adjRibIn.Update for a
//     peer flagged so; prefix limit and soft reset in then need a
//     counter of their own).
//   - The Adj-RIB-In of a peer is emptied when its session goes down
//     ((*peer).DropAll from handleFSMMessage), or, with graceful restart,
//     once the peer's restart time runs out (StaleAll, then DropStale).
//   - GoBGP reads a peer's messages and handles each UPDATE in the same
//     goroutine (fsmHandler.recvMessageloop calls the server's callback),
//     so a peer that sends faster than the server stores is held back by
//     TCP: no queue of parsed UPDATEs builds up.
//
// What GoBGP offers is a per-family prefix limit (api.AfiSafi
// PrefixLimits): after storing each UPDATE it counts the Adj-RIB-In of
// every family ((*peer).isPrefixLimit, a walk of the table) and, above
// MaxPrefixes, sends Cease / Maximum Number of Prefixes Reached (RFC 4486,
// 6/1) and puts the peer in the admin state PFX_CT: the session stays down
// and GoBGP never brings it back by itself (the idle hold timer does
// nothing while the admin state is not up, incoming connections are
// closed). That is the trade-off an operator must know: a router that
// exports its full table loses its session, and our FlowSpec rules with
// it, once, instead of making the daemon hold its table; it does not flap.
// Reconfigure brings such a neighbor back (EnablePeer), as does a restart.
// A dynamic neighbor (peer group) is deleted when its session goes down
// and may dial in again; each new session is cut at the limit again.

import (
	"context"
	"fmt"

	api "github.com/osrg/gobgp/v4/api"
)

// prefixWarnPct is the share of MaxPrefixes at which GoBGP logs a warning
// (once per family and session).
const prefixWarnPct = 80

// prefixLimit is the GoBGP prefix limit of a family for max routes (nil:
// no limit).
func prefixLimit(max uint32) *api.PrefixLimit {
	if max == 0 {
		return nil
	}
	return &api.PrefixLimit{MaxPrefixes: max, ShutdownThresholdPct: prefixWarnPct}
}

// prefixLimitError is the peer's last error once GoBGP closed its session
// at the prefix limit.
func prefixLimitError(max uint32) string {
	if max == 0 {
		return "maximum number of prefixes reached (Cease 6/1 sent); session kept down"
	}
	return fmt.Sprintf("maximum number of prefixes reached: more than %d routes in a family (Cease 6/1 sent); session kept down", max)
}

// prefixLimitHint says what to do about a session closed at the limit.
const prefixLimitHint = "ribkeeper uses no route a router sends: make the router's export policy towards us send nothing, " +
	"then reload ribkeeper's configuration (systemctl reload ribkeeper, or SIGHUP) to bring the session up again; " +
	"or raise max_prefixes for this neighbor and reload (0 turns the limit off, and the router's routes then grow memory)"

// enableLimited brings back the sessions among addrs that GoBGP closed at
// their prefix limit. Called with mu held, by Reconfigure.
func (s *Speaker) enableLimited(ctx context.Context, addrs []string) {
	s.peers.mu.Lock()
	var limited []string
	for _, a := range addrs {
		if info, ok := s.peers.state[a]; ok && info.prefixLimited {
			limited = append(limited, a)
		}
	}
	s.peers.mu.Unlock()
	for _, a := range limited {
		if err := s.call(ctx, "enable peer "+a, func() error {
			return s.srv.EnablePeer(context.Background(), &api.EnablePeerRequest{Address: a})
		}); err != nil {
			s.log.Warn("bringing back a session closed at its prefix limit", "peer", a, "error", err)
			continue
		}
		s.peers.mu.Lock()
		if info, ok := s.peers.state[a]; ok {
			info.prefixLimited = false
		}
		s.peers.mu.Unlock()
		s.log.Info("session closed at its prefix limit enabled again", "peer", a)
	}
}
