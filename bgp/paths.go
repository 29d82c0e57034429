package bgp

import (
	"context"
	"encoding/binary"
	"fmt"

	api "github.com/osrg/gobgp/v3/api"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// MaxNLRILen is the longest FlowSpec NLRI (length prefix included) that
// GoBGP v3.37.0 encodes correctly. From 240 bytes on, its encoder switches
// to the two-byte length form and writes it over the first component
// (osrg/gobgp#3596).
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
	srv, err := s.running()
	if err != nil {
		return err
	}
	// Deleting by path (NLRI + family) is a direct lookup; deleting by the
	// UUID AddPath returned scans the whole RIB.
	p := s.wirePath(m, flowspec.Action{}, true)
	return s.call(ctx, "withdraw", func() error {
		return srv.DeletePath(context.Background(), &api.DeletePathRequest{TableType: api.TableType_GLOBAL, Family: p.Family, Path: p})
	})
}

// checkMatch refuses what GoBGP v3.37.0 cannot carry correctly.
func checkMatch(m flowspec.Match) error {
	var buf [256]byte
	b := m.AppendTo(buf[:0])
	if len(b) > MaxNLRILen {
		return &RefusedError{Match: m, Reason: fmt.Sprintf("NLRI is %d bytes; GoBGP v3 encodes NLRI over %d bytes wrongly", len(b), MaxNLRILen)}
	}
	if m.Family() == flowspec.IPv6 {
		if off, ok := ipv6PrefixOffset(b); ok && off != 0 {
			return &RefusedError{Match: m, Reason: fmt.Sprintf("IPv6 prefix offset %d; GoBGP v3 encodes non-zero offsets wrongly", off)}
		}
	}
	return nil
}

// ipv6PrefixOffset walks an IPv6 FlowSpec NLRI (RFC 8956, with its length
// prefix) and returns the first non-zero prefix offset, or 0. ok is false
// if the bytes do not parse (the flowspec package guarantees they do).
func ipv6PrefixOffset(b []byte) (off int, ok bool) {
	if len(b) == 0 {
		return 0, false
	}
	n := int(b[0])
	b = b[1:]
	if n >= 0xf0 {
		if len(b) == 0 {
			return 0, false
		}
		n = (n&0x0f)<<8 | int(b[0])
		b = b[1:]
	}
	if n > len(b) {
		return 0, false
	}
	b = b[:n]
	for len(b) > 0 {
		typ := b[0]
		b = b[1:]
		switch typ {
		case 1, 2: // destination, source prefix: length, offset, pattern
			if len(b) < 2 {
				return 0, false
			}
			plen, o := int(b[0]), int(b[1])
			if o != 0 {
				return o, true
			}
			skip := 2 + (plen-o+7)/8
			if skip > len(b) {
				return 0, false
			}
			b = b[skip:]
		default: // operator list: op byte with end-of-list bit and value length
			for {
				if len(b) == 0 {
					return 0, false
				}
				op := b[0]
				vl := 1 << ((op >> 4) & 3)
				if 1+vl > len(b) {
					return 0, false
				}
				b = b[1+vl:]
				if op&0x80 != 0 {
					break
				}
			}
		}
	}
	return 0, true
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
