package flowspec

import (
	"slices"
	"strings"
)

// Compare orders matches by RFC 8955 §5.1 precedence, extended by RFC 8956
// §5.1 for IPv6 prefix offsets: it returns -1 if a has precedence over b
// (a router applies a first), +1 if b has precedence, 0 if a == b.
// IPv4 rules sort before IPv6 rules; the invalid Match sorts last.
//
// Components are compared in type order: a rule that lacks a component the
// other has loses; the lower type wins. Prefixes: the lower offset wins,
// then if the common bits differ the lower value wins, else the longer
// (more specific) prefix wins. Other components: memcmp of the encoded
// operator/value bytes over the common length, else the longer encoding
// wins. The order depends on the bytes; every Match holds the canonical
// encoding (DecodeMatch normalises), which is also what ribkeeper sends, so
// routers order ribkeeper's rules the same way.
func Compare(a, b Match) int {
	if a.fam() != b.fam() {
		switch {
		case a.fam() == 0:
			return 1
		case b.fam() == 0:
			return -1
		case a.fam() < b.fam():
			return -1
		}
		return 1
	}
	if a.fam().IsRoute() {
		return compareRoutes(a, b)
	}
	pa, pb := 0, 0
	for pa < len(a.nlri()) || pb < len(b.nlri()) {
		switch {
		case pa == len(a.nlri()):
			return 1
		case pb == len(b.nlri()):
			return -1
		}
		ta, tb := a.nlri()[pa], b.nlri()[pb]
		if ta != tb {
			if ta < tb {
				return -1
			}
			return 1
		}
		na := componentLen(a.fam(), a.nlri(), pa)
		nb := componentLen(b.fam(), b.nlri(), pb)
		ca, cb := a.nlri()[pa:pa+na], b.nlri()[pb:pb+nb]
		var c int
		if specOf(ComponentType(ta)).kind == kindPrefix {
			c = comparePrefix(a.fam(), ca, cb)
		} else {
			common := min(len(ca), len(cb))
			if c = strings.Compare(ca[:common], cb[:common]); c == 0 {
				c = -cmpInt(len(ca), len(cb))
			}
		}
		if c != 0 {
			return c
		}
		pa += na
		pb += nb
	}
	return 0
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// comparePrefix compares two encoded prefix components of family f.
func comparePrefix(f Family, ca, cb string) int {
	bitsA, bitsB := int(ca[1]), int(cb[1])
	offA, offB, hdr := 0, 0, 2
	if f == IPv6 {
		offA, offB, hdr = int(ca[2]), int(cb[2]), 3
		if c := cmpInt(offA, offB); c != 0 {
			return c
		}
	}
	patA, patB := bitsA-offA, bitsB-offB
	common := min(patA, patB)
	// Compare the first common pattern bits.
	for i := 0; i < common/8; i++ {
		if c := cmpInt(int(ca[hdr+i]), int(cb[hdr+i])); c != 0 {
			return c
		}
	}
	if r := common % 8; r != 0 {
		mask := byte(0xff << (8 - r))
		i := hdr + common/8
		if c := cmpInt(int(ca[i]&mask), int(cb[i]&mask)); c != 0 {
			return c
		}
	}
	return -cmpInt(patA, patB)
}

// Sort sorts ms in precedence order (see Compare).
func Sort(ms []Match) { slices.SortFunc(ms, Compare) }

// Shadows reports whether rule a can never apply because rule b has
// precedence over it and matches every packet a matches, and b's action
// stops evaluation (its traffic-action terminal bit is clear; RFC 8955
// §7.4). It is conservative: false means "not proven", not "not shadowed".
func (b Rule) Shadows(a Rule) bool {
	if !a.Match.IsValid() || !b.Match.IsValid() || !b.Action.IsValid() {
		return false
	}
	for i := 0; i+8 <= len(b.Action.d().ext); i += 8 {
		c := b.Action.d().ext[i : i+8]
		if c[0] == 0x80 && c[1] == 0x07 && c[7]&ActionTerminal != 0 {
			return false // evaluation continues with later rules
		}
	}
	return Covers(b.Match, a.Match)
}

// Covers reports whether b has precedence over a and every packet that
// matches a also matches b (so a can only apply if b's action lets
// evaluation continue). It is conservative: it returns true only when it
// is certain.
func Covers(b, a Match) bool {
	if a.fam() != b.fam() || !a.IsValid() || a.fam().IsRoute() || Compare(b, a) >= 0 {
		return false
	}
	for cb := range b.All() {
		ca, ok := a.Component(cb.Type())
		if !ok {
			// a does not restrict this field: b must match every value.
			if !universal(a.fam(), cb.b) {
				return false
			}
			continue
		}
		if !subset(a.fam(), ca.b, cb.b) {
			return false
		}
	}
	return true
}

// universal reports whether component c matches every packet.
func universal(f Family, c string) bool {
	switch specOf(ComponentType(c[0])).kind {
	case kindPrefix:
		p, off := prefixOf(f, c)
		return p.Bits() == off
	case kindNumeric:
		// A list that is true at 0 and at every value and successor of its
		// items is true everywhere (see subset).
		return subset(f, universalNumeric(c[0]), c)
	}
	return subset(f, universalBitmask(c[0]), c)
}

// universalNumeric and universalBitmask are "true" lists of type t:
// lt|gt|eq all set is "true" (RFC 8955 §4.2.1.1 Table 1; all clear is
// "false").
func universalNumeric(t byte) string { return string([]byte{t, OpEnd | OpTrue, 0}) }

// Bitmask "true": not (data & 0 != 0) = not false.
func universalBitmask(t byte) string { return string([]byte{t, OpEnd | OpNot, 0}) }

// subset reports whether the packets matched by component ca are a subset
// of those matched by cb (same type).
func subset(f Family, ca, cb string) bool {
	t := ComponentType(ca[0])
	switch specOf(t).kind {
	case kindPrefix:
		pa, offA := prefixOf(f, ca)
		pb, offB := prefixOf(f, cb)
		return offA == offB && pb.Bits() <= pa.Bits() && pb.Contains(pa.Addr())
	case kindBitmask:
		max := uint32(0xff)
		if t == TCPFlags {
			max = 0xfff // the 12 bits of the TCP flags field
		} else if t == Fragment {
			max = 0x0f
		}
		for v := uint32(0); v <= max; v++ {
			if evalBitmask(ca, v) && !evalBitmask(cb, v) {
				return false
			}
		}
		return true
	}
	// Numeric: the truth of both lists is constant between consecutive
	// values that appear in either list, so test each value, its
	// successor, and the ends of the domain.
	max := specOf(t).maxVal
	check := func(v uint32) bool { return !evalNumeric(ca, v) || evalNumeric(cb, v) }
	if !check(0) || !check(max) {
		return false
	}
	for _, c := range [2]string{ca, cb} {
		for pos := 1; pos < len(c); {
			_, v, n := readItem(c, pos)
			pos += n
			if v > max {
				continue
			}
			if !check(v) || (v < max && !check(v+1)) || (v > 0 && !check(v-1)) {
				return false
			}
		}
	}
	return true
}

// evalNumeric evaluates the numeric component c against value v: items are
// ORs of AND groups, AND binding tighter.
func evalNumeric(c string, v uint32) bool {
	return evalList(c, func(op byte, x uint32) bool {
		switch {
		case v < x:
			return op&OpLT != 0
		case v > x:
			return op&OpGT != 0
		}
		return op&OpEQ != 0
	})
}

func evalBitmask(c string, v uint32) bool {
	return evalList(c, func(op byte, x uint32) bool {
		var r bool
		if op&OpMatch != 0 {
			r = v&x == x
		} else {
			r = v&x != 0
		}
		return r != (op&OpNot != 0)
	})
}

func evalList(c string, item func(op byte, x uint32) bool) bool {
	result, group := false, true
	for pos := 1; pos < len(c); {
		op, x, n := readItem(c, pos)
		pos += n
		if op&OpAnd == 0 && pos-n > 1 {
			result = result || group
			group = true
		}
		group = group && item(op, x)
	}
	return result || group
}
