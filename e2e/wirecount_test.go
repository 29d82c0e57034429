package e2e

import (
	bin "encoding/binary"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
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
	w := &wireCounter{ln: ln, Addr: listenAddr, Port: ln.Addr().(*net.TCPAddr).Port}
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
		if hdr[18] == 2 {
			w.updates.Add(1)
		}
		if _, err := dst.Write(hdr); err != nil {
			return
		}
		if _, err := dst.Write(buf[:n-19]); err != nil {
			return
		}
	}
}

// Updates returns the UPDATE messages relayed so far.
func (w *wireCounter) Updates() int64 { return w.updates.Load() }

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
