package flowspec

import (
	"encoding/hex"
	"math"
	"net/netip"
	"strconv"
	"strings"
)

// The text syntax follows the gobgp CLI ("match ... then ..."); SYNTAX.md
// documents it. String methods produce the canonical text, which Parse
// reads back to the same value.

// String returns the canonical text of the match components, e.g.
// "destination 203.0.113.7/32 protocol ==17 source-port ==53".
func (m Match) String() string {
	if !m.IsValid() {
		return "invalid"
	}
	return string(m.AppendText(nil))
}

// AppendText appends the canonical text of the components to b.
func (m Match) AppendText(b []byte) []byte {
	if m.fam().IsRoute() {
		return m.routePrefix().AppendTo(b)
	}
	first := true
	for c := range m.All() {
		if !first {
			b = append(b, ' ')
		}
		first = false
		b = c.appendText(b)
	}
	return b
}

// String returns the component's canonical text, e.g. "destination-port ==80".
func (c Component) String() string { return string(c.appendText(nil)) }

func (c Component) appendText(b []byte) []byte {
	t := c.Type()
	sp := specOf(t)
	b = append(b, t.name()...)
	b = append(b, ' ')
	if sp.kind == kindPrefix {
		p, off := prefixOf(c.fam, c.b)
		b = p.AppendTo(b)
		if off != 0 {
			b = append(b, " offset "...)
			b = strconv.AppendInt(b, int64(off), 10)
		}
		return b
	}
	for pos := 1; pos < len(c.b); {
		op, v, n := readItem(c.b, pos)
		if pos > 1 {
			if op&OpAnd != 0 {
				b = append(b, '&')
			} else {
				b = append(b, ' ')
			}
		}
		pos += n
		if sp.kind == kindNumeric {
			switch op & numCmpMask { // RFC 8955 Table 1
			case OpTrue:
				b = append(b, "true"...)
				continue
			case OpFalse:
				b = append(b, "false"...)
				continue
			case OpEQ:
				b = append(b, "=="...)
			case OpGT:
				b = append(b, '>')
			case OpGT | OpEQ:
				b = append(b, ">="...)
			case OpLT:
				b = append(b, '<')
			case OpLT | OpEQ:
				b = append(b, "<="...)
			case OpLT | OpGT:
				b = append(b, "!="...)
			}
			if name := protocolName(v); t == Protocol && name != "" && (op&numCmpMask == OpEQ || op&numCmpMask == OpLT|OpGT) {
				// ==udp, not ==17: what the operator typed reads back.
				b = append(b, name...)
				continue
			}
			b = strconv.AppendUint(b, uint64(v), 10)
			continue
		}
		if op&OpNot != 0 {
			b = append(b, '!')
		}
		if op&OpMatch != 0 {
			b = append(b, '=')
		}
		if t == TCPFlags {
			b = appendTCPFlags(b, v)
		} else {
			b = appendFragment(b, v)
		}
	}
	return b
}

const tcpFlagLetters = "FSRPAUEC" // bit 0x01 .. 0x80

func appendTCPFlags(b []byte, v uint32) []byte {
	if v == 0 || v > 0xff {
		b = append(b, "0x"...)
		return strconv.AppendUint(b, uint64(v), 16)
	}
	for i := 0; i < 8; i++ {
		if v&(1<<i) != 0 {
			b = append(b, tcpFlagLetters[i])
		}
	}
	return b
}

var fragmentNames = [4]string{"dont-fragment", "is-fragment", "first-fragment", "last-fragment"}

func appendFragment(b []byte, v uint32) []byte {
	if v == 0 {
		return append(b, '0')
	}
	first := true
	for i := 0; i < 4; i++ {
		if v&(1<<i) != 0 {
			if !first {
				b = append(b, '+')
			}
			first = false
			b = append(b, fragmentNames[i]...)
		}
	}
	return b
}

// String returns the canonical text "match ... then ...". The family is
// written in front ("ipv6-flowspec match ...") only when the text would
// not otherwise imply it.
func (r Rule) String() string {
	if !r.Match.IsValid() {
		return "invalid"
	}
	// Room for a usual rule's text, where it costs no allocation: the
	// string is the one allocation (a batch's store writes one a rule).
	b := make([]byte, 0, 128)
	if r.Match.fam().IsRoute() {
		b = append(b, "route "...)
		b = r.Match.AppendText(b)
		b = append(b, " then "...)
		return string(r.Action.appendText(b))
	}
	if r.Match.fam() == IPv6 && !r.Match.impliesIPv6() {
		b = append(b, "ipv6-flowspec "...)
	}
	b = append(b, "match "...)
	b = r.Match.AppendText(b)
	b = append(b, " then "...)
	b = r.Action.appendText(b)
	return string(b)
}

func (m Match) impliesIPv6() bool {
	for c := range m.All() {
		switch c.Type() {
		case DestinationPrefix, SourcePrefix, FlowLabel:
			return true
		}
	}
	return false
}

// String returns the canonical text of the action, e.g. "discard" or
// "rate-limit 125000"; several actions are separated by spaces.
func (a Action) String() string {
	if !a.IsValid() {
		return "invalid"
	}
	return string(a.appendText(nil))
}

// action slots: a rule may say each kind of action once in text.
const (
	slotRate = 1 << iota
	slotRatePackets
	slotTrafficAction
	slotRedirect
	slotMark
	slotRedirectIP
	slotRedirectIP6
)

