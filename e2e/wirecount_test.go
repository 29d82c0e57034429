package e2e

import (
	bin "encoding/binary"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// wireCounter is a TCP relay on loopback between a BGP speaker and its
// peer that counts the BGP messages the speaker sends, by type. The
// speaker is configured with the relay's address as its neighbor; the
// relay dials the peer from the speaker's own address (src), so the peer
// sees the neighbor it expects. It counts what crosses the wire, whatever
// the sender (ribkeeper, raw GoBGP, ExaBGP).
type wireCounter struct {
	ln      net.Listener
	Addr    string // where the speaker connects
	Port    int
	updates atomic.Int64 // UPDATE messages from the speaker
	msgs    atomic.Int64 // all messages from the speaker
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn // closed at cleanup, whoever still holds a session
	// reach counts the routes the speaker's UPDATEs announced (see
	// reachOf), under mu; moved is closed and replaced each time it
	// grows, for waitReach.
	reach int64
	moved chan struct{}
}

func (w *wireCounter) track(cs ...net.Conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.conns = append(w.conns, cs...)
}

// startWireCounter listens on listenAddr (a loopback address of its own)
// and relays every connection to target, dialing from src.
func startWireCounter(t testing.TB, listenAddr, src, target string) *wireCounter {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(listenAddr, "0"))
	if err != nil {
		t.Fatalf("wire counter: %v", err)
	}
	w := &wireCounter{ln: ln, Addr: listenAddr, Port: ln.Addr().(*net.TCPAddr).Port, moved: make(chan struct{})}
	t.Cleanup(func() {
		ln.Close()
		w.mu.Lock()
		for _, c := range w.conns {
			c.Close()
		}
		w.mu.Unlock()
		w.wg.Wait()
	})
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
			out, err := d.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			w.track(in, out)
			w.wg.Add(2)
			go func() { defer w.wg.Done(); w.count(out, in) }()
			go func() {
				defer w.wg.Done()
				io.Copy(in, out)
				in.Close()
			}()
		}
	}()
	return w
}

// count copies the speaker's stream to the peer, message by message.
func (w *wireCounter) count(dst, src net.Conn) {
	defer dst.Close()
	hdr := make([]byte, 19)
	buf := make([]byte, 65535)
	for {
		if _, err := io.ReadFull(src, hdr); err != nil {
			return
		}
		n := int(bin.BigEndian.Uint16(hdr[16:18]))
		if n < 19 || n > 65535 {
			return // not BGP: the peer will say so
		}
		if _, err := io.ReadFull(src, buf[:n-19]); err != nil {
			return
		}
		w.msgs.Add(1)
		if _, err := dst.Write(hdr); err != nil {
			return
		}
		if _, err := dst.Write(buf[:n-19]); err != nil {
			return
		}
		if hdr[18] == 2 {
			w.updates.Add(1)
			if r := reachOf(buf[:n-19]); r > 0 {
				w.mu.Lock()
				w.reach += int64(r)
				close(w.moved)
				w.moved = make(chan struct{})
				w.mu.Unlock()
			}
		}
	}
}

// Updates returns the UPDATE messages relayed so far.
func (w *wireCounter) Updates() int64 { return w.updates.Load() }

// Reach returns the routes announced through the relay so far.
func (w *wireCounter) Reach() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reach
}

// waitReach returns once the speaker has announced n routes through the
// relay (Reach), after each UPDATE was passed on to the peer. The
// benchmarks wait on it before they ask BIRD whether it holds every
// route: a count walks BIRD's whole table (20 counts at 100,000 routes
// took BIRD 600 ms of CPU, and a table of a million is ten times larger),
// so polling BIRD for the whole load took a share of the two cores the
// run measures, and more of it the longer the run.
func (w *wireCounter) waitReach(t testing.TB, n int64, timeout time.Duration) {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		w.mu.Lock()
		got, moved := w.reach, w.moved
		w.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-moved:
		case <-timer.C:
			t.Fatalf("wire counter: %d routes announced after %v, want %d", got, timeout, n)
		}
	}
}

// reachOf counts the routes an UPDATE body announces: the IPv4 NLRI field
// and the NLRI of each MP_REACH_NLRI attribute (unicast and FlowSpec
// encodings; others count 0). A malformed body counts what parsed.
func reachOf(body []byte) int {
	if len(body) < 2 {
		return 0
	}
	wl := int(bin.BigEndian.Uint16(body))
	if 2+wl+2 > len(body) {
		return 0
	}
	attrs := body[2+wl+2:]
	al := int(bin.BigEndian.Uint16(body[2+wl:]))
	if al > len(attrs) {
		return 0
	}
	n := countPrefixes(attrs[al:])
	for a := attrs[:al]; len(a) >= 3; {
		flags, typ := a[0], a[1]
		hl, vl := 3, int(a[2])
		if flags&0x10 != 0 {
			if len(a) < 4 {
				break
			}
			hl, vl = 4, int(bin.BigEndian.Uint16(a[2:]))
		}
		if hl+vl > len(a) {
			break
		}
		v := a[hl : hl+vl]
		a = a[hl+vl:]
		if typ != 14 || len(v) < 5 {
			continue // not MP_REACH_NLRI
		}
		safi, nhl := v[2], int(v[3])
		if 4+nhl+1 > len(v) {
			continue
		}
		nlri := v[4+nhl+1:]
		switch safi {
		case 1, 2:
			n += countPrefixes(nlri)
		case 133, 134:
			n += countFlows(nlri)
		}
	}
	return n
}

