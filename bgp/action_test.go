package bgp

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Every action flowspec can build comes back from GoBGP's RIB, through the
// watch's protobuf form, equal to what was announced. If one did not, the
// reconciler would see a difference forever and re-announce in a loop.
func TestActionRoundTrip(t *testing.T) {
	s := startSpeaker(t, Config{})
	actions := map[string]flowspec.Action{
		"discard":            flowspec.Discard(),
		"rate-limit":         flowspec.RateLimit(125000.5),
		"rate-limit-as":      flowspec.RateLimitAS(1e9, 65000),
		"rate-limit-packets": flowspec.RateLimitPackets(1000),
		"accept":             flowspec.Accept(),
		"sample-terminal":    flowspec.TrafficAction(true, true),
		"redirect-as2":       flowspec.RedirectAS2(65000, 4000000000),
		"redirect-as4":       flowspec.RedirectAS4(4200000000, 100),
		"redirect-ipv4-rt":   flowspec.RedirectIPv4RT(netip.MustParseAddr("192.0.2.9"), 7),
		"mark":               flowspec.Mark(46),
		"redirect-ip4":       flowspec.RedirectIP(netip.MustParseAddr("192.0.2.10")),
		"redirect-ip6":       flowspec.RedirectIP(netip.MustParseAddr("2001:db8::10")),
		"unknown":            flowspec.ExtCommunity([8]byte{0x43, 0x21, 1, 2, 3, 4, 5, 6}),
		"combined": flowspec.Combine(flowspec.RateLimit(1000), flowspec.Mark(10),
			flowspec.TrafficAction(true, false), flowspec.RedirectIP(netip.MustParseAddr("2001:db8::1"))),
	}
	i := 0
	for name, a := range actions {
		t.Run(name, func(t *testing.T) {
			if !a.IsValid() {
				t.Fatalf("flowspec built an invalid action")
			}
			i++
			for _, m := range []flowspec.Match{match4(t, i), match6(t, i)} {
				if err := s.Announce(context.Background(), flowspec.Rule{Match: m, Action: a}); err != nil {
					t.Fatal(err)
				}
				var got flowspec.Action
				eventually(t, 5*time.Second, "path in mirror", func() bool {
					var ok bool
					got, ok = s.Lookup(m)
					return ok
				})
				if got != a {
					t.Errorf("%s: mirror has %q, announced %q", m.Family(), got, a)
				}
			}
		})
	}
}