func slotOf(typ uint16) int {
	switch typ {
	case ExtTrafficRateBytes:
		return slotRate
	case ExtTrafficRatePackets:
		return slotRatePackets
	case ExtTrafficAction:
		return slotTrafficAction
	case ExtRedirectAS2, ExtRedirectAS4, ExtRedirectIPv4:
		return slotRedirect
	case ExtTrafficMarking:
		return slotMark
	case ExtRedirectIP:
		return slotRedirectIP
	}
	return 0
}

func (a Action) appendText(b []byte) []byte {
	seen := 0
	first := true
	sep := func() {
		if !first {
			b = append(b, ' ')
		}
		first = false
	}
	for i := 0; i+8 <= len(a.d().ext); i += 8 {
		c := a.d().ext[i : i+8]
		sep()
		typ := uint16(c[0])<<8 | uint16(c[1])
		slot := slotOf(typ)
		if slot != 0 && seen&slot == 0 {
			if nb, ok := appendFriendly(b, typ, c); ok {
				seen |= slot
				b = nb
				continue
			}
		}
		b = append(b, "ext 0x"...)
		b = hex.AppendEncode(b, []byte(c))
	}
	for i := 0; i+20 <= len(a.d().ext6); i += 20 {
		c := a.d().ext6[i : i+20]
		sep()
		if seen&slotRedirectIP6 == 0 && c[0] == 0x00 && c[1] == 0x0c && c[18] == 0 && c[19] == 0 {
			seen |= slotRedirectIP6
			b = append(b, "redirect-ip "...)
			b = netip.AddrFrom16([16]byte([]byte(c[2:18]))).AppendTo(b)
			continue
		}
		b = append(b, "ext6 0x"...)
		b = hex.AppendEncode(b, []byte(c))
	}
	if a.d().comm != "" || a.d().nh != "" {
		b = a.appendRouteText(b, first)
	}
	return b
}

// appendFriendly writes the named form of community c, if it has one that
// Parse reads back to the same bytes.
func appendFriendly(b []byte, typ uint16, c string) ([]byte, bool) {
	u16 := func(i int) uint16 { return uint16(c[i])<<8 | uint16(c[i+1]) }
	u32 := func(i int) uint32 { return uint32(u16(i))<<16 | uint32(u16(i+2)) }
	switch typ {
	case ExtTrafficRateBytes, ExtTrafficRatePackets:
		r := math.Float32frombits(u32(4))
		if !validRate(r) {
			return b, false
		}
		id := u16(2)
		if typ == ExtTrafficRateBytes && r == 0 && id == 0 {
			return append(b, "discard"...), true
		}
		if typ == ExtTrafficRateBytes {
			b = append(b, "rate-limit "...)
		} else {
			b = append(b, "rate-limit-packets "...)
		}
		b = strconv.AppendFloat(b, float64(r), 'f', -1, 32)
		if id != 0 {
			b = append(b, " as "...)
			b = strconv.AppendUint(b, uint64(id), 10)
		}
		return b, true
	case ExtTrafficAction:
		if u32(2) != 0 || c[6] != 0 || c[7]&^3 != 0 {
			return b, false
		}
		switch c[7] {
		case 0:
			return append(b, "accept"...), true
		case ActionSample:
			return append(b, "action sample"...), true
		case ActionTerminal:
			return append(b, "action terminal"...), true
		}
		return append(b, "action sample-terminal"...), true
	case ExtRedirectAS2:
		b = append(b, "redirect "...)
		b = strconv.AppendUint(b, uint64(u16(2)), 10)
		b = append(b, ':')
		return strconv.AppendUint(b, uint64(u32(4)), 10), true
	case ExtRedirectIPv4:
		b = append(b, "redirect "...)
		b = netip.AddrFrom4([4]byte([]byte(c[2:6]))).AppendTo(b)
		b = append(b, ':')
		return strconv.AppendUint(b, uint64(u16(6)), 10), true
	case ExtRedirectAS4:
		b = append(b, "redirect "...)
		as := u32(2)
		if as <= 0xffff {
			b = append(b, "0."...)
		}
		b = strconv.AppendUint(b, uint64(as), 10)
		b = append(b, ':')
		return strconv.AppendUint(b, uint64(u16(6)), 10), true
	case ExtTrafficMarking:
		if u32(2) != 0 || c[6] != 0 || c[7] > 63 {
			return b, false
		}
		b = append(b, "mark "...)
		return strconv.AppendUint(b, uint64(c[7]), 10), true
	case ExtRedirectIP:
		if c[6] != 0 || c[7] != 0 {
			return b, false
		}
		b = append(b, "redirect-ip "...)
		return netip.AddrFrom4([4]byte([]byte(c[2:6]))).AppendTo(b), true
	}
	return b, false
}

// token is one word of the input with its byte offset.
type token struct {
	s   string
	off int
}

// tokenize splits on white space; quotes group nothing and are dropped,
// so shell-quoted gobgp lists ('>=1024&<=2048 ==80') read naturally.
func tokenize(s string) []token {
	out := make([]token, 0, 2+strings.Count(s, " ")) // words are mostly one space apart
	start := -1
	for i := 0; i <= len(s); i++ {
		sep := i == len(s)
		if !sep {
			switch s[i] {
			case ' ', '\t', '\n', '\r', '\'', '"':
				sep = true
			}
		}
		if sep {
			if start >= 0 {
				out = append(out, token{s[start:i], start})
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	return out
}
