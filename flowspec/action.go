package flowspec

import (
	"encoding/binary"
	"math"
	"net/netip"
)

// Extended community type/subtype pairs of FlowSpec actions.
const (
	ExtTrafficRateBytes   uint16 = 0x8006 // RFC 8955 §7.3
	ExtTrafficAction      uint16 = 0x8007 // RFC 8955 §7.4: sample 0x02, terminal 0x01
	ExtRedirectAS2        uint16 = 0x8008 // RFC 8955 §7.5 / RFC 7674
	ExtRedirectIPv4       uint16 = 0x8108
	ExtRedirectAS4        uint16 = 0x8208
	ExtTrafficMarking     uint16 = 0x8009 // RFC 8955 §7.6
	ExtTrafficRatePackets uint16 = 0x800c // RFC 8955 §7.3 (packets/s)
	ExtRedirectIP         uint16 = 0x010c // draft-ietf-idr-flowspec-redirect-ip, IPv4
	ExtRedirectIP6        uint16 = 0x000c // same, IPv6-address-specific (RFC 5701, 20 bytes)
)

// Traffic-action flags (ExtTrafficAction, low byte).
const (
	ActionTerminal byte = 0x01
	ActionSample   byte = 0x02
)

// An Action keeps its 20-byte IPv6-address-specific extended communities
// (RFC 5701; redirect-to-IPv6) in a second canonical string, ext6, declared
// in flowspec.go; they travel in the IPv6 Address Specific Extended
// Community attribute (type 25), not in the Extended Communities attribute.

// IsValid reports whether a holds at least one extended community, or
// for a route action a standard community or a next hop.
func (a Action) IsValid() bool {
	return a.d().ext != "" || a.d().ext6 != "" || a.d().comm != "" || a.d().nh != ""
}

// AppendExtCommunities appends the action's extended communities (8 bytes
// each, sorted) to b: the value of the EXTENDED COMMUNITIES attribute.
func (a Action) AppendExtCommunities(b []byte) []byte { return append(b, a.d().ext...) }

// AppendIPv6ExtCommunities appends the action's IPv6-address-specific
// extended communities (20 bytes each, sorted; RFC 5701, attribute type 25)
// to b. Only redirect-ip to an IPv6 address produces them.
func (a Action) AppendIPv6ExtCommunities(b []byte) []byte { return append(b, a.d().ext6...) }

// Discard is the action that drops all matched traffic (traffic-rate 0).
func Discard() Action { return rateAction(ExtTrafficRateBytes, 0, 0) }

// RateLimit limits matched traffic to bytesPerSecond (traffic-rate-bytes,
// 0x8006); 0 is Discard. It returns the invalid zero Action for negative,
// NaN or infinite rates.
func RateLimit(bytesPerSecond float32) Action {
	return rateAction(ExtTrafficRateBytes, 0, bytesPerSecond)
}

// RateLimitPackets limits matched traffic to packetsPerSecond
// (traffic-rate-packets, 0x800c). Invalid rates give the zero Action.
func RateLimitPackets(packetsPerSecond float32) Action {
	return rateAction(ExtTrafficRatePackets, 0, packetsPerSecond)
}

// RateLimitAS is RateLimit with the informational 2-byte AS field set.
func RateLimitAS(bytesPerSecond float32, as uint16) Action {
	return rateAction(ExtTrafficRateBytes, as, bytesPerSecond)
}

func rateAction(typ uint16, id uint16, r float32) Action {
	if !validRate(r) {
		return Action{}
	}
	var c [8]byte
	binary.BigEndian.PutUint16(c[0:], typ)
	binary.BigEndian.PutUint16(c[2:], id)
	binary.BigEndian.PutUint32(c[4:], math.Float32bits(r))
	return mkAction(actionData{ext: string(c[:])})
}

func validRate(r float32) bool {
	return r >= 0 && !math.IsInf(float64(r), 0) && !math.Signbit(float64(r))
}

// Accept is a traffic-action community with no flags set: it changes
// nothing at the router but gives a rule that only accepts traffic (an
// exception to a broader rule) a valid, non-empty Action.
func Accept() Action { return TrafficAction(false, false) }

// TrafficAction is the traffic-action community (0x8007) with the sample
// and terminal bits.
func TrafficAction(sample, terminal bool) Action {
	var c [8]byte
	binary.BigEndian.PutUint16(c[0:], ExtTrafficAction)
	if sample {
		c[7] |= ActionSample
	}
	if terminal {
		c[7] |= ActionTerminal
	}
	return mkAction(actionData{ext: string(c[:])})
}

// RedirectAS2 redirects to the VRF with route target as:value (0x8008).
func RedirectAS2(as uint16, value uint32) Action {
	var c [8]byte
	binary.BigEndian.PutUint16(c[0:], ExtRedirectAS2)
	binary.BigEndian.PutUint16(c[2:], as)
	binary.BigEndian.PutUint32(c[4:], value)
	return mkAction(actionData{ext: string(c[:])})
}

