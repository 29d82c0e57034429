package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/store"
)

// setLarge stores rule id as one change, active, targeting sites site
// names of 100 bytes each: a rule whose event is about 100*sites bytes.
func (f *fakeFeed) setLarge(t *testing.T, id int64, sites int) {
	t.Helper()
	f.set(id, store.Active)
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.rules[id]
	for i := range sites {
		r.Sites = append(r.Sites, fmt.Sprintf("site-%06d-%s", i, strings.Repeat("x", 88)))
	}
	f.rules[id] = r
	f.rev++
}

// ringBytes is what the ring's events hold, counted by the test itself.
func ringBytes(e *Events) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.ring {
		n += len(ev.data)
	}
	return n
}

// The events kept for reconnecting clients are bounded by bytes, not
// only by count: a thousand updates of a rule with a 16 KB event each
// keep at most DefaultEventRingBytes (the count alone kept 16 MB), and
// the newest are still replayed.
func TestEventsRingBoundedByBytes(t *testing.T) {
	feed := newFakeFeed()
	e, _, url := eventsServer(t, feed, nil)
	ctx := context.Background()
	const updates = DefaultEventRing
	for range updates {
		feed.setLarge(t, 1, 160)
		e.poll(ctx)
	}
	held := ringBytes(e)
	t.Logf("%d events of about 16 KB: the ring holds %d bytes", updates, held)
	if held > DefaultEventRingBytes || held < DefaultEventRingBytes/2 {
		t.Errorf("the ring holds %d bytes of events, want at most DefaultEventRingBytes (%d) and close to it", held, DefaultEventRingBytes)
	}
	if got := e.HeldBytes(); got < held || got > DefaultEventRingBytes {
		t.Errorf("HeldBytes = %d, want between the data held (%d) and %d", got, held, DefaultEventRingBytes)
	}
	last := e.lastID()
	s := openStream(t, url, strconv.FormatUint(last-3, 10))
	for want := last - 2; want <= last; want++ {
		if ev := s.next(); ev.id != want || ruleOf(t, ev).ID != 1 {
			t.Fatalf("replay: event %d %s, want rule event %d", ev.id, ev.typ, want)
		}
	}
}

// A rule event larger than DefaultMaxEventBytes is kept and sent as the
// rule's id and state with a note saying where to read it, not whole;
// one below the cap is sent whole.
func TestEventsLargeRuleSentReduced(t *testing.T) {
	feed := newFakeFeed()
	e, _, url := eventsServer(t, feed, nil)
	ctx := context.Background()
	s := openStream(t, url, "")
	s.next()                  // hello
	feed.setLarge(t, 7, 2000) // about 200 KB of sites
	e.poll(ctx)
	ev := s.next()
	var got map[string]any
	if err := json.Unmarshal([]byte(ev.data), &got); err != nil || ev.typ != EventRule {
		t.Fatalf("event %s %q: %v", ev.typ, ev.data, err)
	}
	note, _ := got["note"].(string)
	if len(ev.data) > 1024 || got["id"] != float64(7) || got["state"] != "active" || got["truncated"] != true ||
		!strings.Contains(note, "max_event_bytes") || !strings.Contains(note, "GET /v1/rules/7") {
		t.Errorf("a 200 KB rule's event (%d bytes): %.300s; want id, state, truncated and a note naming max_event_bytes and GET /v1/rules/7", len(ev.data), ev.data)
	}
	if held := ringBytes(e); held > 1024 {
		t.Errorf("the ring holds %d bytes for one reduced event", held)
	}
	feed.setLarge(t, 8, 300) // about 30 KB: whole
	e.poll(ctx)
	if r := ruleOf(t, s.next()); r.ID != 8 || len(r.Sites) != 300 {
		t.Errorf("a 30 KB rule's event: rule %d with %d sites, want rule 8 whole", r.ID, len(r.Sites))
	}
}

// A stream that takes nothing is closed once its queue holds more than
// the ring's bytes, long before subscriberBuffer events: a slow consumer
// cannot make the daemon buffer without bound for it.
func TestEventsSlowStreamBoundedByBytes(t *testing.T) {
	feed := newFakeFeed()
	e := NewEvents(nil, feed, nil, nil)
	ctx := context.Background()
	e.poll(ctx)
	_, slow, refused := e.subscribe(streamOwner{actor: "slow"}, 0, false)
	if refused != nil {
		t.Fatal(refused)
	}
	n := 0
	for n < subscriberBuffer/2 {
		feed.setLarge(t, 1, 600) // about 60 KB
		e.poll(ctx)
		n++
		select {
		case <-slow.gone:
			if p := slow.pending.Load(); p > DefaultEventRingBytes {
				t.Errorf("the dropped stream's queue held %d bytes, more than %d", p, DefaultEventRingBytes)
			}
			t.Logf("dropped after %d events of about 60 KB", n)
			return
		default:
		}
	}
	t.Fatalf("a stream that took none of %d events of 60 KB (%d bytes queued) is still open", n, slow.pending.Load())
}

