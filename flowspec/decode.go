package flowspec

// MaxNLRILen is the largest NLRI body the 2-byte length form can carry.
const MaxNLRILen = 0xfff

// DecodeMatch decodes one NLRI (starting at its length prefix) of family f
// and returns it with the number of bytes consumed. Errors are *DecodeError
// and name the offending byte.
//
// Decoding is strict: components must appear once each in increasing type
// order, be defined for the family, have allowed value lengths and no
// reserved bits set; prefixes must be at most 32/128 bits and IPv6 offsets
// at most the prefix length. Values longer than necessary and non-zero
// padding after a prefix are accepted and kept byte for byte (the NLRI is
// the rule's identity on the wire); see Match.Canonical.
func DecodeMatch(f Family, b []byte) (Match, int, error) {
	if !f.IsValid() {
		return Match{}, 0, decodeErr(0, "invalid family")
	}
	if f.IsRoute() {
		return decodeRoute(f, b)
	}
	if len(b) == 0 {
		return Match{}, 0, decodeErr(0, "NLRI length missing")
	}
	n, hdr := int(b[0]), 1
	if b[0]&0xf0 == 0xf0 {
		if len(b) < 2 {
			return Match{}, 0, decodeErr(1, "2-byte NLRI length truncated")
		}
		n, hdr = int(b[0]&0x0f)<<8|int(b[1]), 2
		if n < 0xf0 {
			return Match{}, 0, decodeErr(0, "2-byte NLRI length %d is below 240: must use the 1-byte form", n)
		}
	}
	if n == 0 {
		return Match{}, 0, decodeErr(0, "empty NLRI: a rule needs at least one component")
	}
	if len(b)-hdr < n {
		return Match{}, 0, decodeErr(len(b), "NLRI truncated: length says %d bytes, %d present", n, len(b)-hdr)
	}
	body := b[hdr : hdr+n]
	if err := scan(f, body, hdr); err != nil {
		return Match{}, 0, err
	}
	return Match{fam: f, nlri: string(body)}, hdr + n, nil
}

// scan validates the component list body; base is the offset of body in
// the caller's input, for error offsets. It does not allocate unless it
// fails.
func scan[S ~string | ~[]byte](f Family, body S, base int) error {
	var prev ComponentType
	maxT := f.maxType()
	for pos := 0; pos < len(body); {
		t := ComponentType(body[pos])
		switch {
		case t == 0 || t > maxT:
			return decodeErr(base+pos, "unknown component type %d in %s", t, f)
		case t == prev:
			return decodeErr(base+pos, "duplicate component type %d (%s)", t, t)
		case t < prev:
			return decodeErr(base+pos, "component type %d (%s) after type %d: components must be in increasing type order", t, t, prev)
		}
		prev = t
		sp := specOf(t)
		start := pos
		pos++
		if sp.kind == kindPrefix {
			if pos >= len(body) {
				return decodeErr(base+pos, "%s: prefix length missing", t)
			}
			bits := int(body[pos])
			if bits > f.addrBits() {
				return decodeErr(base+pos, "%s: prefix length %d exceeds %d", t, bits, f.addrBits())
			}
			pos++
			pat := bits
			if f == IPv6 {
				if pos >= len(body) {
					return decodeErr(base+pos, "%s: prefix offset missing", t)
				}
				off := int(body[pos])
				if off > bits {
					return decodeErr(base+pos, "%s: prefix offset %d exceeds prefix length %d", t, off, bits)
				}
				pat = bits - off
				pos++
			}
			nb := (pat + 7) / 8
			if len(body)-pos < nb {
				return decodeErr(base+len(body), "%s: prefix truncated: %d bytes needed, %d present", t, nb, len(body)-pos)
			}
			// Padding bits after the prefix are ignored (RFC 4271 §4.3,
			// RFC 8956 §3.1) but kept: the bytes are the rule's identity.
			pos += nb
			continue
		}
		for first := true; ; first = false {
			if pos >= len(body) {
				return decodeErr(base+pos, "%s: operator missing (list not ended)", t)
			}
			op := body[pos]
			if first && op&OpAnd != 0 {
				return decodeErr(base+pos, "%s: first operator has the AND bit set", t)
			}
			reserved := numReserved
			if sp.kind == kindBitmask {
				reserved = bitReserved
			}
			if op&reserved != 0 {
				return decodeErr(base+pos, "%s: reserved operator bits set (0x%02x)", t, op&reserved)
			}
			code := (op & opLenMask) >> 4
			if code > sp.maxLenCode {
				return decodeErr(base+pos, "%s: %d-byte value not allowed (max %d)", t, 1<<code, 1<<sp.maxLenCode)
			}
			l := 1 << code
			if len(body)-pos-1 < l {
				return decodeErr(base+len(body), "%s: value truncated: %d bytes needed, %d present", t, l, len(body)-pos-1)
			}
			var v uint32
			for i := 0; i < l; i++ {
				v = v<<8 | uint32(body[pos+1+i])
			}
			if v > sp.maxVal {
				return decodeErr(base+pos+1, "%s: value %d out of range 0..%d", t, v, sp.maxVal)
			}
			if t == Fragment && f == IPv6 && v&FragDontFragment != 0 {
				return decodeErr(base+pos+1, "fragment: dont-fragment bit is not defined for IPv6")
			}
			pos += 1 + l
			if op&OpEnd != 0 {
				break
			}
		}
		_ = start
	}
	return nil
}
