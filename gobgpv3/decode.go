package gobgpv3

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	apipb "github.com/osrg/gobgp/v3/api"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/ribkeeper/ribkeeper/signals"
)

// The type URLs of the NLRI and attributes read here (GoBGP v3's
// attribute.proto, package apipb).
const (
	urlPrefix      = "type.googleapis.com/apipb.IPAddressPrefix"
	urlOrigin      = "type.googleapis.com/apipb.OriginAttribute"
	urlNextHop     = "type.googleapis.com/apipb.NextHopAttribute"
	urlMpReach     = "type.googleapis.com/apipb.MpReachNLRIAttribute"
	urlCommunities = "type.googleapis.com/apipb.CommunitiesAttribute"
	urlLarge       = "type.googleapis.com/apipb.LargeCommunitiesAttribute"
)

// decoded is what a path says: the prefix, and the attributes people may
// want to see.
type decoded struct {
	prefix      netip.Prefix
	origin      string
	nextHop     string
	communities []string
	others      []string // type names of the attributes not read
}

// detail is the text of a Signal's Detail, bounded.
func (d decoded) detail(method string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "GoBGP v3 %s", method)
	if d.origin != "" {
		fmt.Fprintf(&b, "; origin %s", d.origin)
	}
	if d.nextHop != "" {
		fmt.Fprintf(&b, "; next-hop %s", d.nextHop)
	}
	if len(d.communities) > 0 {
		fmt.Fprintf(&b, "; communities %s", strings.Join(d.communities, " "))
	}
	if len(d.others) > 0 {
		fmt.Fprintf(&b, "; other attributes %s", strings.Join(d.others, " "))
	}
	s := b.String()
	if len(s) > signals.MaxDetailBytes {
		s = s[:signals.MaxDetailBytes-len(" ...")] + " ..."
	}
	return s
}

// decodePath reads the prefix and attributes of p.
func decodePath(p *apipb.Path) (decoded, error) {
	var d decoded
	if p.GetNlri() == nil {
		return d, errors.New("path without nlri: set it to the attacked prefix as an IPAddressPrefix")
	}
	if url := p.GetNlri().GetTypeUrl(); url != urlPrefix {
		return d, fmt.Errorf("nlri is %s: ribkeeper takes a unicast prefix (apipb.IPAddressPrefix) only", typeName(url))
	}
	var nlri apipb.IPAddressPrefix
	if err := unmarshal(p.GetNlri(), &nlri); err != nil {
		return d, fmt.Errorf("nlri: %w", err)
	}
	prefix, err := toPrefix(&nlri)
	if err != nil {
		return d, err
	}
	d.prefix = prefix
	if f := p.GetFamily(); f != nil {
		want := apipb.Family_AFI_IP
		if prefix.Addr().Is6() {
			want = apipb.Family_AFI_IP6
		}
		if f.GetSafi() != apipb.Family_SAFI_UNICAST || f.GetAfi() != want {
			return d, fmt.Errorf("family %s/%s does not carry %s: use afi %s, safi SAFI_UNICAST", f.GetAfi(), f.GetSafi(), prefix, want)
		}
	}
	if n := len(p.GetPattrs()); n > MaxAttributes {
		return d, fmt.Errorf("%d path attributes, more than the %d a path may carry here", n, MaxAttributes)
	}
	for i, a := range p.GetPattrs() {
		if err := d.attribute(a); err != nil {
			return d, fmt.Errorf("attribute %d (%s): %w", i+1, typeName(a.GetTypeUrl()), err)
		}
	}
	return d, nil
}

// toPrefix checks an IPAddressPrefix.
func toPrefix(n *apipb.IPAddressPrefix) (netip.Prefix, error) {
	addr, err := netip.ParseAddr(n.GetPrefix())
	if err != nil || addr.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("nlri prefix %q is not an IP address (e.g. \"192.0.2.10\" with prefix_len 32)", n.GetPrefix())
	}
	if int(n.GetPrefixLen()) > addr.BitLen() {
		return netip.Prefix{}, fmt.Errorf("nlri prefix_len %d is longer than an %s address (%d bits)", n.GetPrefixLen(), family(addr), addr.BitLen())
	}
	p := netip.PrefixFrom(addr, int(n.GetPrefixLen()))
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("nlri %s has host bits set: send %s", p, p.Masked())
	}
	return p, nil
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// attribute reads one path attribute into d.
func (d *decoded) attribute(a *anypb.Any) error {
	switch a.GetTypeUrl() {
	case urlOrigin:
		var m apipb.OriginAttribute
		if err := unmarshal(a, &m); err != nil {
			return err
		}
		switch m.GetOrigin() {
		case 0:
			d.origin = "igp"
		case 1:
			d.origin = "egp"
		case 2:
			d.origin = "incomplete"
		default:
			return fmt.Errorf("origin %d is not 0 (IGP), 1 (EGP) or 2 (INCOMPLETE)", m.GetOrigin())
		}
	case urlNextHop:
		var m apipb.NextHopAttribute
		if err := unmarshal(a, &m); err != nil {
			return err
		}
		nh, err := netip.ParseAddr(m.GetNextHop())
		if err != nil {
			return fmt.Errorf("next_hop %q is not an IP address", m.GetNextHop())
		}
		d.nextHop = nh.String()
	case urlMpReach:
		var m apipb.MpReachNLRIAttribute
		if err := unmarshal(a, &m); err != nil {
			return err
		}
		for _, s := range m.GetNextHops() {
			nh, err := netip.ParseAddr(s)
			if err != nil {
				return fmt.Errorf("next_hops: %q is not an IP address", s)
			}
			if d.nextHop == "" {
				d.nextHop = nh.String()
			}
		}
	case urlCommunities:
		var m apipb.CommunitiesAttribute
		if err := unmarshal(a, &m); err != nil {
			return err
		}
		for _, c := range m.GetCommunities() {
			d.communities = append(d.communities, fmt.Sprintf("%d:%d", c>>16, c&0xffff))
		}
	case urlLarge:
		var m apipb.LargeCommunitiesAttribute
		if err := unmarshal(a, &m); err != nil {
			return err
		}
		for _, c := range m.GetCommunities() {
			d.communities = append(d.communities, fmt.Sprintf("%d:%d:%d", c.GetGlobalAdmin(), c.GetLocalData1(), c.GetLocalData2()))
		}
	default:
		name := typeName(a.GetTypeUrl())
		if !strings.HasPrefix(a.GetTypeUrl(), "type.googleapis.com/apipb.") || name == "?" {
			return fmt.Errorf("not a GoBGP v3 attribute (apipb.*Attribute)")
		}
		d.others = append(d.others, strings.TrimPrefix(name, "apipb."))
	}
	return nil
}

// unmarshal decodes a's value into m, which must be of a's type.
func unmarshal(a *anypb.Any, m proto.Message) error {
	if err := proto.Unmarshal(a.GetValue(), m); err != nil {
		return fmt.Errorf("malformed %s: %v", typeName(a.GetTypeUrl()), err)
	}
	return nil
}

// typeName is the message name of a type URL, as a client sent it but
// fit for an error text or a log line: a word of at most 64 letters,
// digits, '_' or '.', else "?".
func typeName(url string) string {
	name := url[strings.LastIndexByte(url, '/')+1:]
	if name == "" || len(name) > 64 {
		return "?"
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.') {
			return "?"
		}
	}
	return name
}