// countPrefixes counts (length in bits, prefix) entries.
func countPrefixes(b []byte) int {
	n := 0
	for len(b) > 0 {
		l := 1 + (int(b[0])+7)/8
		if l > len(b) {
			break
		}
		b, n = b[l:], n+1
	}
	return n
}

// countFlows counts FlowSpec NLRIs (RFC 8955 section 4: a one-byte
// length below 240, otherwise two bytes, 0xfnnn).
func countFlows(b []byte) int {
	n := 0
	for len(b) > 0 {
		l, h := int(b[0]), 1
		if l >= 0xf0 {
			if len(b) < 2 {
				break
			}
			l, h = int(bin.BigEndian.Uint16(b)&0x0fff), 2
		}
		if h+l > len(b) {
			break
		}
		b, n = b[h+l:], n+1
	}
	return n
}

// TestWireCounterCounts relays a hand-made stream and counts it.
func TestWireCounterCounts(t *testing.T) {
	peer, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	w := startWireCounter(t, "127.0.0.1", "127.0.0.1", peer.Addr().String())
	got := make(chan int, 1)
	go func() {
		c, err := peer.Accept()
		if err != nil {
			got <- -1
			return
		}
		b, _ := io.ReadAll(c)
		got <- len(b)
	}()
	c, err := net.Dial("tcp", net.JoinHostPort(w.Addr, strconv.Itoa(w.Port)))
	if err != nil {
		t.Fatal(err)
	}
	msg := func(typ byte, body int) []byte {
		m := make([]byte, 19+body)
		for i := range 16 {
			m[i] = 0xff
		}
		bin.BigEndian.PutUint16(m[16:], uint16(19+body))
		m[18] = typ
		return m
	}
	var stream []byte
	stream = append(stream, msg(1, 10)...) // OPEN
	stream = append(stream, msg(4, 0)...)  // KEEPALIVE
	stream = append(stream, msg(2, 23)...) // UPDATE
	stream = append(stream, msg(2, 4)...)  // UPDATE
	if _, err := c.Write(stream); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if n := <-got; n != len(stream) {
		t.Fatalf("peer got %d bytes, want %d", n, len(stream))
	}
	if w.Updates() != 2 || w.msgs.Load() != 4 {
		t.Fatalf("counted %d updates of %d messages, want 2 of 4", w.Updates(), w.msgs.Load())
	}
}

// TestReachOf counts the routes of a hand-made UPDATE: one withdrawn
// prefix (not counted), an MP_REACH_NLRI with two FlowSpec NLRIs (one of
// them with a two-byte length) under an extended-length attribute, an
// MP_UNREACH_NLRI (not counted) and two IPv4 prefixes in the NLRI field.
func TestReachOf(t *testing.T) {
	long := make([]byte, 300) // a FlowSpec NLRI longer than 239 bytes
	flows := append([]byte{0xf1, 0x2c}, long...)
	flows = append(flows, 3, 1, 24, 10) // a three-byte NLRI: destination 10.0.0.0/24
	mp := []byte{0, 1, 133, 0, 0}       // AFI 1, SAFI 133, no next hop, reserved
	mp = append(mp, flows...)
	var attrs []byte
	attrs = append(attrs, 0x40, 1, 1, 0)                             // ORIGIN
	attrs = append(attrs, 0x90, 14, byte(len(mp)>>8), byte(len(mp))) // MP_REACH_NLRI, extended length
	attrs = append(attrs, mp...)
	attrs = append(attrs, 0x80, 15, 4, 0, 1, 133, 0) // MP_UNREACH_NLRI: AFI 1, SAFI 133, one empty NLRI
	var body []byte
	body = append(body, 0, 2, 8, 10) // withdrawn: 10.0.0.0/8
	body = append(body, byte(len(attrs)>>8), byte(len(attrs)))
	body = append(body, attrs...)
	body = append(body, 32, 192, 0, 2, 1, 24, 198, 51, 100) // 192.0.2.1/32, 198.51.100.0/24
	if got := reachOf(body); got != 4 {
		t.Fatalf("reachOf counted %d routes, want 4", got)
	}
	if got := reachOf(body[:len(body)-4]); got != 3 {
		t.Fatalf("reachOf of a body cut inside its last prefix counted %d, want 3", got)
	}
}
