package flowspec

import (
	"net/netip"
	"strings"
)

const routeActionList = "blackhole, community AS:N, next-hop ADDR"

// isRouteActionWord reports whether s starts a route action.
func isRouteActionWord(s string) bool {
	return s == "blackhole" || s == "community" || s == "next-hop"
}

// route parses "route PREFIX then ACTIONS" (the word "route" optional when
// f is a route family). A bare address is a host route (/32 or /128).
func (p *parser) route(f Family) (Rule, error) {
	m, err := p.routeMatch(f)
	if err != nil {
		return Rule{}, err
	}
	t, ok := p.peek()
	if !ok {
		return Rule{}, p.errEnd("expected \"then\" and a route action (%s)", routeActionList)
	}
	if t.s != "then" {
		return Rule{}, p.errAt(t, "expected \"then\" and a route action (%s)", routeActionList)
	}
	p.i++
	a, err := p.routeAction()
	if err != nil {
		return Rule{}, err
	}
	if nh, ok := a.NextHop(); ok && RouteFamily(nh) != m.fam() {
		return Rule{}, &SyntaxError{Input: p.in, Offset: len(p.in), Msg: "next-hop " + nh.String() + " is not of the route's family " + m.fam().String()}
	}
	return Rule{Match: m, Action: a}, nil
}

func (p *parser) routeMatch(f Family) (Match, error) {
	if t, ok := p.peek(); ok && (t.s == "ipv4-unicast" || t.s == "ipv6-unicast") {
		ff, _ := ParseFamily(t.s)
		if f != 0 && ff != f {
			return Match{}, p.errAt(t, "rule text says %s but %s was requested", ff, f)
		}
		f = ff
		p.i++
	}
	if t, ok := p.peek(); ok && t.s == "route" {
		p.i++
	}
	t, ok := p.peek()
	if !ok {
		return Match{}, p.errEnd("route needs a prefix, e.g. 203.0.113.7/32")
	}
	p.i++
	var pfx netip.Prefix
	var err error
	if strings.Contains(t.s, "/") {
		pfx, err = netip.ParsePrefix(t.s)
	} else {
		var a netip.Addr
		a, err = netip.ParseAddr(t.s)
		if err == nil {
			pfx = netip.PrefixFrom(a, a.BitLen())
		}
	}
	if err != nil {
		return Match{}, p.errAt(t, "route needs a prefix such as 203.0.113.7/32 or 2001:db8::7/128")
	}
	m, err := RouteMatch(pfx)
	if err != nil {
		return Match{}, p.errAt(t, "%s", strings.TrimPrefix(err.Error(), "flowspec: "))
	}
	if f != 0 && m.fam() != f {
		return Match{}, p.errAt(t, "prefix %s is not %s", pfx, f)
	}
	return m, nil
}

// routeAction parses route actions up to the end of the input.
func (p *parser) routeAction() (Action, error) {
	var comm []byte
	var nh netip.Addr
	n := 0
	for {
		t, ok := p.peek()
		if !ok {
			break
		}
		p.i++
		n++
		switch t.s {
		case "blackhole":
			comm = append(comm, Blackhole().d().comm...)
		case "community":
			a, err := p.arg(t, "a community AS:N")
			if err != nil {
				return Action{}, err
			}
			c, err := ParseCommunity(a.s)
			if err != nil {
				return Action{}, p.errAt(a, "%s", err.Error())
			}
			comm = append(comm, Communities(c).d().comm...)
		case "next-hop":
			a, err := p.arg(t, "an IPv4 or IPv6 address")
			if err != nil {
				return Action{}, err
			}
			if nh.IsValid() {
				return Action{}, p.errAt(t, "a route has only one next-hop")
			}
			nh, err = netip.ParseAddr(a.s)
			if err != nil || nh.Zone() != "" {
				return Action{}, p.errAt(a, "next-hop needs an IPv4 or IPv6 address")
			}
		default:
			if strings.HasPrefix(actionList, t.s+",") || strings.Contains(actionList, " "+t.s+",") || strings.HasSuffix(actionList, " "+t.s) {
				return Action{}, p.errAt(t, "%s is a FlowSpec action; a route takes %s", t.s, routeActionList)
			}
			return Action{}, p.errAt(t, "unknown route action; expected one of %s", routeActionList)
		}
	}
	switch {
	case n == 0:
		return Action{}, p.errEnd("expected a route action (%s)", routeActionList)
	case n == 1 && !nh.IsValid() && string(comm) == blackhole.d().comm:
		return blackhole, nil // "then blackhole", the RTBH feed's every line
	}
	return mkAction(actionData{comm: canonicalSet(comm, 4)}).WithNextHop(nh), nil
}

// startsRoute reports whether the text at p is a route: it starts with
// "route" or a unicast family word.
func (p *parser) startsRoute() bool {
	t, ok := p.peek()
	return ok && (t.s == "route" || t.s == "ipv4-unicast" || t.s == "ipv6-unicast")
}
