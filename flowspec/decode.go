package flowspec

// MaxNLRILen is the largest NLRI body the 2-byte length form can carry.
const MaxNLRILen = 0xfff

// DecodeMatch decodes one NLRI (starting at its length prefix) of family f
// and returns it with the number of bytes consumed. Errors are *DecodeError
// and name the offending byte; a peer's NLRI that fails is malformed
// (treat-as-withdraw, RFC 7606).
//
// Malformed: unknown component types, components repeated or out of type
// order (RFC 8955 §4.2), truncation, prefixes longer than 32/128 bits, an
// IPv6 prefix whose offset is not below its length unless both are 0 (RFC
// 8956 §3.1), a width the RFCs rule out with a MUST (TCP flags other than
// 1 or 2 octets, DSCP or fragment other than 1), and a value that does not
// fit its field (a protocol above 255, a port above 65535, a flow label
// above 20 bits, a DSCP above 63), at whatever width it came.
//
// Accepted and normalised, because the RFCs tell a decoder to ignore them
// or only recommend (SHOULD) the form (see decodeLeniencies in the tests):
//   - reserved numeric (0x08) and bitmask (0x0c) operator bits, RFC 8955
//     §4.2.1.1 and §4.2.1.2: cleared;
//   - the AND bit on a component's first operator, §4.2.1.1: cleared;
//   - non-zero padding bits after a prefix, RFC 4271 §4.3 and RFC 8956
//     §3.1: cleared;
//   - the data-offset nibble of a 2-octet TCP flags value, §4.2.2.9:
//     cleared;
//   - reserved fragment bits, §4.2.2.12 and RFC 8956 §3.6 (for IPv6 the
//     dont-fragment position too): cleared;
//   - numeric values at a width other than the recommended one (a
//     protocol in 2 octets, a port or packet length in 4, a flow label in
//     1 or 2, ...; §4.2.2.3-10, RFC 8956 §3.3-3.7): re-encoded at the
//     canonical width;
//   - the value of a true or false item, which Table 1 says is ignored:
//     set to 0;
//   - the 2-octet length form for an NLRI under 240 bytes, §4.1 ("can be
//     encoded as a single octet"): AppendTo writes the 1-octet form.
//
// The returned Match is always in canonical form (the one Parse builds and
// Match.AppendTo writes): the rule's key everywhere in ribkeeper is the
// canonical encoding, so two encodings of the same rule are one rule. As a
// consequence Match.Len may differ from the number of bytes consumed.
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
		// Below 240 the 1-byte form is only a "can" (RFC 8955 §4.1):
		// accepted; AppendTo writes the 1-byte form.
		n, hdr = int(b[0]&0x0f)<<8|int(b[1]), 2
	}
	if n == 0 {
		return Match{}, 0, decodeErr(0, "empty NLRI: a rule needs at least one component")
	}
	if len(b)-hdr < n {
		return Match{}, 0, decodeErr(len(b), "NLRI truncated: length says %d bytes, %d present", n, len(b)-hdr)
	}
	body := b[hdr : hdr+n]
	canonical, err := scan(f, body, hdr)
	if err != nil {
		return Match{}, 0, err
	}
	if canonical {
		return matchOf(f, body), hdr + n, nil
	}
	out := make([]byte, 0, n+n/2)
	out, _ = normalise(f, body, out)
	if len(out) > MaxNLRILen {
		return Match{}, 0, decodeErr(hdr, "NLRI is %d bytes once its values are at their canonical width; the maximum is %d", len(out), MaxNLRILen)
	}
	return matchOf(f, out), hdr + n, nil
}

// scan validates the component list body and reports whether it is
// already canonical; base is the offset of body in the caller's input,
// for error offsets. It does not allocate unless it fails.
func scan[S ~string | ~[]byte](f Family, body S, base int) (canonical bool, err error) {
	return walk(f, body, base, nil)
}

// normalise appends the canonical encoding of the body that scan accepted
// to out.
func normalise[S ~string | ~[]byte](f Family, body S, out []byte) ([]byte, error) {
	_, err := walk(f, body, 0, &out)
	return out, err
}

