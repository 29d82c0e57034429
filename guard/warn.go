package guard

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"net/netip"
	"time"

	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Thresholds of the warnings: what the guardrails allow but an operator
// should look at twice.
const (
	// LongTTL: a rule that outlives a day usually outlives its attack.
	LongTTL = 24 * time.Hour
	// BroadIPv4 and BroadIPv6 are the shortest FlowSpec destinations
	// that pass without a warning: a /16 of IPv4 (65,536 addresses,
	// a whole network's worth) and a /48 of IPv6 (one site).
	BroadIPv4 = 16
	BroadIPv6 = 48
)

// warnings says what about rule r, allowed as decided by d at now, is
// dangerous: one sentence each, naming the risk and what to do instead.
func warnings(l *config.Guardrails, r flowspec.Rule, d Decision, now time.Time) []string {
	var out []string
	switch {
	case d.ExpiresAt.IsZero() && d.KeepExpiry:
		out = append(out, "the rule keeps never expiring: it stays until someone withdraws it; give it a TTL to let it lapse")
	case d.ExpiresAt.IsZero():
		out = append(out, "the rule never expires: it stays until someone withdraws it, long after the attack; prefer a TTL and renew it while needed")
	case d.ExpiresAt.Sub(now) > LongTTL:
		out = append(out, fmt.Sprintf("the rule lives %s, longer than a day: attacks rarely last that long; prefer a shorter TTL and renew it while needed",
			d.ExpiresAt.Sub(now).Round(time.Minute)))
	}
	f := r.Match.Family()
	dst, hasDst := r.Match.Destination()
	switch {
	case f.IsRoute() && dst.Bits() < dst.Addr().BitLen():
		what := "routes"
		if r.Action.HasCommunity(flowspec.CommunityBlackhole) {
			what = "blackholes"
		}
		out = append(out, fmt.Sprintf("the route %s all %s addresses of %s: every host and service in it becomes unreachable, not just the one attacked", what, addresses(dst), dst))
	case f.IsRoute():
	case !hasDst:
		out = append(out, "the rule has no destination: it matches traffic to every address, not just the one attacked")
	case dst.Bits() < broad(f):
		out = append(out, fmt.Sprintf("destination %s covers %s addresses: every host in it is affected, not just the one attacked", dst, addresses(dst)))
	}
	if zeroRate(r.Action) {
		out = append(out, "a rate of 0 drops all the traffic the rule matches: it is a discard")
	}
	return out
}

func broad(f flowspec.Family) int {
	if f.Is6() {
		return BroadIPv6
	}
	return BroadIPv4
}

// addresses is the number of addresses in p, in digits with thousands
// separators.
func addresses(p netip.Prefix) string {
	n := new(big.Int).Lsh(big.NewInt(1), uint(p.Addr().BitLen()-p.Bits()))
	s := n.String()
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// zeroRate reports whether a holds a traffic rate of 0 that rule text
// does not already call "discard": a packet rate of 0, or a byte rate of
// 0 with an AS number.
func zeroRate(a flowspec.Action) bool {
	ext := a.AppendExtCommunities(nil)
	for i := 0; i+8 <= len(ext); i += 8 {
		typ := binary.BigEndian.Uint16(ext[i:])
		rate := math.Float32frombits(binary.BigEndian.Uint32(ext[i+4:]))
		switch {
		case typ == flowspec.ExtTrafficRatePackets && rate == 0:
			return true
		case typ == flowspec.ExtTrafficRateBytes && rate == 0 && binary.BigEndian.Uint16(ext[i+2:]) != 0:
			return true
		}
	}
	return false
}
