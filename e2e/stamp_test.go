package e2e

// stampPeer is a minimal passive BGP peer that timestamps UPDATE messages
// as they arrive, for time-to-mitigate measurements that must not depend
// on how fast a router's CLI can be polled. It speaks just enough BGP-4 to
// hold a session with one speaker over loopback: OPEN with the IPv4 and
// IPv6 FlowSpec multiprotocol capabilities and 4-octet AS, a KEEPALIVE
// answered to each KEEPALIVE, and UPDATEs read and stamped. It announces
// nothing.

import (
	"bufio"
	be "encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// stampedUpdate is one UPDATE as it arrived.
type stampedUpdate struct {
	At time.Time
	// Reach and Unreach are the NLRI bytes of MP_REACH_NLRI and
	// MP_UNREACH_NLRI (FlowSpec routes), nil when absent.
	Reach, Unreach []byte
}

type stampPeer struct {
	t       testing.TB
	ln      net.Listener
	asn     uint32
	id      netip.Addr
	Updates chan stampedUpdate // every UPDATE, in arrival order
	mu      sync.Mutex
	up      bool
	err     error
}

// startStampPeer listens on addr (a free port) as AS asn; the speaker
// under test dials it. The listener and session end at cleanup.
func startStampPeer(t testing.TB, addr string, asn uint32) (*stampPeer, int) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatalf("stamp peer: listen on %s: %v", addr, err)
	}
	p := &stampPeer{t: t, ln: ln, asn: asn, id: netip.MustParseAddr(addr), Updates: make(chan stampedUpdate, 1<<16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			err = p.serve(c)
			c.Close()
			p.mu.Lock()
			p.up = false
			if err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
				p.err = err
			}
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return p, ln.Addr().(*net.TCPAddr).Port
}

// Established reports whether a session is up.
func (p *stampPeer) Established() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.up
}

// Err is the last session's error, if it failed.
func (p *stampPeer) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

const (
	bgpOpen         = 1
	bgpUpdate       = 2
	bgpNotification = 3
	bgpKeepalive    = 4
)

func (p *stampPeer) serve(c net.Conn) error {
	r := bufio.NewReaderSize(c, 1<<16)
	typ, body, err := readBGP(r)
	if err != nil {
		return err
	}
	if typ != bgpOpen {
		return fmt.Errorf("stamp peer: first message is type %d, want OPEN", typ)
	}
	if err := writeBGP(c, bgpOpen, p.open()); err != nil {
		return err
	}
	if err := writeBGP(c, bgpKeepalive, nil); err != nil {
		return err
	}
	p.mu.Lock()
	p.up = true
	p.mu.Unlock()
	for {
		typ, body, err = readBGP(r)
		if err != nil {
			return err
		}
		at := time.Now()
		switch typ {
		case bgpKeepalive:
			if err := writeBGP(c, bgpKeepalive, nil); err != nil {
				return err
			}
		case bgpNotification:
			return fmt.Errorf("stamp peer: NOTIFICATION %x received", body)
		case bgpUpdate:
			u, err := parseStampUpdate(body)
			if err != nil {
				return err
			}
			u.At = at
			select {
			case p.Updates <- u:
			default:
				return fmt.Errorf("stamp peer: %d UPDATEs not consumed", cap(p.Updates))
			}
		}
	}
}

// open is the OPEN body: version 4, AS_TRANS when asn needs 4 octets,
// hold time 90 s, the BGP identifier and the capabilities.
func (p *stampPeer) open() []byte {
	as2 := uint16(p.asn)
	if p.asn > 0xffff {
		as2 = 23456
	}
	caps := []byte{
		1, 4, 0, 1, 0, 133, // multiprotocol IPv4 FlowSpec
		1, 4, 0, 2, 0, 133, // multiprotocol IPv6 FlowSpec
		65, 4, 0, 0, 0, 0, // 4-octet AS
	}
	be.BigEndian.PutUint32(caps[14:], p.asn)
	b := []byte{4, 0, 0, 0, 90}
	be.BigEndian.PutUint16(b[1:], as2)
	id := p.id.As4()
	b = append(b, id[:]...)
	b = append(b, byte(2+len(caps)), 2, byte(len(caps)))
	return append(b, caps...)
}