// A client that stops reading (its TCP window full) is dropped by the
// write deadline instead of holding its handler, its connection and its
// queued events forever: its stream stops counting.
func TestEventsStalledClientIsDropped(t *testing.T) {
	feed := newFakeFeed()
	e, _, url := eventsServer(t, feed, nil)
	e.writeTimeout = 200 * time.Millisecond
	ctx := context.Background()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A small window: the daemon's socket buffer takes the rest.
	c.(*net.TCPConn).SetReadBuffer(4096)
	// Read the response head and never anything after it.
	fmt.Fprintf(c, "GET /v1/events HTTP/1.1\r\nHost: rk\r\n\r\n")
	br := bufio.NewReaderSize(c, 1024)
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("stream: %q %v", line, err)
	}
	waitMoved(t, "the stream is open", e.open.moved, func() bool { return e.openStreams() == 1 })
	// 18 MB: more than the socket buffers take, so the handler blocks in
	// a write; the hub drops the stream once its queue is full.
	for range 300 {
		feed.setLarge(t, 1, 600)
		e.poll(ctx)
	}
	waitMoved(t, "the stalled stream closed", e.open.moved, func() bool { return e.openStreams() == 0 })
}

// openStreams counts the open streams, both sides.
func (e *Events) openStreams() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.open.tcp + e.open.socket
}

// waitMoved waits for cond, looking again each time moved signals (a
// stream or connection opened or closed); it fails the test after 30 s.
func waitMoved(t *testing.T, what string, moved <-chan struct{}, cond func() bool) {
	t.Helper()
	limit := time.NewTimer(30 * time.Second)
	defer limit.Stop()
	for !cond() {
		select {
		case <-moved:
		case <-limit.C:
			t.Fatalf("%s: not within 30 s", what)
		}
	}
}

// Event streams are capped per token and in total on the TCP listener,
// with a 429 naming the limit and its setting (and the connection
// closed); the control socket's streams count apart, so that it keeps
// working when the TCP side is full; a closed stream frees its place.
func TestEventStreamCaps(t *testing.T) {
	e := NewEvents(nil, nil, nil, nil, WithStreamLimits(StreamLimits{PerToken: 2, Total: 3, NoFile: 300}))
	srv := New(nil, nil, nil, nil, WithEvents(e))
	ts, err := newTokenSet([]Token{
		{Name: "grafana", Role: RoleRead, Secret: "grafana-secret-0123"},
		{Name: "noc", Role: RoleRead, Secret: "noc-secret-0123456"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Closed after the streams (cleanups run last first).
	tcp := httptest.NewServer(srv.tcpHandler(ts))
	t.Cleanup(tcp.Close)
	sock := httptest.NewServer(srv.Handler())
	t.Cleanup(sock.Close)
	e.poll(context.Background())

	open := func(url, secret string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url+"/v1/events", nil)
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode == http.StatusOK {
			return resp, ""
		}
		body, _ := io.ReadAll(resp.Body)
		if !resp.Close {
			t.Error("a refused stream keeps its connection (no Connection: close)")
		}
		return resp, fmt.Sprintf("%d %s", resp.StatusCode, body)
	}
	refusedWith := func(what, got string, want ...string) {
		t.Helper()
		if !strings.HasPrefix(got, "429 ") || !strings.Contains(got, `"code":"`+CodeTooManyStreams+`"`) {
			t.Errorf("%s: %q, want 429 %s", what, got, CodeTooManyStreams)
		}
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", what, got, w)
			}
		}
	}
	first, refused := open(tcp.URL, "grafana-secret-0123")
	if refused != "" {
		t.Fatal(refused)
	}
	if _, refused := open(tcp.URL, "grafana-secret-0123"); refused != "" {
		t.Fatal(refused)
	}
	_, refused = open(tcp.URL, "grafana-secret-0123")
	refusedWith("a third stream of one token", refused, `token \"grafana\" has 2 event streams open`, "max_event_streams_per_token")
	if _, refused := open(tcp.URL, "noc-secret-0123456"); refused != "" {
		t.Fatal(refused)
	}
	_, refused = open(tcp.URL, "noc-secret-0123456")
	refusedWith("a fourth stream on the listener", refused, "has 3 event streams open", "[api] max_event_streams", "open-file limit, here 300")

	// The control socket still opens streams.
	for range 3 {
		if _, refused := open(sock.URL, ""); refused != "" {
			t.Fatalf("the control socket while the TCP listener is full: %s", refused)
		}
	}
	_, refused = open(sock.URL, "")
	refusedWith("a fourth stream on the control socket", refused, "control socket has 3", "max_event_streams")

	// A closed stream frees its place.
	first.Body.Close()
	waitMoved(t, "grafana's closed stream freed its place", e.open.moved, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.open.byActor["grafana"] == 1
	})
	if _, refused := open(tcp.URL, "noc-secret-0123456"); refused != "" {
		t.Errorf("after a stream closed: %s", refused)
	}
}

// The TCP listener holds at most its connection limit: one more
// connection is closed at once (its descriptor goes back to the rest of
// the daemon), and a closed one frees its place.
func TestTCPConnectionCap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ll := newLimitListener(ln, 2, nil)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go hs.Serve(ll)
	defer hs.Close()

	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	answers := func(c net.Conn) bool {
		c.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: rk\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}
	a, b := dial(), dial()
	if !answers(a) || !answers(b) {
		t.Fatal("the first two connections are not served")
	}
	if n := ll.Open(); n != 2 {
		t.Fatalf("%d connections open, want 2", n)
	}
	if answers(dial()) {
		t.Error("a third connection was served with a limit of 2")
	}
	if n := ll.Open(); n != 2 {
		t.Errorf("%d connections open after the refusal, want 2", n)
	}
	a.Close()
	waitMoved(t, "a closed connection freed its place", ll.moved, func() bool { return ll.Open() == 1 })
	if !answers(dial()) {
		t.Error("a connection after one closed is not served")
	}
}
