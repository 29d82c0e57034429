package rawbgp

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"testing"
	"time"
)

func TestFlowSpecNLRIs(t *testing.T) {
	long := make([]byte, 300) // 2-octet length form: 0xf1 0x2c
	nlri := append([]byte{0x05, 0x01, 0x18, 0xc0, 0x00, 0x02, 0xf1, 0x2c}, long...)
	attrs := append(Attr(FlagTransitive, AttrOrigin, []byte{0}),
		Attr(FlagOptional|FlagExtended, AttrMPReach, MPReach(IPv6FlowSpec, nlri))...)
	f, n, err := FlowSpecNLRIs(Update(nil, attrs, nil))
	if err != nil || f != IPv6FlowSpec || n != 2 {
		t.Fatalf("FlowSpecNLRIs = %v, %d, %v; want ipv6-flowspec, 2, nil", f, n, err)
	}
	if _, n, err := FlowSpecNLRIs(Update(nil, Attr(FlagTransitive, AttrOrigin, []byte{0}), nil)); err != nil || n != 0 {
		t.Fatalf("UPDATE without MP_REACH: %d, %v", n, err)
	}
	// An NLRI claiming more than is there is an error, not a count.
	bad := Attr(FlagOptional, AttrMPReach, MPReach(IPv4FlowSpec, []byte{0x05, 0x01}))
	if _, _, err := FlowSpecNLRIs(Update(nil, bad, nil)); err == nil {
		t.Fatal("truncated NLRI accepted")
	}
	unreach := Attr(FlagOptional, AttrMPUnreach, append([]byte{0, 1, 133}, 0x05, 0x01, 0x18, 0xc0, 0x00, 0x02, 0x03, 0x01, 0x08, 0x0a))
	if f, n, err := FlowSpecWithdrawn(Update(nil, unreach, nil)); err != nil || f != IPv4FlowSpec || n != 2 {
		t.Fatalf("FlowSpecWithdrawn = %v, %d, %v; want ipv4-flowspec, 2, nil", f, n, err)
	}
	if _, n, err := FlowSpecNLRIs(Update(nil, unreach, nil)); err != nil || n != 0 {
		t.Fatalf("FlowSpecNLRIs counted withdrawals: %d, %v", n, err)
	}
	// A lying Total Path Attribute Length is an error.
	if _, _, err := FlowSpecNLRIs(UpdateWithAttrLen(nil, len(attrs)+1, attrs, nil)); err == nil {
		t.Fatal("overlong Total Path Attribute Length accepted")
	}
}

func TestOpenBody(t *testing.T) {
	b := Open{ASN: 4200000000, HoldTime: 90, RouterID: netip.MustParseAddr("192.0.2.1"),
		Families: []Family{IPv4FlowSpec}, RouteRefresh: true}.Body()
	want := []byte{4, 0x5b, 0xa0, 0, 90, 192, 0, 2, 1, // version, AS_TRANS, hold, id
		16, 2, 14, // one capabilities parameter of 14 octets
		1, 4, 0, 1, 0, 133, // multiprotocol ipv4-flowspec
		2, 0, // route refresh
		65, 4, 0xfa, 0x56, 0xea, 0x00} // 4-octet AS 4200000000
	if !bytes.Equal(b, want) {
		t.Fatalf("OPEN body\n got %x\nwant %x", b, want)
	}
}

// Handshake, Send and Read against a peer on loopback that answers like a
// BGP speaker, then sends a NOTIFICATION.
func TestConn(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		peer := &Conn{c: c, r: nil}
		peer.r = newReader(c)
		dl := time.Now().Add(5 * time.Second)
		if m, err := peer.Read(dl); err != nil || m.Type != MsgOpen {
			return
		}
		peer.Send(MsgOpen, Open{ASN: 65000, HoldTime: 90, RouterID: netip.MustParseAddr("127.0.0.1")}.Body())
		peer.Send(MsgKeepalive, nil)
		if m, err := peer.Read(dl); err != nil || m.Type != MsgKeepalive {
			return
		}
		if m, err := peer.Read(dl); err != nil || m.Type != MsgUpdate {
			return
		}
		peer.Send(MsgNotification, []byte{3, 1})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, netip.MustParseAddr("127.0.0.1"), netip.MustParseAddrPort(l.Addr().String()), "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dl := time.Now().Add(5 * time.Second)
	if err := c.Handshake(Open{ASN: 65010, HoldTime: 90, RouterID: netip.MustParseAddr("127.0.0.2")}, dl); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(MsgUpdate, Update(nil, nil, nil)); err != nil {
		t.Fatal(err)
	}
	m, err := c.Read(dl)
	if err != nil || m.Type != MsgNotification {
		t.Fatalf("read %v, %v; want a NOTIFICATION", m, err)
	}
	n, err := ParseNotification(m.Body)
	if err != nil || n.Code != 3 || n.Subcode != 1 {
		t.Fatalf("notification %v, %v", n, err)
	}
}
