package bgp

import (
	"context"
	"encoding/binary"
	"fmt"

	api "github.com/osrg/gobgp/v3/api"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// MaxNLRILen is the longest FlowSpec NLRI (length prefix included) that
// GoBGP v3.37.0 encodes correctly: 238 bytes of components. Its encoder
// picks the two-byte length form when components plus prefix reach 240
// bytes, i.e. already for 239 bytes of components, and then writes the
// length over the first component (osrg/gobgp#3596). Measured: a 239-byte
// body comes back from GoBGP's Serialize as 00 00 00 ee ...

const MaxNLRILen = 239

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

// Announce adds the local path for r, or replaces the one with the same
// match. Re-announcing an identical path sends nothing to peers.
//
// It returns once GoBGP has taken the path into its RIB; the mirror shows
// it shortly after (asynchronously, through the watch).
func (s *Speaker) Announce(ctx context.Context, r flowspec.Rule) error {
	if r.Match.Family().IsRoute() {
		return s.announceRoute(ctx, r)
	}
	if !r.Match.IsValid() || !r.Action.IsValid() {
		return &RefusedError{Match: r.Match, Reason: "invalid rule (zero match or action)"}
	}
	if err := checkMatch(r.Match); err != nil {
		return err
	}
	srv, err := s.running()
	if err != nil {
		return err
	}
	p := s.wirePath(r.Match, r.Action, false)
	s.noteAnnounced(r.Match) // before: a timed-out call may still add it
	return s.call(ctx, "announce", func() error {
		_, err := srv.AddPath(context.Background(), &api.AddPathRequest{TableType: api.TableType_GLOBAL, Path: p})
		return err
	})
}

// Withdraw deletes the local path whose NLRI is m. Withdrawing a path that
// is not there is not an error.
func (s *Speaker) Withdraw(ctx context.Context, m flowspec.Match) error {
	if !m.IsValid() {
		return &RefusedError{Match: m, Reason: "invalid match"}
	}
	if m.Family().IsRoute() {
		return s.withdrawRoute(ctx, m)
	}
	srv, err := s.running()
	if err != nil {
		return err
	}
	// Deleting by path (NLRI + family) is a direct lookup; deleting by the
	// UUID AddPath returned scans the whole RIB.
	p := s.wirePath(m, flowspec.Action{}, true)
	err = s.call(ctx, "withdraw", func() error {
		return srv.DeletePath(context.Background(), &api.DeletePathRequest{TableType: api.TableType_GLOBAL, Family: p.Family, Path: p})
	})
	return err
}

// checkMatch refuses what GoBGP v3.37.0 cannot carry correctly: NLRI
// over MaxNLRILen bytes, and what flowspec says GoBGP v3 cannot send (IPv6
// prefix offsets other than 0).
func checkMatch(m flowspec.Match) error {
	if n := m.Len(); n > MaxNLRILen {
		return &RefusedError{Match: m, Reason: fmt.Sprintf("NLRI is %d bytes; GoBGP v3 encodes NLRI over %d bytes wrongly (osrg/gobgp#3596)", n, MaxNLRILen)}
	}
	if err := m.SendableByGoBGPv3(); err != nil {
		return &RefusedError{Match: m, Reason: err.Error()}
	}
	return nil
}

// wirePath builds the api.Path for m in wire form: GoBGP decodes
// NlriBinary and each PattrsBinary entry with its own packet parser, which
// is cheaper than the protobuf Any form.
//
// Attributes: ORIGIN IGP (GoBGP refuses a path without ORIGIN), MP_REACH
// with next hop 0.0.0.0 or :: (GoBGP refuses a path without a next hop;
// the NLRI must be inside too, an empty MP_REACH is refused) and, for an
// announcement, EXTENDED_COMMUNITIES and IPv6 EXTENDED_COMMUNITIES with
// the action. No AS_PATH: GoBGP
// prepends our AS for eBGP peers and attaches an empty one for iBGP peers.
func (s *Speaker) wirePath(m flowspec.Match, a flowspec.Action, withdraw bool) *api.Path {
	fam, afi, nhLen := s.fam4, uint16(1), 4
	if m.Family() == flowspec.IPv6 {
		fam, afi, nhLen = s.fam6, 2, 16
	}
	nlriLen := m.Len()
	mpLen := 2 + 1 + 1 + nhLen + 1 + nlriLen
	// Room for up to 8 communities; append grows the buffer beyond that.
	buf := make([]byte, 0, nlriLen+4+attrHdrLen(mpLen)+mpLen+4+64)

	buf = m.AppendTo(buf)
	nlri := buf[:len(buf):len(buf)]

	start := len(buf)
	buf = append(buf, 0x40, 1, 1, 0) // ORIGIN, well-known transitive, IGP
	origin := buf[start:len(buf):len(buf)]

	start = len(buf)
	buf = appendAttrHdr(buf, 0x80, 14, mpLen) // MP_REACH_NLRI, optional
	buf = binary.BigEndian.AppendUint16(buf, afi)
	buf = append(buf, 133, byte(nhLen))
	buf = append(buf, make([]byte, nhLen)...) // 0.0.0.0 or ::
	buf = append(buf, 0)                      // reserved
	buf = m.AppendTo(buf)
	mpReach := buf[start:len(buf):len(buf)]

	attrs := [][]byte{origin, mpReach}
	if !withdraw {
		// EXTENDED_COMMUNITIES, optional transitive, always with the
		// two-byte length so that the length can be patched in afterwards.
		start = len(buf)
		buf = append(buf, 0xc0|0x10, 16, 0, 0)
		buf = a.AppendExtCommunities(buf)
		if n := len(buf) - start - 4; n > 0 {
			binary.BigEndian.PutUint16(buf[start+2:], uint16(n))
			attrs = append(attrs, buf[start:len(buf):len(buf)])
		} else {
			buf = buf[:start]
		}
		// IPv6 Address Specific Extended Community (RFC 5701), for
		// redirect to an IPv6 address.
		start = len(buf)
		buf = append(buf, 0xc0|0x10, 25, 0, 0)
		buf = a.AppendIPv6ExtCommunities(buf)
		if n := len(buf) - start - 4; n > 0 {
			binary.BigEndian.PutUint16(buf[start+2:], uint16(n))
			attrs = append(attrs, buf[start:len(buf):len(buf)])
		}
	}
	return &api.Path{Family: fam, NlriBinary: nlri, PattrsBinary: attrs, IsWithdraw: withdraw}
}

func attrHdrLen(n int) int {
	if n > 255 {
		return 4
	}
	return 3
}

func appendAttrHdr(b []byte, flags, typ byte, n int) []byte {
	if n > 255 {
		return append(b, flags|0x10, typ, byte(n>>8), byte(n))
	}
	return append(b, flags, typ, byte(n))
}
