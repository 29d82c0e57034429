// Package rawbgp is a minimal BGP-4 speaker for tests that must put bytes
// on the wire a well-behaved speaker never would.
//
// It dials over TCP (optionally with a TCP MD5 key), exchanges OPEN and
// KEEPALIVE with the capabilities the test chooses, sends arbitrary
// messages, and reads what comes back. It keeps no state machine: no hold
// timer, no keepalive timer, no RIB. A test uses a hold time long enough
// for what it does and reads the peer's messages itself.
//
// Builders (Attr, Update, UpdateWithAttrLen, Open.Body) assemble message
// bodies; they never validate, so a test can lie about any length.
package rawbgp

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// Message types (RFC 4271 section 4.1, RFC 2918).
const (
	MsgOpen         uint8 = 1
	MsgUpdate       uint8 = 2
	MsgNotification uint8 = 3
	MsgKeepalive    uint8 = 4
	MsgRouteRefresh uint8 = 5
)

// Path attribute flags (RFC 4271 section 4.3).
const (
	FlagOptional   uint8 = 0x80
	FlagTransitive uint8 = 0x40
	FlagPartial    uint8 = 0x20
	FlagExtended   uint8 = 0x10
)

// Path attribute type codes used by the tests.
const (
	AttrOrigin      uint8 = 1
	AttrASPath      uint8 = 2
	AttrCommunities uint8 = 8
	AttrMPReach     uint8 = 14
	AttrMPUnreach   uint8 = 15
	AttrAS4Path     uint8 = 17
)

// Family is an AFI/SAFI pair.
type Family struct {
	AFI  uint16
	SAFI uint8
}

// The FlowSpec families (RFC 8955, RFC 8956).
var (
	IPv4FlowSpec = Family{AFI: 1, SAFI: 133}
	IPv6FlowSpec = Family{AFI: 2, SAFI: 133}
)

func (f Family) String() string {
	switch f {
	case IPv4FlowSpec:
		return "ipv4-flowspec"
	case IPv6FlowSpec:
		return "ipv6-flowspec"
	}
	return fmt.Sprintf("afi %d safi %d", f.AFI, f.SAFI)
}

// Open is what this speaker says about itself in its OPEN.
type Open struct {
	ASN      uint32     // sent in the 4-octet AS capability; AS_TRANS in My AS when above 65535
	HoldTime uint16     // seconds; 0 or >= 3
	RouterID netip.Addr // IPv4
	// Families are advertised with the multiprotocol capability, one each.
	Families []Family
	// RouteRefresh advertises the route refresh capability (RFC 2918), so
	// the peer accepts ROUTE-REFRESH messages from this speaker.
	RouteRefresh bool
}

// Body is the OPEN message body.
func (o Open) Body() []byte {
	var caps []byte
	capability := func(code uint8, v []byte) {
		caps = append(caps, code, byte(len(v)))
		caps = append(caps, v...)
	}
	for _, f := range o.Families {
		capability(1, []byte{byte(f.AFI >> 8), byte(f.AFI), 0, f.SAFI})
	}
	if o.RouteRefresh {
		capability(2, nil)
	}
	capability(65, binary.BigEndian.AppendUint32(nil, o.ASN))

	myAS := uint16(23456) // AS_TRANS (RFC 6793)
	if o.ASN <= 0xffff {
		myAS = uint16(o.ASN)
	}
	id := o.RouterID.As4()
	b := []byte{4}
	b = binary.BigEndian.AppendUint16(b, myAS)
	b = binary.BigEndian.AppendUint16(b, o.HoldTime)
	b = append(b, id[:]...)
	// One optional parameter of type 2 (capabilities) holding them all.
	b = append(b, byte(len(caps)+2), 2, byte(len(caps)))
	return append(b, caps...)
}

// Frame returns a whole message: marker, length, type, body. The length
// field is the true length; a test that must lie about it builds the
// bytes itself.
func Frame(typ uint8, body []byte) []byte {
	b := make([]byte, 16, 19+len(body))
	for i := range b {
		b[i] = 0xff
	}
	b = binary.BigEndian.AppendUint16(b, uint16(19+len(body)))
	b = append(b, typ)
	return append(b, body...)
}

// Attr encodes one path attribute with flags, type code and value. The
// length field is one octet unless flags has FlagExtended.
func Attr(flags, code uint8, value []byte) []byte {
	b := []byte{flags, code}
	if flags&FlagExtended != 0 {
		b = binary.BigEndian.AppendUint16(b, uint16(len(value)))
	} else {
		b = append(b, byte(len(value)))
	}
	return append(b, value...)
}

// AttrClaiming encodes an attribute header claiming length n, followed by
// value whatever its real length: the attribute overruns (n > len(value))
// or underruns what follows.
func AttrClaiming(flags, code uint8, n int, value []byte) []byte {
	b := []byte{flags, code}
	if flags&FlagExtended != 0 {
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	} else {
		b = append(b, byte(n))
	}
	return append(b, value...)
}