// walk validates body and reports whether it is canonical; when out is not
// nil it also appends the canonical encoding to *out.
func walk[S ~string | ~[]byte](f Family, body S, base int, out *[]byte) (canonical bool, err error) {
	canonical = true
	var prev ComponentType
	maxT := f.maxType()
	for pos := 0; pos < len(body); {
		t := ComponentType(body[pos])
		switch {
		case t == 0 || t > maxT:
			return false, decodeErr(base+pos, "unknown component type %d in %s", t, f)
		case t == prev:
			return false, decodeErr(base+pos, "duplicate component type %d (%s)", t, t)
		case t < prev:
			return false, decodeErr(base+pos, "component type %d (%s) after type %d: components must be in increasing type order", t, t, prev)
		}
		prev = t
		sp := specOf(t)
		pos++
		if out != nil {
			*out = append(*out, byte(t))
		}
		if sp.kind == kindPrefix {
			n, canon, err := walkPrefix(f, t, body[pos:], base+pos, out)
			if err != nil {
				return false, err
			}
			canonical = canonical && canon
			pos += n
			continue
		}
		// Operator bits a decoder ignores (RFC 8955 §4.2.1.1, §4.2.1.2);
		// a first item's AND bit is ignored too (§4.2.1.1).
		ignore := numReserved | OpAnd
		if sp.kind == kindBitmask {
			ignore = bitReserved | OpAnd
		}
		for {
			if pos >= len(body) {
				return false, decodeErr(base+pos, "%s: operator missing (list not ended)", t)
			}
			op := body[pos]
			code := (op & opLenMask) >> 4
			if sp.widths&(1<<code) == 0 {
				return false, decodeErr(base+pos, "%s: %d-octet value not allowed (%s)", t, 1<<code, widthRule(t))
			}
			l := 1 << code
			if len(body)-pos-1 < l {
				return false, decodeErr(base+len(body), "%s: value truncated: %d bytes needed, %d present", t, l, len(body)-pos-1)
			}
			var raw uint64
			switch l {
			case 1:
				raw = uint64(body[pos+1])
			case 2:
				raw = uint64(body[pos+1])<<8 | uint64(body[pos+2])
			default:
				for i := 0; i < l; i++ {
					raw = raw<<8 | uint64(body[pos+1+i])
				}
			}
			cop := op &^ (opLenMask | ignore)
			v := raw
			switch {
			case sp.kind == kindNumeric && (op&numCmpMask == OpTrue || op&numCmpMask == OpFalse):
				v = 0 // RFC 8955 Table 1: true and false ignore the value
			case t == TCPFlags && l == 2:
				v &^= 0xf000 // §4.2.2.9: the data offset is always treated as 0
			case t == Fragment:
				v &= uint64(fragmentBits(f)) // §4.2.2.12, RFC 8956 §3.6: reserved bits ignored
			}
			if v > uint64(sp.maxVal) {
				return false, decodeErr(base+pos+1, "%s: value %d does not fit the field (0..%d)", t, raw, sp.maxVal)
			}
			if cop != op&^opLenMask || v != raw || op&opLenMask != canonLen(t, uint32(v)) {
				canonical = false
			}
			if out != nil {
				*out = appendItem(*out, t, cop, uint32(v))
			}
			pos += 1 + l
			if op&OpEnd != 0 {
				break
			}
			ignore &^= OpAnd // only the first item's AND bit is ignored
		}
	}
	return canonical, nil
}

// widthRule names the RFC rule for the value widths of component t, for
// errors.
func widthRule(t ComponentType) string {
	switch t {
	case TCPFlags:
		return "RFC 8955 §4.2.2.9: TCP flags are 1 or 2 octets"
	case DSCP:
		return "RFC 8955 §4.2.2.11: DSCP is 1 octet"
	case Fragment:
		return "RFC 8955 §4.2.2.12: fragment is 1 octet"
	}
	return "8-octet values are the largest"
}

// walkPrefix validates the prefix component of type t whose length byte is
// b[0] and returns its length without the type byte; base is the offset of
// b in the caller's input. When out is not nil it appends the canonical
// encoding (padding bits cleared) to *out.
func walkPrefix[S ~string | ~[]byte](f Family, t ComponentType, b S, base int, out *[]byte) (n int, canonical bool, err error) {
	if len(b) == 0 {
		return 0, false, decodeErr(base, "%s: prefix length missing", t)
	}
	bits := int(b[0])
	if bits > f.addrBits() {
		return 0, false, decodeErr(base, "%s: prefix length %d exceeds %d", t, bits, f.addrBits())
	}
	hdr, pat := 1, bits
	if f == IPv6 {
		if len(b) < 2 {
			return 0, false, decodeErr(base+1, "%s: prefix offset missing", t)
		}
		off := int(b[1])
		switch {
		case off > bits:
			return 0, false, decodeErr(base+1, "%s: prefix offset %d exceeds prefix length %d", t, off, bits)
		case off == bits && bits != 0:
			// RFC 8956 §3.1: unless both are 0, offset < length or
			// the component is malformed.
			return 0, false, decodeErr(base+1, "%s: prefix offset %d equals the prefix length: an empty pattern is malformed (RFC 8956 §3.1)", t, off)
		}
		hdr, pat = 2, bits-off
	}
	nb := (pat + 7) / 8
	if len(b)-hdr < nb {
		return 0, false, decodeErr(base+len(b), "%s: prefix truncated: %d bytes needed, %d present", t, nb, len(b)-hdr)
	}
	// Padding bits after the pattern are ignored (RFC 4271 §4.3, RFC 8956
	// §3.1) and cleared.
	canonical = true
	var mask byte = 0xff
	if r := pat % 8; r != 0 {
		mask = 0xff << (8 - r)
		canonical = b[hdr+nb-1]&^mask == 0
	}
	if out != nil {
		for i := 0; i < hdr+nb; i++ {
			*out = append(*out, b[i])
		}
		if nb > 0 {
			(*out)[len(*out)-1] &= mask
		}
	}
	return hdr + nb, canonical, nil
}
