package flowspec

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Parse parses the gobgp CLI form "match ... then ..." (see SYNTAX.md).
// The family is that of the prefixes in the match; without prefixes it is
// IPv6 if the rule has a label component, else IPv4. A leading family word
// ("ipv6-flowspec match ...") sets it explicitly. Errors are *SyntaxError.
func Parse(s string) (Rule, error) { return parseRule(0, s) }

// ParseIn parses like Parse but in the given family; a prefix of the other
// family is an error.
func ParseIn(f Family, s string) (Rule, error) {
	if !f.IsValid() {
		return Rule{}, &SyntaxError{Input: s, Msg: "invalid family"}
	}
	return parseRule(f, s)
}

// ParseMatch parses only the match part ("destination 192.0.2.1
// protocol tcp", optionally starting with "match") in family f, or in the
// inferred family when f is 0.
func ParseMatch(f Family, s string) (Match, error) {
	p := &parser{in: s, toks: tokenize(s)}
	var m Match
	var err error
	if f.IsRoute() || (f == 0 && p.startsRoute()) {
		m, err = p.routeMatch(f)
	} else {
		m, err = p.match(f)
	}
	if err != nil {
		return Match{}, err
	}
	if p.i < len(p.toks) {
		return Match{}, p.errAt(p.toks[p.i], "unexpected word after the match components")
	}
	return m, nil
}

// ParseAction parses only the action part ("discard", "then rate-limit
// 1000 mark 10").
func ParseAction(s string) (Action, error) {
	p := &parser{in: s, toks: tokenize(s)}
	if p.i < len(p.toks) && p.toks[p.i].s == "then" {
		p.i++
	}
	if p.i < len(p.toks) && isRouteActionWord(p.toks[p.i].s) {
		return p.routeAction()
	}
	return p.action()
}

type parser struct {
	in   string
	toks []token
	i    int
}

