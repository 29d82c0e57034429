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
				if err := announceOne(s, context.Background(), flowspec.Rule{Match: m, Action: a}); err != nil {
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

// Every kind of match comes back from GoBGP's RIB with the same NLRI bytes
// (it is the rule's key), including values encoded longer than necessary.
func TestMatchRoundTrip(t *testing.T) {
	s := startSpeaker(t, Config{})
	texts := []string{
		"match destination 203.0.113.7/32 then discard",
		"match destination 192.0.2.0/24 source 198.51.100.0/24 then discard",
		"match destination 0.0.0.0/0 then discard",
		"match destination 2001:db8::/32 then discard",
		"match source 2001:db8:1::/48 destination ::/0 then discard",
		"match protocol ==6 ==17 then discard",
		"match port ==53 then discard",
		"match destination-port >=1024&<=2048 ==80 then discard",
		"match source-port ==53 then rate-limit 1000",
		"match icmp-type ==8 icmp-code ==0 then discard",
		"match tcp-flags =S&!=A then discard",
		"match tcp-flags R F then discard",
		"match packet-length >1400 then discard",
		"match dscp ==46 then discard",
		"match fragment is-fragment then discard",
		"match fragment =first-fragment+last-fragment !dont-fragment then discard",
		"match destination 2001:db8::/32 label ==12345 then discard",
		"ipv6-flowspec match protocol ==58 icmp-type ==128 then discard",
		"match destination 203.0.113.7/32 protocol ==17 source-port ==53 destination-port >=0&<=65535 packet-length <=65535 then discard",
	}
	var rules []flowspec.Rule
	for _, txt := range texts {
		r, err := flowspec.Parse(txt)
		if err != nil {
			t.Fatalf("Parse(%q): %v", txt, err)
		}
		rules = append(rules, r)
	}
	// destination-port ==53 and packet-length ==100 with 2-byte values.
	long := decode(t, flowspec.IPv4, []byte{8, 5, 0x91, 0, 53, 10, 0x91, 0, 100})
	rules = append(rules, flowspec.Rule{Match: long, Action: flowspec.Discard()})

	for _, r := range rules {
		if err := announceOne(s, context.Background(), r); err != nil {
			t.Fatalf("Announce(%v): %v", r, err)
		}
	}
	eventually(t, 5*time.Second, "all rules mirrored", func() bool { return s.Len() == len(rules) })
	for _, r := range rules {
		if a, ok := s.Lookup(r.Match); !ok || a != r.Action {
			t.Errorf("%v: mirror has %v, %v", r, a, ok)
		}
	}
}