// Update is an UPDATE body with consistent length fields.
func Update(withdrawn, attrs, nlri []byte) []byte {
	return UpdateWithAttrLen(withdrawn, len(attrs), attrs, nlri)
}

// UpdateWithAttrLen is an UPDATE body whose Total Path Attribute Length
// field says attrLen, whatever the length of attrs.
func UpdateWithAttrLen(withdrawn []byte, attrLen int, attrs, nlri []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(withdrawn)))
	b = append(b, withdrawn...)
	b = binary.BigEndian.AppendUint16(b, uint16(attrLen))
	b = append(b, attrs...)
	return append(b, nlri...)
}

// MPReach is an MP_REACH_NLRI value for family f with no next hop (as
// FlowSpec uses) followed by the raw NLRI bytes.
func MPReach(f Family, nlri []byte) []byte {
	b := []byte{byte(f.AFI >> 8), byte(f.AFI), f.SAFI, 0, 0}
	return append(b, nlri...)
}

// ASPath4 is an AS_PATH (or AS4_PATH) value of one AS_SEQUENCE with
// 4-octet AS numbers.
func ASPath4(asns ...uint32) []byte {
	b := []byte{2, byte(len(asns))}
	for _, a := range asns {
		b = binary.BigEndian.AppendUint32(b, a)
	}
	return b
}

// ASPath2 is an AS_PATH value of one AS_SEQUENCE with 2-octet AS numbers,
// the encoding of a session without the 4-octet AS capability.
func ASPath2(asns ...uint16) []byte {
	b := []byte{2, byte(len(asns))}
	for _, a := range asns {
		b = binary.BigEndian.AppendUint16(b, a)
	}
	return b
}

// RouteRefresh is a ROUTE-REFRESH body for f (RFC 2918).
func RouteRefresh(f Family) []byte {
	return []byte{byte(f.AFI >> 8), byte(f.AFI), 0, f.SAFI}
}

// Notification is a decoded NOTIFICATION.
type Notification struct {
	Code, Subcode uint8
	Data          []byte
}

func (n Notification) Error() string {
	return fmt.Sprintf("NOTIFICATION %d/%d (%s) data %x", n.Code, n.Subcode, n.describe(), n.Data)
}

func (n Notification) describe() string {
	codes := map[uint8]string{1: "Message Header Error", 2: "OPEN Message Error", 3: "UPDATE Message Error",
		4: "Hold Timer Expired", 5: "FSM Error", 6: "Cease"}
	update := map[uint8]string{1: "Malformed Attribute List", 2: "Unrecognized Well-known Attribute",
		3: "Missing Well-known Attribute", 4: "Attribute Flags Error", 5: "Attribute Length Error",
		6: "Invalid ORIGIN Attribute", 8: "Invalid NEXT_HOP Attribute", 9: "Optional Attribute Error",
		10: "Invalid Network Field", 11: "Malformed AS_PATH"}
	s := codes[n.Code]
	if s == "" {
		s = "unknown code"
	}
	if n.Code == 3 && update[n.Subcode] != "" {
		s += " / " + update[n.Subcode]
	}
	return s
}

// ParseNotification decodes a NOTIFICATION body.
func ParseNotification(body []byte) (Notification, error) {
	if len(body) < 2 {
		return Notification{}, fmt.Errorf("NOTIFICATION body of %d bytes, want at least 2", len(body))
	}
	return Notification{Code: body[0], Subcode: body[1], Data: body[2:]}, nil
}

// Message is one message read from the peer.
type Message struct {
	Type uint8
	Body []byte
}

// Conn is one BGP connection.
type Conn struct {
	c net.Conn
	r *bufio.Reader
}

// Dial connects from local to remote. A non-empty password installs a
// TCP MD5 signature key (RFC 2385) for remote on the socket before the
// handshake, as a router configured with that password does.
func Dial(ctx context.Context, local netip.Addr, remote netip.AddrPort, password string) (*Conn, error) {
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(local, 0))}
	if password != "" {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) { serr = setMD5(int(fd), remote.Addr(), password) }); err != nil {
				return err
			}
			return serr
		}
	}
	c, err := d.DialContext(ctx, "tcp", remote.String())
	if err != nil {
		return nil, err
	}
	return &Conn{c: c, r: newReader(c)}, nil
}

func newReader(c net.Conn) *bufio.Reader { return bufio.NewReaderSize(c, 1<<16) }

// Close closes the TCP connection without a NOTIFICATION.
func (c *Conn) Close() error { return c.c.Close() }

// Send writes one message of type typ with body.
func (c *Conn) Send(typ uint8, body []byte) error {
	_, err := c.c.Write(Frame(typ, body))
	return err
}

// SendRaw writes b as is.
func (c *Conn) SendRaw(b []byte) error {
	_, err := c.c.Write(b)
	return err
}

