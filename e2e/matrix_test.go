package e2e

// The receiver matrix (issue 11): ribkeeper sends every component, operator
// form and action to three independent BGP implementations — BIRD, FRR's
// bgpd and ExaBGP — and each receiver's own decoding is checked against
// what the rule means, written by hand in the table below from RFC 8955 /
// RFC 8956 / RFC 7674 / draft-ietf-idr-flowspec-redirect-ip, never derived
// from ribkeeper's encoder.
//
// Where a receiver cannot take a rule, the table records it as that
// receiver's limitation (see e2e/RECEIVERS.md for the evidence) and the
// rule is not sent to it: each receiver gets its own ribkeeper carrying
// only the rules that receiver takes, so that the matrix measures the
// receivers without router profiles in the way (the profiles built from
// these limitations, package profile, are tested with FRR and BIRD on one
// ribkeeper in holdback_test.go).

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"github.com/ribkeeper/ribkeeper/e2e/exabgptest"
	"github.com/ribkeeper/ribkeeper/e2e/frrtest"
)

// limit marks a receiver's documented limitation: the rule is not sent to
// it in the matrix, and the text says why (evidence in RECEIVERS.md).
// TestReceiverLimitations sends each such rule to the receiver alone and
// checks that the limitation still holds.
const limit = "LIMIT: "

// resets is the limitation of a receiver that resets the session when it
// receives the rule.
func resets(why string) string { return limit + "resets: " + why }

// shows is the limitation of a receiver that takes the rule but whose
// decoding of it contains shown instead of the rule's meaning.
func shows(shown, why string) string { return limit + "shows `" + shown + "`: " + why }

// matrixCase is one rule and, per receiver, its decoding as written by
// hand, or limit + the reason the receiver cannot take it.
//
//   - bird: BIRD's network text, " | ", its BGP.ext_community (or for
//     unicast routes: BGP.community " | " BGP.next_hop).
//   - frr: FRR's component lines joined by "; ", " | ", its extended
//     community line (unicast: community string " | " next hop).
//   - exa: ExaBGP's NLRI string, " | ", the extended communities' strings
//     joined by ", " (an unnamed one as 0x + 16 hex digits of its value;
//     unicast: communities " | " next hop).
type matrixCase struct {
	text           string // rule or route text (flowspec/SYNTAX.md)
	bird, frr, exa string
}