func readBGP(r *bufio.Reader) (typ byte, body []byte, err error) {
	var h [19]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := int(be.BigEndian.Uint16(h[16:18]))
	if n < 19 || n > 65535 {
		return 0, nil, fmt.Errorf("stamp peer: message length %d", n)
	}
	body = make([]byte, n-19)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, err
	}
	return h[18], body, nil
}

func writeBGP(w io.Writer, typ byte, body []byte) error {
	m := make([]byte, 19, 19+len(body))
	for i := range 16 {
		m[i] = 0xff
	}
	be.BigEndian.PutUint16(m[16:], uint16(19+len(body)))
	m[18] = typ
	_, err := w.Write(append(m, body...))
	return err
}

// parseStampUpdate finds MP_REACH_NLRI (14) and MP_UNREACH_NLRI (15).
func parseStampUpdate(b []byte) (stampedUpdate, error) {
	var u stampedUpdate
	bad := func(what string) (stampedUpdate, error) {
		return u, fmt.Errorf("stamp peer: malformed UPDATE (%s): %x", what, b)
	}
	if len(b) < 2 {
		return bad("withdrawn length")
	}
	wl := int(be.BigEndian.Uint16(b))
	if len(b) < 4+wl {
		return bad("withdrawn routes")
	}
	al := int(be.BigEndian.Uint16(b[2+wl:]))
	attrs := b[4+wl:]
	if len(attrs) < al {
		return bad("attributes length")
	}
	attrs = attrs[:al]
	for len(attrs) > 0 {
		if len(attrs) < 3 {
			return bad("attribute header")
		}
		flags, code := attrs[0], attrs[1]
		hl, n := 3, int(attrs[2])
		if flags&0x10 != 0 {
			if len(attrs) < 4 {
				return bad("extended attribute header")
			}
			hl, n = 4, int(be.BigEndian.Uint16(attrs[2:]))
		}
		if len(attrs) < hl+n {
			return bad("attribute value")
		}
		v := attrs[hl : hl+n]
		switch code {
		case 14: // AFI(2) SAFI(1) NH len(1) NH reserved(1) NLRI
			if len(v) < 4 || len(v) < 5+int(v[3]) {
				return bad("MP_REACH_NLRI")
			}
			u.Reach = v[5+int(v[3]):]
		case 15: // AFI(2) SAFI(1) withdrawn NLRI
			if len(v) < 3 {
				return bad("MP_UNREACH_NLRI")
			}
			u.Unreach = v[3:]
		}
		attrs = attrs[hl+n:]
	}
	return u, nil
}

// flowNLRICount counts the FlowSpec NLRIs in nlri (RFC 8955 §4.1: each
// starts with a 1-octet length, or 2 octets 0xfnnn for 240 and more).
func flowNLRICount(nlri []byte) (int, error) {
	n := 0
	for len(nlri) > 0 {
		l, hl := int(nlri[0]), 1
		if l >= 0xf0 {
			if len(nlri) < 2 {
				return n, fmt.Errorf("truncated FlowSpec NLRI length: %x", nlri)
			}
			l, hl = int(be.BigEndian.Uint16(nlri)&0x0fff), 2
		}
		if len(nlri) < hl+l {
			return n, fmt.Errorf("truncated FlowSpec NLRI: %x", nlri)
		}
		nlri = nlri[hl+l:]
		n++
	}
	return n, nil
}

func TestFlowNLRICount(t *testing.T) {
	long := append([]byte{0xf1, 0x00}, make([]byte, 256)...) // 2-octet length form, 256 bytes
	for _, c := range []struct {
		nlri []byte
		n    int
		bad  bool
	}{
		{nil, 0, false},
		{[]byte{0x05, 0x01, 0x18, 0x0a, 0x00, 0x01}, 1, false},
		{append([]byte{0x05, 0x01, 0x18, 0x0a, 0x00, 0x01}, long...), 2, false},
		{[]byte{0x05, 0x01}, 0, true},
		{[]byte{0xf1}, 0, true},
	} {
		n, err := flowNLRICount(c.nlri)
		if n != c.n || (err != nil) != c.bad {
			t.Errorf("flowNLRICount(%x) = %d, %v; want %d, error %v", c.nlri, n, err, c.n, c.bad)
		}
	}
}