func (p *parser) errAt(t token, format string, args ...any) error {
	return &SyntaxError{Input: p.in, Offset: t.off, Word: t.s, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) errEnd(format string, args ...any) error {
	return &SyntaxError{Input: p.in, Offset: len(p.in), Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) peek() (token, bool) {
	if p.i < len(p.toks) {
		return p.toks[p.i], true
	}
	return token{}, false
}

const componentList = "destination, source, protocol, port, destination-port, source-port, icmp-type, icmp-code, tcp-flags, packet-length, dscp, fragment, label"

const actionList = "accept, discard, rate-limit, rate-limit-packets, action, redirect, mark, redirect-ip, ext, ext6"

// componentNames maps the lower-case names of the component types (and
// their aliases) to them.
var componentNames = func() map[string]ComponentType {
	m := map[string]ComponentType{
		"next-header":        Protocol,
		"flow-label":         FlowLabel,
		"destination-prefix": DestinationPrefix,
		"source-prefix":      SourcePrefix,
	}
	for t := DestinationPrefix; t <= FlowLabel; t++ {
		m[strings.ToLower(t.name())] = t
	}
	return m
}()

// componentByName returns the component type named s (any case), 0 if
// none. A parse asks it of every word of a value list (stop), so a word
// that cannot be a name (a value starts with a digit, an operator or a
// bracket) is answered without a lookup.
func componentByName(s string) ComponentType {
	if s == "" || !('a' <= s[0] && s[0] <= 'z' || 'A' <= s[0] && s[0] <= 'Z') {
		return 0
	}
	return componentNames[strings.ToLower(s)]
}

// stop reports whether t ends a value list.
func stop(t token) bool { return t.s == "then" || componentByName(t.s) != 0 }

func parseRule(f Family, s string) (Rule, error) {
	p := &parser{in: s, toks: tokenize(s)}
	if f.IsRoute() || (f == 0 && p.startsRoute()) {
		return p.route(f)
	}
	m, err := p.match(f)
	if err != nil {
		return Rule{}, err
	}
	t, ok := p.peek()
	if !ok {
		return Rule{}, p.errEnd("expected \"then\" and an action (%s)", actionList)
	}
	if t.s != "then" {
		return Rule{}, p.errAt(t, "expected \"then\" and an action")
	}
	p.i++
	a, err := p.action()
	if err != nil {
		return Rule{}, err
	}
	return Rule{Match: m, Action: a}, nil
}

// pcomp is a parsed component before the family is known.
type pcomp struct {
	t      ComponentType
	kw     token
	enc    []byte // numeric/bitmask: type byte and items
	pfx    netip.Prefix
	off    int
	pfxTok token
	dfTok  *token // fragment item that sets dont-fragment
}

func (p *parser) match(f Family) (Match, error) {
	if t, ok := p.peek(); ok {
		if ff, ok := familyNamed(t.s); ok {
			if f != 0 && ff != f {
				return Match{}, p.errAt(t, "rule text says %s but %s was requested", ff, f)
			}
			f = ff
			p.i++
		}
	}
	if t, ok := p.peek(); ok && t.s == "match" {
		p.i++
	}
	comps := make([]pcomp, 0, 8) // no rule has more than 13
	for {
		t, ok := p.peek()
		if !ok || t.s == "then" {
			break
		}
		ct := componentByName(t.s)
		if ct == 0 {
			return Match{}, p.errAt(t, "unknown match component; expected one of %s", componentList)
		}
		p.i++
		c := pcomp{t: ct, kw: t}
		var err error
		switch specOf(ct).kind {
		case kindPrefix:
			err = p.prefix(&c)
		case kindNumeric:
			err = p.numeric(&c)
		case kindBitmask:
			err = p.bitmask(&c)
		}
		if err != nil {
			return Match{}, err
		}
		comps = append(comps, c)
	}
	if len(comps) == 0 {
		if t, ok := p.peek(); ok {
			return Match{}, p.errAt(t, "expected at least one match component (%s)", componentList)
		}
		return Match{}, p.errEnd("expected at least one match component (%s)", componentList)
	}

	// Family: explicit, else from the first prefix, else from label.
	if f == 0 {
		for _, c := range comps {
			if c.pfx.IsValid() {
				f = IPv4
				if c.pfx.Addr().Is6() {
					f = IPv6
				}
				break
			}
		}
	}
	if f == 0 {
		f = IPv4
		for _, c := range comps {
			if c.t == FlowLabel {
				f = IPv6
			}
		}
	}
	for i := range comps {
		c := &comps[i]
		switch {
		case c.pfx.IsValid() && c.pfx.Addr().Is4() != (f == IPv4):
			return Match{}, p.errAt(c.pfxTok, "prefix is not of the rule's family %s", f)
		case c.pfx.IsValid() && c.off != 0 && f == IPv4:
			return Match{}, p.errAt(c.pfxTok, "prefix offsets exist only in ipv6-flowspec")
		case c.t > f.maxType():
			return Match{}, p.errAt(c.kw, "%s is only defined for ipv6-flowspec", c.t)
		case c.dfTok != nil && f == IPv6:
			return Match{}, p.errAt(*c.dfTok, "dont-fragment is not defined for ipv6-flowspec (RFC 8956)")
		}
		if c.pfx.IsValid() {
			c.enc = appendPrefix([]byte{byte(c.t)}, f, c.pfx, c.off)
		}
	}
	slices.SortStableFunc(comps, func(a, b pcomp) int { return cmp.Compare(a.t, b.t) })
	n := 0
	for _, c := range comps {
		n += len(c.enc)
	}
	body := make([]byte, 0, n)
	for i, c := range comps {
		if i > 0 && comps[i-1].t == c.t {
			later := c.kw
			if comps[i-1].kw.off > later.off {
				later = comps[i-1].kw
			}
			return Match{}, p.errAt(later, "duplicate component; write all items in one list, e.g. %s '==80 ==443'", c.t)
		}
		body = append(body, c.enc...)
	}
	if len(body) > MaxNLRILen {
		return Match{}, p.errAt(comps[0].kw, "rule encodes to %d bytes; the maximum is %d", len(body), MaxNLRILen)
	}
	if canon, err := scan(f, body, 0); err != nil || !canon {
		// Unreachable unless parser and decoder disagree.
		return Match{}, p.errAt(comps[0].kw, "internal error: the encoding is not canonical (%v); please report this rule", err)
	}
	return matchOf(f, body), nil
}

// appendPrefix encodes a masked prefix whose bits before off are zero.
func appendPrefix(b []byte, f Family, pfx netip.Prefix, off int) []byte {
	bits := pfx.Bits()
	if f == IPv4 {
		a := pfx.Addr().As4()
		b = append(b, byte(bits))
		return append(b, a[:(bits+7)/8]...)
	}
	a := pfx.Addr().As16()
	b = append(b, byte(bits), byte(off))
	n := bits - off
	pat := make([]byte, (n+7)/8)
	for i := 0; i < n; i++ {
		j := off + i
		if a[j/8]&(0x80>>(j%8)) != 0 {
			pat[i/8] |= 0x80 >> (i % 8)
		}
	}
	return append(b, pat...)
}

func (p *parser) prefix(c *pcomp) error {
	t, ok := p.peek()
	if !ok || stop(t) {
		return p.valueMissing(c.kw, "a prefix such as 192.0.2.0/24 or 2001:db8::/32")
	}
	p.i++
	c.pfxTok = t
	var pfx netip.Prefix
	if strings.Contains(t.s, "/") {
		var err error
		if pfx, err = netip.ParsePrefix(t.s); err != nil {
			return p.errAt(t, "not a prefix (expected e.g. 192.0.2.0/24 or 2001:db8::/32)")
		}
	} else {
		a, err := netip.ParseAddr(t.s)
		if err != nil || a.Zone() != "" {
			return p.errAt(t, "not an address or prefix (expected e.g. 192.0.2.0/24 or 2001:db8::/32)")
		}
		pfx = netip.PrefixFrom(a, a.BitLen())
	}
	if m := pfx.Masked(); m != pfx {
		return p.errAt(t, "bits set after the prefix length; did you mean %s?", m)
	}
	// Optional IPv6 offset: "offset N" or the gobgp form, a bare number.
	if nt, ok := p.peek(); ok {
		numTok := token{}
		if nt.s == "offset" {
			p.i++
			if nt2, ok := p.peek(); ok {
				numTok = nt2
			} else {
				return p.errEnd("expected the prefix offset in bits after \"offset\"")
			}
		} else if nt.s != "" && nt.s[0] >= '0' && nt.s[0] <= '9' {
			numTok = nt
		}
		if numTok.s != "" {
			p.i++
			off, err := strconv.ParseUint(numTok.s, 10, 8)
			if err != nil {
				return p.errAt(numTok, "prefix offset must be a number of bits 0..%d", pfx.Bits())
			}
			if pfx.Addr().Is4() {
				return p.errAt(numTok, "prefix offsets exist only in ipv6-flowspec")
			}
			if int(off) > pfx.Bits() {
				return p.errAt(numTok, "prefix offset %d exceeds the prefix length %d", off, pfx.Bits())
			}
			if int(off) == pfx.Bits() && off != 0 {
				return p.errAt(numTok, "prefix offset %d equals the prefix length: the pattern would be empty, which RFC 8956 §3.1 makes malformed; use an offset below %d, or leave the component out to match every address", off, pfx.Bits())
			}
			c.off = int(off)
			if c.off > 0 {
				enc := appendPrefix(nil, IPv6, pfx, c.off)
				got, _ := prefixOf(IPv6, "\x01"+string(enc))
				if got != pfx {
					return p.errAt(t, "the bits before offset %d are not sent on the wire; write them as zero: %s", c.off, got)
				}
			}
		}
	}
	c.pfx = pfx
	return nil
}

func (p *parser) valueMissing(kw token, what string) error {
	if t, ok := p.peek(); ok {
		return p.errAt(t, "%s needs %s", kw.s, what)
	}
	return p.errEnd("%s needs %s", kw.s, what)
}

// items parses the item list of a numeric or bitmask component; item
// parses one operator+value piece and returns the operator and value.
func (p *parser) items(c *pcomp, what string, item func(piece token) (byte, uint32, error)) error {
	c.enc = append(c.enc, byte(c.t))
	last := -1
	for {
		t, ok := p.peek()
		if !ok || stop(t) {
			break
		}
		p.i++
		for pos := 0; pos < len(t.s); {
			and := false
			if t.s[pos] == '&' {
				and = true
				pos++
			}
			end := strings.IndexByte(t.s[pos:], '&')
			if end < 0 {
				end = len(t.s)
			} else {
				end += pos
			}
			piece := token{t.s[pos:end], t.off + pos}
			if piece.s == "" {
				return p.errAt(t, "empty item around '&'; expected %s", what)
			}
			if and && last < 0 {
				return p.errAt(piece, "the first item of %s cannot be ANDed ('&' joins an item to the previous one)", c.t)
			}
			op, v, err := item(piece)
			if err != nil {
				return err
			}
			if and {
				op |= OpAnd
			}
			last = len(c.enc)
			c.enc = appendItem(c.enc, c.t, op, v)
			pos = end
		}
	}
	if last < 0 {
		return p.valueMissing(c.kw, what)
	}
	c.enc[last] |= OpEnd
	return nil
}

func (p *parser) numeric(c *pcomp) error {
	sp := specOf(c.t)
	what := "items such as ==80, >=1024&<=2048, !=0, true or false"
	if c.t == Protocol {
		what = "items such as tcp, ==17, !=6"
	}
	return p.items(c, what, func(piece token) (byte, uint32, error) {
		s := piece.s
		switch s {
		case "true": // RFC 8955 Table 1: lt|gt|eq = 111
			return OpTrue, 0, nil
		case "false": // lt|gt|eq = 000
			return OpFalse, 0, nil
		}
		var op byte
		switch {
		case strings.HasPrefix(s, "=="):
			op, s = OpEQ, s[2:]
		case strings.HasPrefix(s, "!="):
			op, s = OpLT|OpGT, s[2:]
		case strings.HasPrefix(s, ">="):
			op, s = OpGT|OpEQ, s[2:]
		case strings.HasPrefix(s, "<="):
			op, s = OpLT|OpEQ, s[2:]
		case strings.HasPrefix(s, "="):
			op, s = OpEQ, s[1:]
		case strings.HasPrefix(s, "!"):
			op, s = OpLT|OpGT, s[1:]
		case strings.HasPrefix(s, ">"):
			op, s = OpGT, s[1:]
		case strings.HasPrefix(s, "<"):
			op, s = OpLT, s[1:]
		default:
			op = OpEQ
		}
		valTok := token{s, piece.off + len(piece.s) - len(s)}
		if s == "" {
			return 0, 0, p.errAt(piece, "operator without a value; expected %s", what)
		}
		var v uint64
		var err error
		if c.t == Protocol {
			if pv, ok := protocolNumber(s); ok {
				return op, pv, nil
			}
		}
		v, err = parseUint(s)
		if err != nil {
			if c.t == Protocol {
				return 0, 0, p.errAt(valTok, "not a protocol; expected a number 0..255 or one of %s", protocolNames)
			}
			return 0, 0, p.errAt(valTok, "not a number; expected %s", what)
		}
		if v > uint64(sp.maxVal) {
			return 0, 0, p.errAt(valTok, "%s value out of range 0..%d", c.t, sp.maxVal)
		}
		return op, uint32(v), nil
	})
}

func parseUint(s string) (uint64, error) {
	if len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X") {
		return strconv.ParseUint(s[2:], 16, 32)
	}
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseUint(s, 10, 32)
}

const protocolNames = "icmp, igmp, ipip, tcp, egp, igp, udp, rsvp, gre, esp, ah, ipv6-icmp, ospf, pim, sctp"

// protocolName is the name canonical text gives protocol v ("" for a
// number without one): the first name protocolNumber reads as v.
func protocolName(v uint32) string {
	switch v {
	case 1:
		return "icmp"
	case 2:
		return "igmp"
	case 4:
		return "ipip"
	case 6:
		return "tcp"
	case 8:
		return "egp"
	case 9:
		return "igp"
	case 17:
		return "udp"
	case 46:
		return "rsvp"
	case 47:
		return "gre"
	case 50:
		return "esp"
	case 51:
		return "ah"
	case 58:
		return "ipv6-icmp"
	case 89:
		return "ospf"
	case 103:
		return "pim"
	case 132:
		return "sctp"
	}
	return ""
}

func protocolNumber(s string) (uint32, bool) {
	switch strings.ToLower(s) {
	case "icmp":
		return 1, true
	case "igmp":
		return 2, true
	case "ipip":
		return 4, true
	case "tcp":
		return 6, true
	case "egp":
		return 8, true
	case "igp":
		return 9, true
	case "udp":
		return 17, true
	case "rsvp":
		return 46, true
	case "gre":
		return 47, true
	case "esp":
		return 50, true
	case "ah":
		return 51, true
	case "ipv6-icmp", "icmpv6", "icmp6":
		return 58, true
	case "ospf":
		return 89, true
	case "pim":
		return 103, true
	case "sctp":
		return 132, true
	}
	return 0, false
}

func (p *parser) bitmask(c *pcomp) error {
	what := "flags such as S, =SA, !=R or a number such as 0x12"
	if c.t == Fragment {
		what = "fragment bits such as is-fragment, =first-fragment, !dont-fragment or is-fragment+last-fragment"
	}
	return p.items(c, what, func(piece token) (byte, uint32, error) {
		s := piece.s
		var op byte
		switch {
		case strings.HasPrefix(s, "!="), strings.HasPrefix(s, "=!"):
			op, s = OpNot|OpMatch, s[2:]
		case strings.HasPrefix(s, "=="):
			op, s = OpMatch, s[2:]
		case strings.HasPrefix(s, "="):
			op, s = OpMatch, s[1:]
		case strings.HasPrefix(s, "!"):
			op, s = OpNot, s[1:]
		}
		valTok := token{s, piece.off + len(piece.s) - len(s)}
		if s == "" {
			return 0, 0, p.errAt(piece, "operator without a value; expected %s", what)
		}
		if s[0] >= '0' && s[0] <= '9' {
			v, err := parseUint(s)
			max := specOf(c.t).maxVal
			if err != nil || v > uint64(max) {
				if c.t == TCPFlags && err == nil && v <= 0xffff {
					return 0, 0, p.errAt(valTok, "tcp-flags value must be 0..0xfff: the top 4 bits of the 2-octet form are the TCP data offset, which RFC 8955 §4.2.2.9 always treats as 0")
				}
				return 0, 0, p.errAt(valTok, "%s value must be 0..0x%x", c.t, max)
			}
			if c.t == Fragment && v&FragDontFragment != 0 {
				c.dfTok = &valTok
			}
			return op, uint32(v), nil
		}
		var v uint32
		if c.t == TCPFlags {
			for i := 0; i < len(s); i++ {
				k := strings.IndexByte(tcpFlagLetters, s[i]&^0x20)
				if k < 0 {
					return 0, 0, p.errAt(valTok, "unknown TCP flag %q; expected letters of F S R P A U E C (FIN SYN RST PSH ACK URG ECE CWR) or a number", s[i])
				}
				v |= 1 << k
			}
			return op, v, nil
		}
		for name := range strings.SplitSeq(s, "+") {
			k := slices.Index(fragmentNames[:], strings.ToLower(name))
			if k < 0 {
				hint := ""
				if strings.EqualFold(name, "not-a-fragment") {
					hint = " (for unfragmented packets write !is-fragment)"
				}
				return 0, 0, p.errAt(valTok, "unknown fragment bit %q%s; expected %s joined by +", name, hint, strings.Join(fragmentNames[:], ", "))
			}
			v |= 1 << k
		}
		if v&FragDontFragment != 0 {
			c.dfTok = &valTok
		}
		return op, v, nil
	})
}

func (p *parser) action() (Action, error) {
	var ext, ext6 []byte
	var first Action // the only action word's, until a second one
	seen := 0
	n := 0
	claim := func(t token, slot int, what string) error {
		if seen&slot != 0 {
			return p.errAt(t, "a rule carries only one %s action", what)
		}
		seen |= slot
		return nil
	}
	for {
		t, ok := p.peek()
		if !ok {
			break
		}
		p.i++
		n++
		var a Action
		var err error
		switch t.s {
		case "accept":
			err = claim(t, slotTrafficAction, "traffic-action (accept/action)")
			a = Accept()
		case "discard":
			err = claim(t, slotRate, "traffic-rate (discard/rate-limit)")
			a = Discard()
		case "rate-limit", "rate-limit-packets":
			if t.s == "rate-limit" {
				err = claim(t, slotRate, "traffic-rate (discard/rate-limit)")
			} else {
				err = claim(t, slotRatePackets, "rate-limit-packets")
			}
			if err == nil {
				a, err = p.rate(t)
			}
		case "action":
			err = claim(t, slotTrafficAction, "traffic-action (accept/action)")
			if err == nil {
				a, err = p.trafficAction(t)
			}
		case "redirect":
			err = claim(t, slotRedirect, "redirect")
			if err == nil {
				a, err = p.redirect(t)
			}
		case "mark":
			err = claim(t, slotMark, "mark")
			if err == nil {
				a, err = p.mark(t)
			}
		case "redirect-ip":
			a, err = p.redirectIP(t)
			if err == nil {
				slot := slotRedirectIP
				if a.d().ext6 != "" {
					slot = slotRedirectIP6
				}
				err = claim(t, slot, "redirect-ip per address family")
			}
		case "ext", "ext6":
			a, err = p.raw(t)
		default:
			if isRouteActionWord(t.s) {
				return Action{}, p.errAt(t, "%s is a route action (route PREFIX then %s); a FlowSpec rule takes %s", t.s, routeActionList, actionList)
			}
			return Action{}, p.errAt(t, "unknown action; expected one of %s", actionList)
		}
		if err != nil {
			return Action{}, err
		}
		if n == 1 {
			first = a
			continue
		}
		if n == 2 {
			ext = append(ext, first.d().ext...)
			ext6 = append(ext6, first.d().ext6...)
		}
		ext = append(ext, a.d().ext...)
		ext6 = append(ext6, a.d().ext6...)
	}
	switch d := first.d(); {
	case n == 0:
		return Action{}, p.errEnd("expected an action (%s)", actionList)
	case n == 1 && (len(d.ext) == 8 && d.ext6 == "" || d.ext == "" && len(d.ext6) == 20):
		return first, nil // one community: canonical as built
	case n == 1:
		ext, ext6 = []byte(d.ext), []byte(d.ext6)
	}
	return mkAction(actionData{ext: canonicalSet(ext, 8), ext6: canonicalSet(ext6, 20)}), nil
}

func (p *parser) arg(kw token, what string) (token, error) {
	t, ok := p.peek()
	if !ok {
		return token{}, p.errEnd("%s needs %s", kw.s, what)
	}
	p.i++
	return t, nil
}

func (p *parser) rate(kw token) (Action, error) {
	t, err := p.arg(kw, "a rate")
	if err != nil {
		return Action{}, err
	}
	unit := "bytes"
	typ := ExtTrafficRateBytes
	if kw.s == "rate-limit-packets" {
		unit, typ = "packets", ExtTrafficRatePackets
	}
	r, err := strconv.ParseFloat(t.s, 32)
	if err != nil || !validRate(float32(r)) {
		return Action{}, p.errAt(t, "%s needs a rate in %s per second: a non-negative number such as 125000 or 1.5e6", kw.s, unit)
	}
	var id uint16
	if nt, ok := p.peek(); ok && nt.s == "as" {
		p.i++
		at, err := p.arg(nt, "an AS number 0..65535")
		if err != nil {
			return Action{}, err
		}
		v, err := strconv.ParseUint(at.s, 10, 16)
		if err != nil {
			return Action{}, p.errAt(at, "the informational AS of a rate must be 0..65535")
		}
		id = uint16(v)
	}
	return rateAction(typ, id, float32(r)), nil
}

func (p *parser) trafficAction(kw token) (Action, error) {
	t, err := p.arg(kw, "sample, terminal or sample-terminal")
	if err != nil {
		return Action{}, err
	}
	switch t.s {
	case "sample":
		return TrafficAction(true, false), nil
	case "terminal":
		return TrafficAction(false, true), nil
	case "sample-terminal", "terminal-sample":
		return TrafficAction(true, true), nil
	}
	return Action{}, p.errAt(t, "unknown traffic action; expected sample, terminal or sample-terminal")
}

func (p *parser) mark(kw token) (Action, error) {
	t, err := p.arg(kw, "a DSCP value 0..63")
	if err != nil {
		return Action{}, err
	}
	v, err := parseUint(t.s)
	if err != nil || v > 63 {
		return Action{}, p.errAt(t, "mark needs a DSCP value 0..63")
	}
	return Mark(uint8(v)), nil
}

func (p *parser) redirectIP(kw token) (Action, error) {
	t, err := p.arg(kw, "an IPv4 or IPv6 address")
	if err != nil {
		return Action{}, err
	}
	a, err := netip.ParseAddr(t.s)
	if err != nil || a.Zone() != "" {
		return Action{}, p.errAt(t, "redirect-ip needs an IPv4 or IPv6 address")
	}
	return RedirectIP(a), nil
}

func (p *parser) redirect(kw token) (Action, error) {
	const form = "a route target AS:N (AS2:4 or AS4:2), A.B.C.D:N or ASH.ASL:N"
	t, err := p.arg(kw, form)
	if err != nil {
		return Action{}, err
	}
	i := strings.LastIndexByte(t.s, ':')
	if i < 0 {
		return Action{}, p.errAt(t, "redirect needs %s", form)
	}
	left, right := t.s[:i], t.s[i+1:]
	val, err := strconv.ParseUint(right, 10, 32)
	if err != nil {
		return Action{}, p.errAt(t, "redirect needs %s", form)
	}
	switch strings.Count(left, ".") {
	case 3:
		a, err := netip.ParseAddr(left)
		if err != nil || !a.Is4() || val > 0xffff {
			return Action{}, p.errAt(t, "IPv4 route target needs A.B.C.D:N with N 0..65535")
		}
		return RedirectIPv4RT(a, uint16(val)), nil
	case 1:
		d := strings.IndexByte(left, '.')
		hi, err1 := strconv.ParseUint(left[:d], 10, 16)
		lo, err2 := strconv.ParseUint(left[d+1:], 10, 16)
		if err1 != nil || err2 != nil || val > 0xffff {
			return Action{}, p.errAt(t, "asdot route target needs ASH.ASL:N with each part 0..65535")
		}
		return RedirectAS4(uint32(hi<<16|lo), uint16(val)), nil
	case 0:
		if strings.Contains(left, ":") {
			return Action{}, p.errAt(t, "IPv6 route targets are not supported; use %s", form)
		}
		as, err := strconv.ParseUint(left, 10, 32)
		if err != nil {
			return Action{}, p.errAt(t, "redirect needs %s", form)
		}
		if as <= 0xffff {
			return RedirectAS2(uint16(as), uint32(val)), nil
		}
		if val > 0xffff {
			return Action{}, p.errAt(t, "a 4-byte AS route target carries N 0..65535")
		}
		return RedirectAS4(uint32(as), uint16(val)), nil
	}
	return Action{}, p.errAt(t, "redirect needs %s", form)
}

func (p *parser) raw(kw token) (Action, error) {
	size := 8
	if kw.s == "ext6" {
		size = 20
	}
	what := fmt.Sprintf("a %d-byte community in hex, 0x followed by %d digits", size, 2*size)
	t, err := p.arg(kw, what)
	if err != nil {
		return Action{}, err
	}
	s := t.s
	if !strings.HasPrefix(s, "0x") || len(s) != 2+2*size {
		return Action{}, p.errAt(t, "%s needs %s", kw.s, what)
	}
	b, err := hex.DecodeString(s[2:])
	if err != nil {
		return Action{}, p.errAt(t, "%s needs %s", kw.s, what)
	}
	if size == 20 {
		return mkAction(actionData{ext6: string(b)}), nil
	}
	return mkAction(actionData{ext: string(b)}), nil
}