// The values below are checked by hand:
//   - traffic-rate-bytes (0x8006) carries AS 0 and an IEEE float32 of
//     bytes/s: 125000 = 0x47f42400, 1.5 = 0x3fc00000; 0 is discard.
//   - traffic-rate-packets (0x800c): 500 = 0x43fa0000.
//   - redirect AS2 (0x8008) 65000:100 = fde8 00000064; IPv4 RT (0x8108)
//     192.0.2.1:100 = c0000201 0064; AS4 (0x8208) 4200000000:7 =
//     fa56ea00 0007.
//   - traffic-action (0x8007): sample 0x02, terminal 0x01 in the last
//     octet (RFC 8955 §7.3); traffic-marking (0x8009) DSCP in the last.
//   - redirect-to-IP (0x010c, draft-ietf-idr-flowspec-redirect-ip-02):
//     the IPv4 address in the global administrator field; IPv6 (0x000c)
//     in an IPv6-address-specific community (attribute 25).
//   - numeric operators (RFC 8955 Table 1): lt|gt|eq 111 = true (every
//     value), 000 = false (no value).
var matrixCases = []matrixCase{
	// Actions, one per rule, on a plain IPv4 destination.
	{
		text: "match destination 10.20.1.0/24 then discard",
		bird: "flow4 { dst 10.20.1.0/24; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.20.1.0/24 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.20.1.0/24 | rate-limit:0",
	},
	{
		text: "match destination 10.20.2.0/24 then rate-limit 125000",
		bird: "flow4 { dst 10.20.2.0/24; } | (generic, 0x80060000, 0x47f42400)",
		frr:  "Destination Address 10.20.2.0/24 | FS:rate 125000.000000",
		exa:  "flow destination-ipv4 10.20.2.0/24 | rate-limit:125000",
	},
	{
		text: "match destination 10.20.3.0/24 then rate-limit-packets 500",
		bird: "flow4 { dst 10.20.3.0/24; } | (generic, 0x800c0000, 0x43fa0000)",
		frr:  shows("UNK:128, 12", "FRR 8.4 does not know traffic-rate-packets (0x800c)"),
		exa:  "flow destination-ipv4 10.20.3.0/24 | 0x800c000043fa0000",
	},
	{
		text: "match destination 10.20.4.0/24 then redirect 65000:100",
		bird: "flow4 { dst 10.20.4.0/24; } | (generic, 0x8008fde8, 0x64)",
		frr:  "Destination Address 10.20.4.0/24 | FS:redirect VRF RT:65000:100",
		exa:  "flow destination-ipv4 10.20.4.0/24 | redirect:65000:100",
	},
	{
		text: "match destination 10.20.5.0/24 then redirect 192.0.2.1:100",
		bird: "flow4 { dst 10.20.5.0/24; } | (generic, 0x8108c000, 0x2010064)",
		frr:  shows("FS:redirect VRF RT:192.0.2.1:10", "FRR 8.4 prints the local administrator of a redirect to an IPv4 route target cut to 2 digits (192.0.2.1:100 sent)"),
		exa:  "flow destination-ipv4 10.20.5.0/24 | 0x8108c00002010064",
	},
	{
		text: "match destination 10.20.6.0/24 then redirect 4200000000:7",
		bird: "flow4 { dst 10.20.6.0/24; } | (generic, 0x8208fa56, 0xea000007)",
		frr:  "Destination Address 10.20.6.0/24 | FS:redirect VRF RT:4200000000:7",
		exa:  resets("ExaBGP 4.2.21 drops the session on a redirect to a 4-byte AS (0x8208)"),
	},
	{
		text: "match destination 10.20.7.0/24 then redirect-ip 192.0.2.1",
		bird: "flow4 { dst 10.20.7.0/24; } | (unknown 0x10c, 192.0.2.1, 0)",
		frr:  "Destination Address 10.20.7.0/24 | NH:192.0.2.1:0",
		exa:  "flow destination-ipv4 10.20.7.0/24 | redirect-to-nexthop-ietf 192.0.2.1",
	},
	{
		text: "match destination 10.20.8.0/24 then mark 10",
		bird: "flow4 { dst 10.20.8.0/24; } | (generic, 0x80090000, 0xa)",
		frr:  "Destination Address 10.20.8.0/24 | FS:marking 10",
		exa:  "flow destination-ipv4 10.20.8.0/24 | mark 10",
	},
	{
		text: "match destination 10.20.9.0/24 then action sample",
		bird: "flow4 { dst 10.20.9.0/24; } | (generic, 0x80070000, 0x2)",
		frr:  shows("FS:action eval stops", "FRR 8.4 prints the same for every combination of the sample and terminal bits"),
		exa:  "flow destination-ipv4 10.20.9.0/24 | action sample",
	},
	{
		text: "match destination 10.20.10.0/24 then action terminal",
		bird: "flow4 { dst 10.20.10.0/24; } | (generic, 0x80070000, 0x1)",
		frr:  shows("FS:action eval stops", "FRR 8.4 prints the same for every combination of the sample and terminal bits"),
		exa:  "flow destination-ipv4 10.20.10.0/24 | action terminal",
	},
	{
		text: "match destination 10.20.11.0/24 then action sample-terminal",
		bird: "flow4 { dst 10.20.11.0/24; } | (generic, 0x80070000, 0x3)",
		frr:  shows("FS:action eval stops", "FRR 8.4 prints the same for every combination of the sample and terminal bits"),
		exa:  "flow destination-ipv4 10.20.11.0/24 | action sample-terminal",
	},
	{
		// Traffic-action with no bit set: evaluation stops at this rule
		// (T clear), no sampling.
		text: "match destination 10.20.12.0/24 then accept",
		bird: "flow4 { dst 10.20.12.0/24; } | (generic, 0x80070000, 0x0)",
		frr:  "Destination Address 10.20.12.0/24 | FS:action eval stops",
		exa:  "flow destination-ipv4 10.20.12.0/24 | action ",
	},
	{
		text: "match destination 10.20.13.0/24 then rate-limit 1.5 as 65000",
		bird: "flow4 { dst 10.20.13.0/24; } | (generic, 0x8006fde8, 0x3fc00000)",
		frr:  "Destination Address 10.20.13.0/24 | FS:rate 1.500000",
		exa:  shows("rate-limit:1", "ExaBGP 4.2.21 prints a fractional rate as an integer (1.5 bytes/s sent)"),
	},
	{
		text: "match destination 10.20.14.0/24 then redirect-ip 192.0.2.1 discard action sample redirect 65000:100 mark 10",
		bird: "flow4 { dst 10.20.14.0/24; } | (unknown 0x10c, 192.0.2.1, 0) (generic, 0x80060000, 0x0) (generic, 0x80070000, 0x2) (generic, 0x8008fde8, 0x64) (generic, 0x80090000, 0xa)",
		frr:  shows("FS:action eval stops", "FRR 8.4 prints the same for every combination of the sample and terminal bits"),
		exa:  "flow destination-ipv4 10.20.14.0/24 | redirect-to-nexthop-ietf 192.0.2.1, rate-limit:0, action sample, redirect:65000:100, mark 10",
	},
	{
		// The IPv6 rules' actions as the IPv4 ones: FRR takes
		// traffic-rate-packets on an IPv6 rule too, printed as unknown.
		text: "match destination 2001:db8:23::/48 then rate-limit-packets 500",
		bird: "flow6 { dst 2001:db8:23::/48; } | (generic, 0x800c0000, 0x43fa0000)",
		frr:  shows("UNK:128, 12", "FRR 8.4 does not know traffic-rate-packets (0x800c), on an IPv6 rule as on an IPv4 one"),
		exa:  "flow destination-ipv6 2001:db8:23::/48/0 | 0x800c000043fa0000",
	},
	{
		text: "match destination 2001:db8:24::/48 then rate-limit 125000",
		bird: "flow6 { dst 2001:db8:24::/48; } | (generic, 0x80060000, 0x47f42400)",
		frr:  "Destination Address 2001:db8:24::/48/off 0 | FS:rate 125000.000000",
		exa:  "flow destination-ipv6 2001:db8:24::/48/0 | rate-limit:125000",
	},
	{
		text: "match destination 2001:db8:20::/48 then redirect-ip 2001:db8::1",
		// BIRD 2.0.12 keeps attribute 25 (0x19) undecoded: type 0x000c,
		// the address, local administrator 0.
		bird: "flow6 { dst 2001:db8:20::/48; } |  | BGP.19 [t]: 00 0c 20 01 0d b8 00 00 00 00 00 00 00 00 00 00 00 01 00 00",
		frr:  shows("UNK:0, 12", "FRR 8.4 does not decode the IPv6 redirect-to-IP community (attribute 25, 0x000c)"),
		exa:  "flow destination-ipv6 2001:db8:20::/48/0 | attribute-0x19-0xC0 redirect-to-nexthop-ietf 2001:db8::1",
	},

	// Components and operators, IPv4.
	{
		text: "match destination 10.21.1.0/24 source 198.51.100.0/24 then discard",
		bird: "flow4 { dst 10.21.1.0/24; src 198.51.100.0/24; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.1.0/24; Source Address 198.51.100.0/24 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.1.0/24 source-ipv4 198.51.100.0/24 | rate-limit:0",
	},
	{
		text: "match source 198.51.100.0/25 protocol ==17 then discard",
		bird: "flow4 { src 198.51.100.0/25; proto 17; } | (generic, 0x80060000, 0x0)",
		frr:  "Source Address 198.51.100.0/25; IP Protocol = 17 | FS:rate 0.000000",
		exa:  "flow source-ipv4 198.51.100.0/25 protocol =udp | rate-limit:0",
	},
	{
		text: "match destination 10.21.2.7/32 protocol ==6 ==17 then discard",
		bird: "flow4 { dst 10.21.2.7/32; proto 6,17; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.2.7/32; IP Protocol = 6 , = 17 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.2.7/32 protocol [ =tcp =udp ] | rate-limit:0",
	},
	{
		text: "match destination 10.21.3.0/24 port ==53 then discard",
		bird: "flow4 { dst 10.21.3.0/24; port 53; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.3.0/24; Port = 53 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.3.0/24 port =53 | rate-limit:0",
	},
	{
		// A range ANDed, ORed with a single value.
		text: "match destination 10.21.4.0/24 destination-port >=1024&<=2048 ==80 then discard",
		bird: "flow4 { dst 10.21.4.0/24; dport 1024..2048,80; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.4.0/24; Destination Port >= 1024 , <= 2048 , = 80 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.4.0/24 destination-port [ >=1024&<=2048 =80 ] | rate-limit:0",
	},
	{
		// 2-octet value.
		text: "match destination 10.21.5.0/24 source-port ==8080 then discard",
		bird: "flow4 { dst 10.21.5.0/24; sport 8080; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.5.0/24; Source Port = 8080 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.5.0/24 source-port =8080 | rate-limit:0",
	},
	{
		text: "match destination 10.21.6.0/24 protocol ==1 icmp-type ==8 icmp-code ==0 then discard",
		bird: "flow4 { dst 10.21.6.0/24; proto 1; icmp type 8; icmp code 0; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.6.0/24; IP Protocol = 1; ICMP Type = 8; ICMP Code = 0 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.6.0/24 protocol =icmp icmp-type =echo-request icmp-code =0 | rate-limit:0",
	},
	{
		// Bitmask match (all of SYN) AND not-match (all of ACK).
		text: "match destination 10.21.7.0/24 tcp-flags =S&!=A then discard",
		bird: "flow4 { dst 10.21.7.0/24; tcp flags 0x2/0x2 && !0x10/0x10; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.7.0/24; TCP Flags = 2,&= ! 16 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.7.0/24 tcp-flags [ =syn&!=ack ] | rate-limit:0",
	},
	{
		// Any of RST, OR any of FIN.
		text: "match destination 10.21.8.0/24 tcp-flags R F then discard",
		bird: "flow4 { dst 10.21.8.0/24; tcp flags !0x0/0x4 || !0x0/0x1; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.8.0/24; TCP Flags ∋ 4,|∋ 1 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.8.0/24 tcp-flags [ rst fin ] | rate-limit:0",
	},
	{
		// None of SYN and ACK set.
		text: "match destination 10.21.9.0/24 tcp-flags !SA then discard",
		bird: "flow4 { dst 10.21.9.0/24; tcp flags 0x0/0x12; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.9.0/24; TCP Flags ∋ ! 18 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.9.0/24 tcp-flags !syn+ack | rate-limit:0",
	},
	{
		// Not all of SYN and ACK set.
		text: "match destination 10.21.22.0/24 tcp-flags !=SA then discard",
		bird: "flow4 { dst 10.21.22.0/24; tcp flags !0x12/0x12; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.22.0/24; TCP Flags = ! 18 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.22.0/24 tcp-flags !=syn+ack | rate-limit:0",
	},
	{
		// 2-octet bitmask value (the NS bit, RFC 3540).
		text: "match destination 10.21.10.0/24 tcp-flags 0x100 then discard",
		bird: "flow4 { dst 10.21.10.0/24; tcp flags !0x0/0x100; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.10.0/24; TCP Flags ∋ 256 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.10.0/24 tcp-flags ns | rate-limit:0",
	},
	{
		text: "match destination 10.21.11.0/24 packet-length <64 >1400 then discard",
		bird: "flow4 { dst 10.21.11.0/24; length < 64 || > 1400; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.11.0/24; Packet Length < 64 , > 1400 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.11.0/24 packet-length [ <64 >1400 ] | rate-limit:0",
	},
	{
		text: "match destination 10.21.12.0/24 packet-length >=100&<=200 then discard",
		bird: "flow4 { dst 10.21.12.0/24; length 100..200; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.12.0/24; Packet Length >= 100 , <= 200 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.12.0/24 packet-length [ >=100&<=200 ] | rate-limit:0",
	},
	{
		text: "match destination 10.21.13.0/24 dscp ==46 then discard",
		bird: "flow4 { dst 10.21.13.0/24; dscp 46; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.13.0/24; DSCP field = 46 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.13.0/24 dscp =46 | rate-limit:0",
	},
	{
		// IsF is bit 0x02 (RFC 8955 §4.2.2.12).
		text: "match destination 10.21.14.0/24 fragment is-fragment then discard",
		bird: "flow4 { dst 10.21.14.0/24; fragment !!is_fragment; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.14.0/24; Packet Fragment ∋ 2 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.14.0/24 fragment is-fragment | rate-limit:0",
	},
	{
		// Both FF (0x04) and LF (0x08), or not DF (0x01).
		text: "match destination 10.21.15.0/24 fragment =first-fragment+last-fragment !dont-fragment then discard",
		bird: "flow4 { dst 10.21.15.0/24; fragment 0xc/0xc || !dont_fragment; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.15.0/24; Packet Fragment = 12,|∋ ! 1 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.15.0/24 fragment [ =first-fragment+last-fragment !dont-fragment ] | rate-limit:0",
	},
	{
		text: "match destination 10.21.16.0/24 fragment dont-fragment then discard",
		bird: "flow4 { dst 10.21.16.0/24; fragment !!dont_fragment; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.16.0/24; Packet Fragment ∋ 1 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.16.0/24 fragment dont-fragment | rate-limit:0",
	},
	{
		text: "match destination 10.21.17.0/24 port <1024 then discard",
		bird: "flow4 { dst 10.21.17.0/24; port < 1024; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.17.0/24; Port < 1024 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.17.0/24 port <1024 | rate-limit:0",
	},
	{
		text: "match destination 10.21.18.0/24 port <=1023 then discard",
		bird: "flow4 { dst 10.21.18.0/24; port <= 1023; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.18.0/24; Port <= 1023 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.18.0/24 port <=1023 | rate-limit:0",
	},
	{
		text: "match destination 10.21.19.0/24 port >1023 then discard",
		bird: "flow4 { dst 10.21.19.0/24; port > 1023; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.19.0/24; Port > 1023 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.19.0/24 port >1023 | rate-limit:0",
	},
	{
		text: "match destination 10.21.20.0/24 port >=1024 then discard",
		bird: "flow4 { dst 10.21.20.0/24; port >= 1024; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.20.0/24; Port >= 1024 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.20.0/24 port >=1024 | rate-limit:0",
	},
	{
		text: "match destination 10.21.21.0/24 port !=80 then discard",
		bird: "flow4 { dst 10.21.21.0/24; port != 80; } | (generic, 0x80060000, 0x0)",
		frr:  resets("FRR 8.4 resets the session on a numeric != (lt|gt set, eq clear): NOTIFICATION 3/9 Optional Attribute Error, log \"Bad flowspec format or NLRI options not supported\""),
		exa:  "flow destination-ipv4 10.21.21.0/24 port !=80 | rate-limit:0",
	},
	{
		// RFC 8955 Table 1: lt|gt|eq = 111 matches every value.
		text: "match destination 10.21.23.0/24 port true then discard",
		bird: "flow4 { dst 10.21.23.0/24; port true 0; } | (generic, 0x80060000, 0x0)",
		frr:  resets("FRR 8.4 resets the session on a numeric operator with lt|gt|eq = 111 (true): NOTIFICATION 3/9"),
		exa:  "flow destination-ipv4 10.21.23.0/24 port true | rate-limit:0",
	},
	{
		// lt|gt|eq = 000 matches no value.
		text: "match destination 10.21.24.0/24 port false then discard",
		bird: "flow4 { dst 10.21.24.0/24; port false 0; } | (generic, 0x80060000, 0x0)",
		frr:  shows("Port  0", "FRR 8.4 takes numeric false (lt|gt|eq = 000) but prints it with no operator"),
		exa:  "flow destination-ipv4 10.21.24.0/24 port false | rate-limit:0",
	},
	{
		text: "match destination 10.21.25.0/24 port ==1 ==2 ==3 ==4 ==5 then discard",
		bird: "flow4 { dst 10.21.25.0/24; port 1,2,3,4,5; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.25.0/24; Port = 1 , = 2 , = 3 , = 4 , = 5 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.25.0/24 port [ =1 =2 =3 =4 =5 ] | rate-limit:0",
	},
	{
		text: "match destination 10.21.26.0/24 port ==1 ==2 ==3 ==4 ==5 ==6 then discard",
		bird: "flow4 { dst 10.21.26.0/24; port 1,2,3,4,5,6; } | (generic, 0x80060000, 0x0)",
		frr:  resets("FRR 8.4 resets the session on more than 5 items in one component: NOTIFICATION 3/9"),
		exa:  "flow destination-ipv4 10.21.26.0/24 port [ =1 =2 =3 =4 =5 =6 ] | rate-limit:0",
	},
	{
		// Every component of IPv4 in one rule.
		text: "match destination 10.21.27.0/24 source 192.0.2.0/24 protocol ==6 port >=1&<=65535 destination-port ==443 source-port >1023 icmp-type ==0 icmp-code ==0 tcp-flags S packet-length <=1500 dscp ==0 fragment !is-fragment then discard",
		bird: "flow4 { dst 10.21.27.0/24; src 192.0.2.0/24; proto 6; port 1..65535; dport 443; sport > 1023; icmp type 0; icmp code 0; tcp flags !0x0/0x2; length <= 1500; dscp 0; fragment !is_fragment; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 10.21.27.0/24; Source Address 192.0.2.0/24; IP Protocol = 6; Port >= 1 , <= 65535; Destination Port = 443; Source Port > 1023; ICMP Type = 0; ICMP Code = 0; TCP Flags ∋ 2; Packet Length <= 1500; DSCP field = 0; Packet Fragment ∋ ! 2 | FS:rate 0.000000",
		exa:  "flow destination-ipv4 10.21.27.0/24 source-ipv4 192.0.2.0/24 protocol =tcp port [ >=1&<=65535 ] destination-port =443 source-port >1023 icmp-type =echo-reply icmp-code =0 tcp-flags syn packet-length <=1500 dscp =0 fragment !is-fragment | rate-limit:0",
	},

	// IPv6.
	{
		text: "match destination 2001:db8:21::/48 source 2001:db8:99::/48 then discard",
		bird: "flow6 { dst 2001:db8:21::/48; src 2001:db8:99::/48; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 2001:db8:21::/48/off 0; Source Address 2001:db8:99::/48/off 0 | FS:rate 0.000000",
		exa:  "flow destination-ipv6 2001:db8:21::/48/0 source-ipv6 2001:db8:99::/48/0 | rate-limit:0",
	},
	{
		text: "match destination 2001:db8:22::/48 next-header ==58 icmp-type ==128 icmp-code ==0 then discard",
		bird: "flow6 { dst 2001:db8:22::/48; next header 58; icmp type 128; icmp code 0; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 2001:db8:22::/48/off 0; IP Protocol = 58; ICMP Type = 128; ICMP Code = 0 | FS:rate 0.000000",
		exa:  "flow destination-ipv6 2001:db8:22::/48/0 next-header =unknown protocol type 58 icmp-type =unknown icmp type type 128 icmp-code =0 | rate-limit:0",
	},
	{
		// Flow label, 1-octet value.
		text: "match destination 2001:db8:23::/48 label ==5 then discard",
		bird: "flow6 { dst 2001:db8:23::/48; label 5; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 2001:db8:23::/48/off 0; Packet Flow Label = 5 | FS:rate 0.000000",
		exa:  "flow destination-ipv6 2001:db8:23::/48/0 flow-label =5 | rate-limit:0",
	},
	{
		// 2-octet value.
		text: "match destination 2001:db8:24::/48 label ==1000 then discard",
		bird: "flow6 { dst 2001:db8:24::/48; label 1000; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 2001:db8:24::/48/off 0; Packet Flow Label = 1000 | FS:rate 0.000000",
		exa:  "flow destination-ipv6 2001:db8:24::/48/0 flow-label =1000 | rate-limit:0",
	},
	{
		// 4-octet value.
		text: "match destination 2001:db8:25::/48 label >=65536&<=1000000 then discard",
		bird: "flow6 { dst 2001:db8:25::/48; label 65536..1000000; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 2001:db8:25::/48/off 0; Packet Flow Label >= 65536 , <= 1000000 | FS:rate 0.000000",
		exa:  "flow destination-ipv6 2001:db8:25::/48/0 flow-label [ >=65536&<=1000000 ] | rate-limit:0",
	},
	{
		// FF is 0x04; IPv6 has no DF.
		text: "match destination 2001:db8:26::/48 fragment first-fragment then discard",
		bird: "flow6 { dst 2001:db8:26::/48; fragment !!first_fragment; } | (generic, 0x80060000, 0x0)",
		frr:  "Destination Address 2001:db8:26::/48/off 0; Packet Fragment ∋ 4 | FS:rate 0.000000",
		exa:  "flow destination-ipv6 2001:db8:26::/48/0 fragment first-fragment | rate-limit:0",
	},
	{
		text: "match destination 2001:db8:27::/48 next-header ==6 port ==443 destination-port ==443 source-port >=1024 tcp-flags S packet-length >1280 dscp ==10 then rate-limit 125000",
		bird: "flow6 { dst 2001:db8:27::/48; next header 6; port 443; dport 443; sport >= 1024; tcp flags !0x0/0x2; length > 1280; dscp 10; } | (generic, 0x80060000, 0x47f42400)",
		frr:  "Destination Address 2001:db8:27::/48/off 0; IP Protocol = 6; Port = 443; Destination Port = 443; Source Port >= 1024; TCP Flags ∋ 2; Packet Length > 1280; DSCP field = 10 | FS:rate 125000.000000",
		exa:  "flow destination-ipv6 2001:db8:27::/48/0 next-header =tcp port =443 destination-port =443 source-port >=1024 tcp-flags syn packet-length >1280 traffic-class =10 | rate-limit:125000",
	},
	{
		text: "match destination 2001:db8:28::/48 label !=0 then discard",
		bird: "flow6 { dst 2001:db8:28::/48; label != 0; } | (generic, 0x80060000, 0x0)",
		frr:  resets("FRR 8.4 resets the session on a numeric != (lt|gt set, eq clear): NOTIFICATION 3/9"),
		exa:  "flow destination-ipv6 2001:db8:28::/48/0 flow-label !=0 | rate-limit:0",
	},

	// RTBH.
	{
		text: "route 203.0.113.7/32 then blackhole",
		bird: "203.0.113.7/32 | (65535,666) (65535,65281) | 192.0.2.99",
		frr:  "203.0.113.7/32 | blackhole no-export | 192.0.2.99",
		exa:  "203.0.113.7/32 | 65535:666 65535:65281 | 192.0.2.99",
	},
	{
		text: "route 2001:db8::7/128 then blackhole",
		bird: "2001:db8::7/128 | (65535,666) (65535,65281) | 100::99",
		frr:  "2001:db8::7/128 | blackhole no-export | 100::99",
		exa:  "2001:db8::7/128 | 65535:666 65535:65281 | 100::99",
	},
}