// RedirectAS4 redirects to the VRF with route target as:value, 4-byte AS
// (0x8208).
func RedirectAS4(as uint32, value uint16) Action {
	var c [8]byte
	binary.BigEndian.PutUint16(c[0:], ExtRedirectAS4)
	binary.BigEndian.PutUint32(c[2:], as)
	binary.BigEndian.PutUint16(c[6:], value)
	return mkAction(actionData{ext: string(c[:])})
}

// RedirectIPv4RT redirects to the VRF with route target addr:value
// (0x8108). It returns the zero Action if addr is not IPv4.
func RedirectIPv4RT(addr netip.Addr, value uint16) Action {
	if !addr.Is4() {
		return Action{}
	}
	var c [8]byte
	binary.BigEndian.PutUint16(c[0:], ExtRedirectIPv4)
	a := addr.As4()
	copy(c[2:], a[:])
	binary.BigEndian.PutUint16(c[6:], value)
	return mkAction(actionData{ext: string(c[:])})
}

// Mark sets the DSCP of matched traffic (traffic-marking, 0x8009). It
// returns the zero Action for dscp > 63.
func Mark(dscp uint8) Action {
	if dscp > 63 {
		return Action{}
	}
	var c [8]byte
	binary.BigEndian.PutUint16(c[0:], ExtTrafficMarking)
	c[7] = dscp
	return mkAction(actionData{ext: string(c[:])})
}

// RedirectIP redirects matched traffic to next hop addr
// (draft-ietf-idr-flowspec-redirect-ip): an 8-byte 0x010c community for
// IPv4, a 20-byte IPv6-address-specific 0x000c community for IPv6. The
// zero Action is returned for an invalid or zoned addr.
func RedirectIP(addr netip.Addr) Action {
	switch {
	case addr.Is4():
		var c [8]byte
		binary.BigEndian.PutUint16(c[0:], ExtRedirectIP)
		a := addr.As4()
		copy(c[2:], a[:])
		return mkAction(actionData{ext: string(c[:])})
	case addr.Is6() && addr.Zone() == "":
		var c [20]byte
		binary.BigEndian.PutUint16(c[0:], ExtRedirectIP6)
		a := addr.As16()
		copy(c[2:], a[:])
		return mkAction(actionData{ext6: string(c[:])})
	}
	return Action{}
}

// ExtCommunity is an action made of one raw 8-byte extended community.
func ExtCommunity(c [8]byte) Action { return mkAction(actionData{ext: string(c[:])}) }

// Combine returns the union of the communities of the given actions; of
// several next hops the last one wins.
func Combine(actions ...Action) Action {
	var ext, ext6, comm []byte
	nh := ""
	for _, a := range actions {
		ext = append(ext, a.d().ext...)
		ext6 = append(ext6, a.d().ext6...)
		comm = append(comm, a.d().comm...)
		if a.d().nh != "" {
			nh = a.d().nh
		}
	}
	return mkAction(actionData{ext: canonicalSet(ext, 8), ext6: canonicalSet(ext6, 20), comm: canonicalSet(comm, 4), nh: nh})
}

// DecodeAction builds an Action from concatenated 8-byte extended
// communities (the EXTENDED COMMUNITIES attribute value). Communities this
// package does not know are kept verbatim, so any path read from the RIB
// that carries at least one extended community has an Action. Errors are
// *DecodeError (length not a multiple of 8, or no community at all).
func DecodeAction(ext []byte) (Action, error) { return DecodeActionIPv6(ext, nil) }

// DecodeActionIPv6 is DecodeAction that also takes the IPv6 Address
// Specific Extended Community attribute value (20 bytes per community,
// RFC 5701), which carries redirect-to-IPv6.
func DecodeActionIPv6(ext, ext6 []byte) (Action, error) {
	if len(ext)%8 != 0 {
		return Action{}, decodeErr(len(ext)-len(ext)%8, "extended communities: %d bytes is not a multiple of 8", len(ext))
	}
	if len(ext6)%20 != 0 {
		return Action{}, decodeErr(len(ext6)-len(ext6)%20, "IPv6 extended communities: %d bytes is not a multiple of 20", len(ext6))
	}
	if len(ext) == 0 && len(ext6) == 0 {
		return Action{}, decodeErr(0, "no extended communities: the rule has no action")
	}
	return mkAction(actionData{ext: canonicalSet(ext, 8), ext6: canonicalSet(ext6, 20)}), nil
}

// canonicalSet sorts the size-byte records of b and removes duplicates.
func canonicalSet(b []byte, size int) string {
	n := len(b) / size
	if n == 0 {
		return ""
	}
	s := make([]byte, 0, len(b))
	for i := 0; i < n; i++ {
		rec := b[i*size : (i+1)*size]
		// insertion: find position
		j := len(s) / size
		for j > 0 && string(s[(j-1)*size:j*size]) > string(rec) {
			j--
		}
		if j > 0 && string(s[(j-1)*size:j*size]) == string(rec) {
			continue
		}
		s = append(s, rec...)
		copy(s[(j+1)*size:], s[j*size:len(s)-size])
		copy(s[j*size:], rec)
	}
	return string(s)
}
