package profile

import "github.com/ribkeeper/ribkeeper/flowspec"

// The built-in profiles. Every limit names its source; reasons are written
// to follow "not sent to ADDR: PROFILE ...".
//
// Redirect-to-IP comes in variants: ribkeeper sends the
// draft-ietf-idr-flowspec-redirect-ip extended communities (IPv4 0x010c,
// IPv6-address-specific 0x000c in attribute 25). The IETF IDR
// implementation report for that draft (wiki.ietf.org,
// group/idr/implementations/draft-ietf-idr-flowspec-redirect-ip) lists
// Cisco IOS-XR as implementing draft -00 only (the next hop taken from
// MP_REACH, no IPv4 extended community), Junos 18.4R1+ the IPv4 extended
// community but not the IPv6 one. Rates are bytes per second (0x8006) on
// every router; traffic-rate-packets (0x800c, RFC 8955 §7.3) is newer and
// held back where it is not known to be supported.
var builtin = []*Profile{generic, frr, bird, exabgp, junos, iosxr, eos}

var generic = &Profile{
	Name:  Generic,
	About: "permissive default: every rule GoBGP can send goes to the router",
}

// frr: FRR bgpd 8.4.4 (Debian 12), measured in e2e/RECEIVERS.md and kept
// by TestReceiverLimitations. FRR's parser (bgpd/bgp_flowspec_util.c)
// refuses "< and > at the same time" and items past BGP_PBR_MATCH_VAL_MAX
// (5, bgpd/bgp_pbr.h), and answers with NOTIFICATION 3/9: the whole
// session resets, every rule of it is lost. Where the item count bites
// depends on the patch release: 8.4.4-1.1~deb12u2 resets on 6 items,
// deb12u1 took 6 and reset on 7 (both measured); 5 is safe for both.
var frr = &Profile{
	Name:       "frr",
	About:      "FRR bgpd 8.4 (measured with 8.4.4)",
	NoNotEqual: "resets sessions on !=",
	NoTrue:     "resets sessions on the numeric operator true (111)",
	MaxItems:   5,
	ItemsWhy:   "resets sessions on more than 5 items in one component",
	NoActions: map[uint16]string{
		// Measured: taken, printed as "UNK:128, 12" / "UNK:0, 12": the
		// rule would be installed without its action. traffic-rate-packets
		// alike on IPv4 and IPv6 rules (e2e TestReceiverMatrix,
		// TestFRRProfileBothFamilies).
		flowspec.ExtTrafficRatePackets: "does not know traffic-rate-packets (0x800c)",
		flowspec.ExtRedirectIP6:        "does not decode the IPv6 redirect-to-IP community",
	},
}

// bird: BIRD 2.0.12, measured: decodes every rule of the receiver matrix
// (all components, operators and actions). BIRD installs no FlowSpec into
// a forwarding plane, so it has no rule cap of its own.
var bird = &Profile{
	Name:  "bird",
	About: "BIRD 2 (measured with 2.0.12): takes every rule",
}

// exabgp: ExaBGP 4.2.21, measured: a redirect to a 4-byte-AS route target
// (0x8208) makes it fail to decode the UPDATE (RecursionError while
// printing the community) and drop the session with NOTIFICATION 1/0.
var exabgp = &Profile{
	Name:  "exabgp",
	About: "ExaBGP 4.2 (measured with 4.2.21)",
	NoActions: map[uint16]string{
		flowspec.ExtRedirectAS4: "drops sessions on redirect to a 4-byte AS route target (0x8208)",
	},
}

// junos: Juniper Junos. Source: "Understanding Flow Routes", Junos 12.3
// (juniper.net, bgp-flow-routes): match conditions for all twelve IPv4
// components, actions accept/discard/rate-limit/community/routing-instance
// (redirect to VRF)/sample/next-term/mark; IETF implementation report for
// redirect-ip (above): the IPv4 extended community since 18.4R1, not the
// IPv6 one. Not found in a source, so not limited here: a rule cap (Junos
// installs flow routes as firewall filter terms; the TCAM bounds them per
// platform), traffic-rate-packets, operator limits.
var junos = &Profile{
	Name:  "junos",
	About: "Juniper Junos (flow routes; redirect-to-IP IPv4 since 18.4R1)",
	NoActions: map[uint16]string{
		flowspec.ExtRedirectIP6:        "does not implement the IPv6 redirect-to-IP community",
		flowspec.ExtTrafficRatePackets: "lists no traffic-rate-packets action (0x800c)",
	},
}

// iosxr: Cisco IOS-XR (ASR 9000). Sources: the figures from
// Cisco's ASR 9000 "Implementing BGP Flowspec" guide, at most 3,000
// FlowSpec rules and at most 5 multi-value ranges per rule; the same
// guide's table of supported tuples (types 1-12, "multi value range" for
// the numeric ones) and actions (traffic-rate 0x8006, traffic-action
// 0x8007, redirect VRF 0x8008, traffic-marking 0x8009, redirect IP next
// hop) — no traffic-rate-packets; IETF implementation report: redirect-ip
// draft -00 only, the IPv4 extended community (0x010c) and the IPv6 one
// not implemented.
var iosxr = &Profile{
	Name:          "iosxr",
	About:         "Cisco IOS-XR (ASR 9000): 3,000 rules, 5 multi-value ranges per rule",
	MaxMultiValue: 5,
	MultiValueWhy: "takes at most 5 multi-value ranges per rule",
	MaxRules:      3000,
	RulesWhy:      "applies at most 3,000 FlowSpec rules",
	NoActions: map[uint16]string{
		flowspec.ExtRedirectIP:         "implements redirect-to-IP as draft -00, not the 0x010c community",
		flowspec.ExtRedirectIP6:        "does not implement the IPv6 redirect-to-IP community",
		flowspec.ExtTrafficRatePackets: "lists no traffic-rate-packets action (0x800c)",
	},
}

// eos: Arista EOS. Source: Arista TOI "BGP Flowspec" (EOS 4.21.3F
// introduces support for BGP Flowspec as defined in RFC 5575 and RFC
// 7674): those RFCs' actions, i.e. traffic-rate in bytes, traffic-action,
// redirect to VRF (RFC 7674 adds the IPv4 and 4-byte AS route targets)
// and traffic-marking. Neither redirect-to-IP community nor
// traffic-rate-packets (RFC 8955) is in them. A rule cap was not found in
// a source (it depends on the platform's TCAM).
var eos = &Profile{
	Name:  "eos",
	About: "Arista EOS 4.21.3F+ (RFC 5575 and RFC 7674 actions)",
	NoActions: map[uint16]string{
		flowspec.ExtRedirectIP:         "supports RFC 5575/7674 actions only, not redirect-to-IP",
		flowspec.ExtRedirectIP6:        "supports RFC 5575/7674 actions only, not redirect-to-IP",
		flowspec.ExtTrafficRatePackets: "supports RFC 5575/7674 actions only, not traffic-rate-packets",
	},
}