// matrixReceiver is one receiver of the matrix: how to start it and read
// back its decoding of each case.
type matrixReceiver struct {
	name string
	addr string // the receiver's loopback address
	rk   string // its ribkeeper's loopback address
	want func(matrixCase) string
	// start starts the receiver peering with ribkeeper on rk:rkPort and
	// returns its port and functions reading its state.
	start func(t *testing.T, rkPort int) matrixPeer
}

type matrixPeer struct {
	port int
	// up reports whether the session is established.
	up func() bool
	// resets counts session resets since the session first came up
	// (0 while it never went down), with evidence for a failure message.
	resets func() (int, string)
	// decoded returns the receiver's decoding of every route it holds,
	// keyed by the network's text (the part before the first " | ").
	decoded func() (map[string]string, error)
}

// matrixRTBH opens allow_no_destination: the matrix sends a rule without
// a destination (a source-only match) on purpose.
const matrixRTBH = `[rtbh]
next_hop_ipv4 = "192.0.2.99"
next_hop_ipv6 = "100::99"
[guardrails]
allow_no_destination = true
prefix_lengths.ipv4_unicast = [32, 32]
prefix_lengths.ipv6_unicast = [128, 128]
`

// TestReceiverMatrix sends every case to BIRD, FRR and ExaBGP at once (one
// ribkeeper each) and checks each receiver's own decoding against the
// table. It fails, not skips, under CI when a receiver's binary is missing.
func TestReceiverMatrix(t *testing.T) {
	birdtest.Binary(t)
	frrtest.Binary(t)
	exabgptest.Binary(t)
	t.Logf("receivers: BIRD (%s), FRR (%s), ExaBGP %s", birdVersion(), frrtest.Version(t), exabgptest.Version(t))
	for _, rc := range matrixReceivers() {
		t.Run(rc.name, func(t *testing.T) {
			t.Parallel()
			runMatrix(t, rc)
		})
	}
}