// Read reads one message, waiting until deadline. io.EOF means the peer
// closed the connection.
func (c *Conn) Read(deadline time.Time) (Message, error) {
	if err := c.c.SetReadDeadline(deadline); err != nil {
		return Message{}, err
	}
	var hdr [19]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return Message{}, err
	}
	n := int(binary.BigEndian.Uint16(hdr[16:18]))
	if n < 19 || n > 65535 {
		return Message{}, fmt.Errorf("message length %d in header", n)
	}
	body := make([]byte, n-19)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return Message{}, err
	}
	return Message{Type: hdr[18], Body: body}, nil
}

// Handshake sends o's OPEN, reads the peer's OPEN, answers with a
// KEEPALIVE and waits for the peer's KEEPALIVE: afterwards the session is
// Established on both ends. A NOTIFICATION from the peer is returned as
// the error (a Notification).
func (c *Conn) Handshake(o Open, deadline time.Time) error {
	if err := c.Send(MsgOpen, o.Body()); err != nil {
		return err
	}
	sawOpen := false
	for {
		m, err := c.Read(deadline)
		if err != nil {
			return fmt.Errorf("handshake: %w", err)
		}
		switch m.Type {
		case MsgNotification:
			n, err := ParseNotification(m.Body)
			if err != nil {
				return err
			}
			return n
		case MsgOpen:
			sawOpen = true
			if err := c.Send(MsgKeepalive, nil); err != nil {
				return err
			}
		case MsgKeepalive:
			if sawOpen {
				return nil
			}
		default:
			return fmt.Errorf("handshake: message type %d before the session was established", m.Type)
		}
	}
}

// FlowSpecNLRIs counts the FlowSpec NLRIs an UPDATE body announces in its
// MP_REACH_NLRI and returns their family; zero when it carries none.
func FlowSpecNLRIs(update []byte) (Family, int, error) {
	return countNLRIs(update, AttrMPReach)
}

// FlowSpecWithdrawn counts the FlowSpec NLRIs an UPDATE body withdraws in
// its MP_UNREACH_NLRI and returns their family; zero when it carries none.
func FlowSpecWithdrawn(update []byte) (Family, int, error) {
	return countNLRIs(update, AttrMPUnreach)
}

// countNLRIs counts the FlowSpec NLRIs of the attribute code (MP_REACH or
// MP_UNREACH) of an UPDATE body.
func countNLRIs(update []byte, code uint8) (Family, int, error) {
	if len(update) < 4 {
		return Family{}, 0, errors.New("UPDATE body shorter than its length fields")
	}
	wl := int(binary.BigEndian.Uint16(update))
	if len(update) < 4+wl {
		return Family{}, 0, errors.New("withdrawn routes overrun the UPDATE")
	}
	al := int(binary.BigEndian.Uint16(update[2+wl:]))
	attrs := update[4+wl:]
	if len(attrs) < al {
		return Family{}, 0, errors.New("path attributes overrun the UPDATE")
	}
	attrs = attrs[:al]
	for len(attrs) > 0 {
		if len(attrs) < 3 {
			return Family{}, 0, errors.New("truncated attribute header")
		}
		flags, c := attrs[0], attrs[1]
		var n, h int
		if flags&FlagExtended != 0 {
			if len(attrs) < 4 {
				return Family{}, 0, errors.New("truncated attribute header")
			}
			n, h = int(binary.BigEndian.Uint16(attrs[2:])), 4
		} else {
			n, h = int(attrs[2]), 3
		}
		if len(attrs) < h+n {
			return Family{}, 0, fmt.Errorf("attribute %d overruns the path attributes", c)
		}
		v := attrs[h : h+n]
		attrs = attrs[h+n:]
		if c != code {
			continue
		}
		if len(v) < 3 {
			return Family{}, 0, fmt.Errorf("attribute %d shorter than its AFI/SAFI", c)
		}
		f := Family{AFI: binary.BigEndian.Uint16(v), SAFI: v[2]}
		nlri := v[3:]
		if code == AttrMPReach {
			// Next hop length, next hop, reserved octet.
			if len(v) < 5 || len(v) < 5+int(v[3]) {
				return f, 0, errors.New("short MP_REACH_NLRI")
			}
			nlri = v[5+int(v[3]):]
		}
		count := 0
		for len(nlri) > 0 {
			// RFC 8955 section 4: one length octet below 240, else two
			// octets with 0xf in the high nibble.
			l, hl := int(nlri[0]), 1
			if l >= 0xf0 {
				if len(nlri) < 2 {
					return f, count, errors.New("truncated FlowSpec NLRI length")
				}
				l, hl = int(binary.BigEndian.Uint16(nlri)&0x0fff), 2
			}
			if len(nlri) < hl+l {
				return f, count, errors.New("FlowSpec NLRI overruns its attribute")
			}
			nlri = nlri[hl+l:]
			count++
		}
		return f, count, nil
	}
	return Family{}, 0, nil
}