func birdVersion() string {
	out, _ := execOutput("bird", "--version")
	return strings.TrimSpace(out)
}

// birdSameSession reports whether two lines of "birdc show protocols"
// for one BGP protocol show the same established session. BIRD derives
// the "since" time it prints from its monotonic clock at each read, so
// it moves by a millisecond now and then (".802" became ".801" between
// two reads of one session); a session that restarted shows a since time
// at least a connect retry (seconds) later.
func birdSameSession(a, b string) bool {
	since := func(l string) (time.Time, string, bool) {
		f := strings.Fields(l)
		if len(f) < 7 {
			return time.Time{}, "", false
		}
		t, err := time.Parse("2006-01-02 15:04:05.000", f[4]+" "+f[5])
		return t, strings.Join(append(f[:4:4], f[6:]...), " "), err == nil
	}
	ta, ra, oka := since(a)
	tb, rb, okb := since(b)
	d := tb.Sub(ta)
	return oka && okb && ra == rb && d > -time.Second && d < time.Second
}

func matrixReceivers() []matrixReceiver {
	return []matrixReceiver{
		{
			name: "bird", addr: "127.0.0.31", rk: "127.0.0.21",
			want: func(c matrixCase) string { return c.bird },
			start: func(t *testing.T, rkPort int) matrixPeer {
				r := birdtest.Start(t, birdtest.Options{Address: "127.0.0.31", ASN: 65001,
					Peers: []birdtest.Peer{{Address: "127.0.0.21", Port: rkPort, ASN: 65000}}})
				var first string
				return matrixPeer{
					port: r.Port,
					up:   func() bool { return r.Established(0) },
					resets: func() (int, string) {
						// BIRD's "since" column changes whenever the session
						// restarts.
						out, _ := r.Birdc("show", "protocols", "up0")
						line := ""
						for _, l := range strings.Split(out, "\n") {
							if strings.HasPrefix(l, "up0") {
								line = strings.Join(strings.Fields(l), " ")
							}
						}
						if first == "" {
							first = line
						}
						if line != first && !birdSameSession(first, line) {
							return 1, "BIRD: " + first + " became " + line
						}
						return 0, ""
					},
					decoded: func() (map[string]string, error) { return birdDecoded(r) },
				}
			},
		},
		{
			name: "frr", addr: "127.0.0.32", rk: "127.0.0.22",
			want: func(c matrixCase) string { return c.frr },
			start: func(t *testing.T, rkPort int) matrixPeer {
				r := frrtest.Start(t, frrtest.Options{Address: "127.0.0.32", ASN: 65002,
					Peers: []frrtest.Peer{{Address: "127.0.0.22", Port: rkPort, ASN: 65000}}})
				return matrixPeer{
					port: r.Port,
					up:   func() bool { return r.Established("127.0.0.22") },
					resets: func() (int, string) {
						s, err := r.Neighbor("127.0.0.22")
						if err != nil {
							return 0, err.Error()
						}
						return s.Dropped, fmt.Sprintf("FRR: %d drops, last reset %q, last error %q", s.Dropped, s.LastReset, s.LastError)
					},
					decoded: func() (map[string]string, error) { return frrDecoded(r) },
				}
			},
		},
		{
			name: "exabgp", addr: "127.0.0.33", rk: "127.0.0.23",
			want: func(c matrixCase) string { return c.exa },
			start: func(t *testing.T, rkPort int) matrixPeer {
				s := exabgptest.Start(t, exabgptest.Options{Address: "127.0.0.33", ASN: 65003, Receive: true,
					Peers: []exabgptest.Peer{{Address: "127.0.0.23", Port: rkPort, ASN: 65000, Passive: true}}})
				return matrixPeer{
					port: s.Port,
					up: func() bool {
						r, err := s.Received("127.0.0.23")
						return err == nil && r.Up
					},
					resets: func() (int, string) {
						r, err := s.Received("127.0.0.23")
						if err != nil {
							return 0, err.Error()
						}
						return r.Downs, fmt.Sprintf("ExaBGP: session down %d times: %q, notifications %v; its log:\n%s", r.Downs, r.Reasons, r.Notifications, s.LogTail(6))
					},
					decoded: func() (map[string]string, error) { return exabgpDecoded(s, "127.0.0.23") },
				}
			},
		},
	}
}

// runMatrix starts rc and a ribkeeper peering with it, sends every case the
// receiver takes, and compares the receiver's decoding with the table.
func runMatrix(t *testing.T, rc matrixReceiver) {
	var send []matrixCase
	var skipped []string
	for _, c := range matrixCases {
		w := rc.want(c)
		if strings.HasPrefix(w, limit) {
			skipped = append(skipped, c.text+": "+strings.TrimPrefix(w, limit))
			continue
		}
		send = append(send, c)
	}
	t.Logf("%s: %d rules sent, %d held back as documented limitations:\n  %s", rc.name, len(send), len(skipped), strings.Join(skipped, "\n  "))

	peer, d := startMatrixPair(t, rc)
	base, _ := peer.resets() // the session as it came up

	for _, c := range send {
		d.mustCLI("rule", "add", "--ttl", "1h", "--reason", "matrix", c.text)
	}
	want := map[string]string{}
	for _, c := range send {
		w := rc.want(c)
		key, _, _ := strings.Cut(w, " | ")
		want[key] = w
	}
	var got map[string]string
	deadline := time.Now().Add(60 * time.Second)
	for {
		var err error
		got, err = peer.decoded()
		if err != nil {
			t.Fatalf("%s: read back: %v", rc.name, err)
		}
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
		if n, why := peer.resets(); n > base {
			t.Fatalf("%s reset the session while receiving the matrix: %s", rc.name, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, c := range send {
		w := rc.want(c)
		key, _, _ := strings.Cut(w, " | ")
		g, ok := got[key]
		switch {
		case !ok:
			t.Errorf("%s has no route for %q\n  want %s\n  routes it holds with the same destination: %s", rc.name, c.text, w, similar(got, key))
		case g != w:
			t.Errorf("%s decodes %q as\n  got  %s\n  want %s", rc.name, c.text, g, w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s holds a route no case expects: %s", rc.name, g)
		}
	}
	if n, why := peer.resets(); n > base {
		t.Errorf("%s reset the session during the matrix: %s", rc.name, why)
	}
}

// startMatrixPair starts rc and a ribkeeper peering with it and waits for
// the session.
func startMatrixPair(t *testing.T, rc matrixReceiver) (matrixPeer, *daemon) {
	t.Helper()
	rkPort := birdtest.FreePort(t, rc.rk)
	peer := rc.start(t, rkPort)
	d := startMatrixSpeaker(t, rc.rk, rkPort, rc.addr, peer.port)
	waitFor(t, 60*time.Second, rc.name+" session established", peer.up)
	return peer, d
}

// TestReceiverLimitations sends each rule the matrix holds back from a
// receiver to that receiver alone and checks that the documented
// limitation still holds: a "resets" rule makes it reset the session, a
// "shows" rule is decoded as the table says. When a receiver's new version
// lifts a limitation, this test fails and the table, RECEIVERS.md and the
// receiver's profile need updating.
func TestReceiverLimitations(t *testing.T) {
	birdtest.Binary(t)
	frrtest.Binary(t)
	exabgptest.Binary(t)
	for _, rc := range matrixReceivers() {
		var shown, reset []matrixCase
		for _, c := range matrixCases {
			switch w := rc.want(c); {
			case strings.HasPrefix(w, limit+"resets: "):
				reset = append(reset, c)
			case strings.HasPrefix(w, limit+"shows `"):
				shown = append(shown, c)
			case strings.HasPrefix(w, limit):
				t.Fatalf("%s: limitation of %q is neither resets(...) nor shows(...): %s", rc.name, c.text, w)
			}
		}
		if len(shown)+len(reset) == 0 {
			continue
		}
		t.Run(rc.name, func(t *testing.T) {
			t.Parallel()
			if len(shown) > 0 {
				checkShown(t, rc, shown)
			}
			for _, c := range reset {
				t.Run(matrixDestination(c.text), func(t *testing.T) {
					peer, d := startMatrixPair(t, rc)
					base, _ := peer.resets()
					d.mustCLI("rule", "add", "--ttl", "1h", c.text)
					deadline := time.Now().Add(30 * time.Second)
					for {
						n, why := peer.resets()
						if n > base {
							t.Logf("%s resets on %q as documented: %s", rc.name, c.text, why)
							return
						}
						if time.Now().After(deadline) {
							got, _ := peer.decoded()
							t.Fatalf("%s did not reset the session within 30s of %q: the limitation %q no longer holds; it decodes the rule as %s",
								rc.name, c.text, rc.want(c), similar(got, matrixDestination(c.text)))
						}
						time.Sleep(50 * time.Millisecond)
					}
				})
			}
		})
	}
}

// checkShown sends the "shows" rules to one receiver and checks each
// decoding contains what the table says, without a session reset.
func checkShown(t *testing.T, rc matrixReceiver, cases []matrixCase) {
	peer, d := startMatrixPair(t, rc)
	base, _ := peer.resets()
	for _, c := range cases {
		d.mustCLI("rule", "add", "--ttl", "1h", c.text)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := peer.decoded()
		if err != nil {
			t.Fatalf("%s: read back: %v", rc.name, err)
		}
		var missing []string
		for _, c := range cases {
			w := strings.TrimPrefix(rc.want(c), limit+"shows `")
			shown, _, _ := strings.Cut(w, "`")
			if g := similar(got, matrixDestination(c.text)); !strings.Contains(g, shown) {
				missing = append(missing, fmt.Sprintf("%q: want a decoding containing %q, got %s", c.text, shown, g))
			}
		}
		if len(missing) == 0 {
			break
		}
		if n, why := peer.resets(); n > base {
			t.Fatalf("%s reset the session on rules documented as decoded: %s", rc.name, why)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: documented decodings not seen within 30s (the limitation may no longer hold):\n  %s", rc.name, strings.Join(missing, "\n  "))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, c := range cases {
		t.Logf("%s: %q shows as documented: %s", rc.name, c.text, rc.want(c))
	}
	if n, why := peer.resets(); n > base {
		t.Errorf("%s reset the session: %s", rc.name, why)
	}
}

// matrixDestination is the first prefix of a rule's text.
func matrixDestination(text string) string {
	for _, w := range strings.Fields(text) {
		if strings.Contains(w, "/") {
			return w
		}
	}
	return text
}

// similar lists the decoded routes that share a prefix with key.
func similar(got map[string]string, key string) string {
	var out []string
	for k, v := range got {
		for _, w := range strings.Fields(key) {
			if w = strings.TrimSuffix(w, ";"); strings.Contains(w, "/") && strings.Contains(k, w) {
				out = append(out, v)
				break
			}
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "\n    ")
}

// startMatrixSpeaker starts a ribkeeper on addr:port with one neighbor
// (all four families, RTBH next hops 192.0.2.99 and 100::99).
func startMatrixSpeaker(t *testing.T, addr string, port int, nbAddr string, nbPort int) *daemon {
	t.Helper()
	dir := t.TempDir()
	d := &daemon{t: t, dir: dir, conf: filepath.Join(dir, "ribkeeper.toml"), socket: filepath.Join(dir, "rk.sock")}
	conf := fmt.Sprintf(`site = "matrix"
[log]
level = "debug"
[bgp]
asn = 65000
router_id = %[1]q
listen_addresses = [%[1]q]
listen_port = %[2]d
[[neighbor]]
address = %[3]q
asn = %[4]d
port = %[5]d
local_address = %[1]q
multihop_ttl = 2
families = ["ipv4-flowspec", "ipv6-flowspec", "ipv4-unicast", "ipv6-unicast"]
[store]
path = %[6]q
[api]
socket = %[7]q
%[8]s`, addr, port, nbAddr, matrixASN[nbAddr], nbPort, filepath.Join(dir, "rk.db"), d.socket, matrixRTBH)
	if err := os.WriteFile(d.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	d.start()
	return d
}

var matrixASN = map[string]int{"127.0.0.31": 65001, "127.0.0.32": 65002, "127.0.0.33": 65003}

// birdDecoded is BIRD's text of every route in its four tables.
func birdDecoded(r *birdtest.Router) (map[string]string, error) {
	out := map[string]string{}
	for _, table := range []string{"ft4", "ft6"} {
		routes, err := r.Routes(table)
		if err != nil {
			return nil, err
		}
		for net, rt := range routes {
			out[net] = net + " | " + rt.Attrs["BGP.ext_community"] + birdOther(rt)
		}
	}
	for _, table := range []string{"up4", "up6"} {
		routes, err := r.Routes(table)
		if err != nil {
			return nil, err
		}
		for net, rt := range routes {
			out[net] = net + " | " + rt.Attrs["BGP.community"] + " | " + rt.Attrs["BGP.next_hop"]
		}
	}
	return out, nil
}

// birdOther is " | name: value" for each BGP attribute of a FlowSpec
// route beyond the ones every route carries, e.g. an attribute BIRD does
// not know.
func birdOther(rt birdtest.Route) string {
	var names []string
	for k := range rt.Attrs {
		switch k {
		case "BGP.origin", "BGP.as_path", "BGP.next_hop", "BGP.local_pref", "BGP.ext_community":
		default:
			if strings.HasPrefix(k, "BGP.") {
				names = append(names, k)
			}
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, " | %s: %s", k, rt.Attrs[k])
	}
	return b.String()
}

// frrDecoded is FRR's text of every route in its four tables.
func frrDecoded(r *frrtest.Router) (map[string]string, error) {
	out := map[string]string{}
	for _, afi := range []string{"ipv4", "ipv6"} {
		flows, err := r.Flows(afi)
		if err != nil {
			return nil, err
		}
		for _, f := range flows {
			key := strings.Join(f.Match, "; ")
			out[key] = key + " | " + f.Actions
		}
		routes, err := r.UnicastRoutes(afi)
		if err != nil {
			return nil, err
		}
		for p, u := range routes {
			out[p] = p + " | " + u.Communities + " | " + strings.Join(u.NextHops, " ")
		}
	}
	return out, nil
}

// exabgpDecoded is ExaBGP's text of every route it holds from peer.
func exabgpDecoded(s *exabgptest.Speaker, peer string) (map[string]string, error) {
	r, err := s.Received(peer)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for key, f := range r.Flows {
		var ext []string
		for _, e := range f.ExtCommunities {
			if e.String == "" {
				ext = append(ext, fmt.Sprintf("0x%016x", e.Value))
			} else {
				ext = append(ext, e.String)
			}
		}
		names := make([]string, 0, len(f.Attributes))
		for k := range f.Attributes {
			if strings.HasPrefix(k, "attribute-") {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		for _, k := range names {
			var v string
			if err := jsonString(f.Attributes[k], &v); err != nil {
				v = string(f.Attributes[k])
			}
			ext = append(ext, k+" "+v)
		}
		out[key] = key + " | " + strings.Join(ext, ", ")
	}
	for p, u := range r.Unicast {
		var cs []string
		for _, c := range u.Communities {
			cs = append(cs, fmt.Sprintf("%d:%d", c[0], c[1]))
		}
		out[p] = p + " | " + strings.Join(cs, " ") + " | " + u.NextHop
	}
	return out, nil
}

func jsonString(raw []byte, v *string) error { return json.Unmarshal(raw, v) }

func execOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// TestBirdSameSession: the matrix's reset check tells BIRD's since-time
// jitter (seen in a make test run) from a session that came up again.
func TestBirdSameSession(t *testing.T) {
	up := "up0 BGP --- up 2026-11-26 06:20:46.802 Established"
	for _, c := range []struct {
		line string
		same bool
	}{
		{"up0 BGP --- up 2026-11-26 06:20:46.801 Established", true},
		{"up0 BGP --- up 2026-11-26 06:20:46.803 Established", true},
		{"up0 BGP --- up 2026-11-26 06:20:52.100 Established", false},
		{"up0 BGP --- start 2026-11-26 06:20:46.802 Active Socket: Connection refused", false},
		{"up0 BGP --- up", false},
	} {
		if got := birdSameSession(up, c.line); got != c.same {
			t.Errorf("%q then %q: same session %v, want %v", up, c.line, got, c.same)
		}
	}
}
