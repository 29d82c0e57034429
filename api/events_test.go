package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
)

// fakeFeed is a desired state with revisions, as the store keeps them:
// every change is a history entry with the next revision.
type fakeFeed struct {
	mu      sync.Mutex
	reads   int // ChangedSince calls
	rev     int64
	changed map[int64]int64 // rule id → revision of its last change
	rules   map[int64]store.Rule
	down    bool
}

func newFakeFeed() *fakeFeed {
	return &fakeFeed{changed: map[int64]int64{}, rules: map[int64]store.Rule{}}
}

// set stores rule id with state st as one change.
func (f *fakeFeed) set(id int64, st store.State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rev++
	r, err := flowspec.Parse(fmt.Sprintf("match destination 10.%d.%d.%d/32 then discard", id>>16&255, id>>8&255, id&255))
	if err != nil {
		panic(err)
	}
	f.rules[id] = store.Rule{ID: id, Rule: r, Text: r.String(), State: st, Actor: "test"}
	f.changed[id] = f.rev
}

func (f *fakeFeed) Revision(ctx context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return 0, fmt.Errorf("database down: %w", store.ErrUnavailable)
	}
	return f.rev, nil
}

func (f *fakeFeed) ChangedSince(ctx context.Context, rev int64) (store.Delta, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return store.Delta{}, fmt.Errorf("database down: %w", store.ErrUnavailable)
	}
	f.reads++
	d := store.Delta{Next: max(f.rev, rev)}
	for id, at := range f.changed {
		if at <= rev {
			continue
		}
		if r := f.rules[id]; r.State == store.Active {
			d.Active = append(d.Active, r)
		} else {
			d.Gone = append(d.Gone, id)
		}
	}
	return d, nil
}

func (f *fakeFeed) Get(ctx context.Context, id int64) (store.Rule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.rules[id]
	if !ok {
		return store.Rule{}, store.ErrNotFound
	}
	return r, nil
}

// sse is one event as a client reads it.
type sse struct {
	id   uint64
	typ  string
	data string
}

// stream is an open GET /v1/events.
type stream struct {
	t      *testing.T
	resp   *http.Response
	r      *bufio.Reader
	cancel context.CancelFunc
}

// openStream opens the event stream at url, with Last-Event-ID lastID
// unless it is "". Reads fail the test after 30 s.
func openStream(t *testing.T, url, lastID string) *stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET /v1/events: %v", err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		t.Fatalf("GET /v1/events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &stream{t: t, resp: resp, r: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(s.close)
	return s
}

func (s *stream) close() {
	s.cancel()
	s.resp.Body.Close()
}

// next reads the next event (skipping comments and retry lines).
func (s *stream) next() sse {
	s.t.Helper()
	var ev sse
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			s.t.Fatalf("reading the event stream: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.typ != "" {
				return ev
			}
		case strings.HasPrefix(line, "id: "):
			id, err := strconv.ParseUint(strings.TrimPrefix(line, "id: "), 10, 64)
			if err != nil {
				s.t.Fatalf("bad id line %q", line)
			}
			ev.id = id
		case strings.HasPrefix(line, "event: "):
			ev.typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		}
	}
}

// eventsServer serves the API with an event stream over feed and peers.
func eventsServer(t *testing.T, feed RuleFeed, peers PeerFeed, opts ...EventsOption) (*Events, *Server, string) {
	t.Helper()
	start := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	e := NewEvents(nil, feed, peers, func() time.Time { return start }, opts...)
	srv := New(nil, nil, nil, nil, WithEvents(e))
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	e.poll(context.Background()) // the state events start from
	return e, srv, hs.URL
}

func ruleOf(t *testing.T, ev sse) Rule {
	t.Helper()
	if ev.typ != EventRule {
		t.Fatalf("event %d is %q (%s), want rule", ev.id, ev.typ, ev.data)
	}
	var r Rule
	if err := json.Unmarshal([]byte(ev.data), &r); err != nil {
		t.Fatalf("rule event data %q: %v", ev.data, err)
	}
	return r
}

// A client that reconnects with the id of the last event it read gets
// every event it missed, in order, then the live ones: nothing lost,
// nothing twice.
func TestEventsReconnectMissesNothing(t *testing.T) {
	feed := newFakeFeed()
	feed.set(1, store.Active) // before the stream: not an event
	e, _, url := eventsServer(t, feed, nil)
	ctx := context.Background()

	s := openStream(t, url, "")
	hello := s.next()
	if hello.typ != EventHello {
		t.Fatalf("first event %q, want hello", hello.typ)
	}
	feed.set(2, store.Active)
	e.poll(ctx)
	got := s.next()
	if r := ruleOf(t, got); r.ID != 2 || r.State != "active" || got.id != hello.id+1 {
		t.Fatalf("event %d: rule %d %s; want id %d, rule 2 active", got.id, r.ID, r.State, hello.id+1)
	}
	s.close()

	// Missed while disconnected: rule 3 added, rule 2 withdrawn, rule 1
	// expired.
	feed.set(3, store.Active)
	e.poll(ctx)
	feed.set(2, store.Withdrawn)
	e.poll(ctx)
	feed.set(1, store.Expired)
	e.poll(ctx)

	s = openStream(t, url, strconv.FormatUint(got.id, 10))
	want := []struct {
		id    int64
		state string
	}{{3, "active"}, {2, "withdrawn"}, {1, "expired"}}
	last := got.id
	for _, w := range want {
		ev := s.next()
		r := ruleOf(t, ev)
		if ev.id != last+1 || r.ID != w.id || r.State != w.state {
			t.Fatalf("replayed event %d: rule %d %s; want event %d: rule %d %s", ev.id, r.ID, r.State, last+1, w.id, w.state)
		}
		last = ev.id
	}
	// Then live, on the same stream.
	feed.set(4, store.Active)
	e.poll(ctx)
	if ev := s.next(); ev.id != last+1 || ruleOf(t, ev).ID != 4 {
		t.Fatalf("live event after the replay: %d %s %s", ev.id, ev.typ, ev.data)
	}

	// Reconnecting with the newest id replays nothing: the next event is
	// the next change.
	s.close()
	s = openStream(t, url, strconv.FormatUint(last+1, 10))
	feed.set(5, store.Active)
	e.poll(ctx)
	if ev := s.next(); ev.id != last+2 || ruleOf(t, ev).ID != 5 {
		t.Fatalf("after reconnecting up to date: %d %s %s", ev.id, ev.typ, ev.data)
	}
}

// An id older than the events kept, or not from this run of the daemon,
// gets reset (reload everything) carrying the newest id, and the stream
// goes on from there.
func TestEventsTooOldIDResets(t *testing.T) {
	feed := newFakeFeed()
	e, _, url := eventsServer(t, feed, nil, WithEventRing(4))
	ctx := context.Background()

	s := openStream(t, url, "")
	hello := s.next()
	s.close()
	for id := int64(1); id <= 10; id++ {
		feed.set(id, store.Active)
		e.poll(ctx)
	}
	newest := hello.id + 10

	for _, tc := range []struct {
		name, id string
	}{
		{"older than the ring", strconv.FormatUint(hello.id, 10)},
		{"from an earlier run", strconv.FormatUint(hello.id/2, 10)},
		{"from the future", strconv.FormatUint(newest+100, 10)},
	} {
		s := openStream(t, url, tc.id)
		ev := s.next()
		var d resetData
		if err := json.Unmarshal([]byte(ev.data), &d); err != nil || ev.typ != EventReset || ev.id != newest || d.ID != newest {
			t.Fatalf("%s: got %d %s %s; want reset with id %d", tc.name, ev.id, ev.typ, ev.data, newest)
		}
		s.close()
	}

	// The oldest kept event's predecessor is still a complete replay.
	s = openStream(t, url, strconv.FormatUint(newest-4, 10))
	for want := newest - 3; want <= newest; want++ {
		if ev := s.next(); ev.id != want || ev.typ != EventRule {
			t.Fatalf("replay: got %d %s, want rule event %d", ev.id, ev.typ, want)
		}
	}
	s.close()

	// After a reset the stream is live.
	s = openStream(t, url, strconv.FormatUint(hello.id, 10))
	if ev := s.next(); ev.typ != EventReset {
		t.Fatalf("got %s, want reset", ev.typ)
	}
	feed.set(11, store.Active)
	e.poll(ctx)
	if ev := s.next(); ev.id != newest+1 || ruleOf(t, ev).ID != 11 {
		t.Fatalf("after reset: %d %s %s", ev.id, ev.typ, ev.data)
	}

	req, _ := http.NewRequest("GET", url+"/v1/events", nil)
	req.Header.Set("Last-Event-ID", "yesterday")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("Last-Event-ID yesterday: %d, want 400", resp.StatusCode)
	}
}

// More rules changed at once than are sent one by one are one rules
// event; a store that could not be read at the start is a reset once it
// answers.
func TestEventsBulkAndStoreDown(t *testing.T) {
	feed := newFakeFeed()
	feed.down = true
	e, _, url := eventsServer(t, feed, nil)
	ctx := context.Background()
	s := openStream(t, url, "")
	s.next() // hello
	feed.mu.Lock()
	feed.down = false
	feed.mu.Unlock()
	e.poll(ctx)
	if ev := s.next(); ev.typ != EventReset || !strings.Contains(ev.data, fmt.Sprintf(`"id":%d`, ev.id)) {
		t.Fatalf("after the store came back: %d %s %s, want reset naming its id", ev.id, ev.typ, ev.data)
	}
	for id := int64(1); id <= maxRuleEvents+1; id++ {
		feed.set(id, store.Active)
	}
	e.poll(ctx)
	ev := s.next()
	var d rulesData
	if err := json.Unmarshal([]byte(ev.data), &d); err != nil || ev.typ != EventRules || d.Changed != maxRuleEvents+1 {
		t.Fatalf("bulk change: %s %s, want rules with changed %d", ev.typ, ev.data, maxRuleEvents+1)
	}
	// A large bulk change is not even read.
	feed.mu.Lock()
	reads := feed.reads
	feed.mu.Unlock()
	n := maxRuleEvents*maxEntriesPerRule + 1
	for id := range int64(n) {
		feed.set(1000+id, store.Active)
	}
	e.poll(ctx)
	ev = s.next()
	if err := json.Unmarshal([]byte(ev.data), &d); err != nil || ev.typ != EventRules || d.Changed != n {
		t.Fatalf("large bulk change: %s %s, want rules with changed %d", ev.typ, ev.data, n)
	}
	feed.mu.Lock()
	defer feed.mu.Unlock()
	if feed.reads != reads {
		t.Errorf("a bulk change of %d was read (%d reads)", n, feed.reads-reads)
	}
}

type fakePeers struct {
	mu    sync.Mutex
	peers []bgp.PeerStatus
}

func (f *fakePeers) Peers(ctx context.Context) ([]bgp.PeerStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.peers), nil
}

func (f *fakePeers) set(p ...bgp.PeerStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.peers = p
}

// Peer state changes are events; the peers seen at the start are not; a
// neighbor no longer configured is state removed. A reconcile pass that
// changed something is an event after the next poll.
func TestEventsPeersAndPasses(t *testing.T) {
	peers := &fakePeers{}
	peers.set(bgp.PeerStatus{Address: "192.0.2.1", ASN: 65001, State: "active"})
	e, _, url := eventsServer(t, nil, peers)
	ctx := context.Background()
	s := openStream(t, url, "")
	s.next() // hello

	peers.set(bgp.PeerStatus{Address: "192.0.2.1", ASN: 65001, State: "established"},
		bgp.PeerStatus{Address: "192.0.2.2", ASN: 65002, State: "idle"})
	e.poll(ctx)
	got := map[string]string{}
	for range 2 {
		ev := s.next()
		var p Peer
		if err := json.Unmarshal([]byte(ev.data), &p); err != nil || ev.typ != EventPeer {
			t.Fatalf("got %s %s, want peer", ev.typ, ev.data)
		}
		got[p.Address] = p.State
	}
	if got["192.0.2.1"] != "established" || got["192.0.2.2"] != "idle" {
		t.Fatalf("peer events %v", got)
	}
	e.poll(ctx) // nothing changed: no event

	var mx recorded
	rec := e.Recorder(&mx)
	rec.PassDone(reconcile.PassResult{Started: time.Now(), Skipped: true})
	rec.PassDone(reconcile.PassResult{Started: time.Now(), Added: 2})
	e.poll(ctx)
	peers.set(bgp.PeerStatus{Address: "192.0.2.1", ASN: 65001, State: "established"})
	e.poll(ctx)
	ev := s.next()
	var p Pass
	if err := json.Unmarshal([]byte(ev.data), &p); err != nil || ev.typ != EventPass || p.Added != 2 {
		t.Fatalf("got %s %s, want the pass that added 2", ev.typ, ev.data)
	}
	if ev := s.next(); ev.typ != EventPeer || !strings.Contains(ev.data, `"state":"removed"`) {
		t.Fatalf("got %s %s, want peer 192.0.2.2 removed", ev.typ, ev.data)
	}
	// A pass that changes nothing but adopts a rule announced ahead of
	// its commit is an event; the same level again is not.
	rec.PassDone(reconcile.PassResult{Started: time.Now(), Adopted: 1})
	rec.PassDone(reconcile.PassResult{Started: time.Now(), Adopted: 1})
	e.poll(ctx)
	rec.PassDone(reconcile.PassResult{Started: time.Now(), Adopted: 1})
	e.poll(ctx)
	rec.PassDone(reconcile.PassResult{Started: time.Now(), Adopted: 0})
	e.poll(ctx)
	for _, want := range []int{1, 0} {
		ev = s.next()
		if err := json.Unmarshal([]byte(ev.data), &p); err != nil || ev.typ != EventPass || p.Adopted != want {
			t.Fatalf("got %s %s, want the pass that adopted %d", ev.typ, ev.data, want)
		}
	}
	if mx.passes != 6 {
		t.Errorf("the next recorder heard %d passes, want 6", mx.passes)
	}
	if len(e.wake) != 1 {
		t.Errorf("a pass did not wake the event stream")
	}
}

type recorded struct{ passes int }

func (r *recorded) PassDone(reconcile.PassResult)     { r.passes++ }
func (r *recorded) Announced(flowspec.Family, string) {}
func (r *recorded) Withdrawn(flowspec.Family, string) {}
func (r *recorded) ExpiryLateness(time.Duration)      {}

// A scoped token's stream has only the rules inside its prefixes; for the
// others it gets the id alone, so that reconnecting resumes after them.
func TestEventsScoped(t *testing.T) {
	feed := newFakeFeed()
	e := NewEvents(nil, feed, nil, nil)
	srv := New(nil, nil, nil, nil, WithEvents(e))
	ts, err := newTokenSet([]Token{{Name: "customer-a", Role: RoleRead, Secret: "customer-a-secret-0123",
		Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/31")}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.tcpHandler(ts))
	defer hs.Close()
	ctx := context.Background()
	e.poll(ctx)

	req, _ := http.NewRequest("GET", hs.URL+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer customer-a-secret-0123")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	s := &stream{t: t, resp: resp, r: bufio.NewReader(resp.Body), cancel: func() {}}
	defer s.close()
	hello := s.next()
	feed.set(5, store.Active) // 10.0.0.5: outside
	e.poll(ctx)
	feed.set(1, store.Active) // 10.0.0.1: inside
	e.poll(ctx)
	ev := s.next()
	if r := ruleOf(t, ev); r.ID != 1 || ev.id != hello.id+2 {
		t.Fatalf("scoped stream: event %d rule %d, want event %d rule 1 only", ev.id, r.ID, hello.id+2)
	}
}

// With no stream open, wake-ups read nothing (a bulk load's passes cost
// no store read and no ListPeer); the next stream to open catches up, and
// a client resuming with Last-Event-ID gets what changed meanwhile. Run's
// wake-ups are driven by hand (step), so nothing here waits on time.
func TestEventsIdleReadsNothingAndCatchesUp(t *testing.T) {
	feed := newFakeFeed()
	e, _, url := eventsServer(t, feed, nil)
	ctx := context.Background()
	resume := e.lastID() // what a client that read everything so far holds

	feed.mu.Lock()
	reads := feed.reads
	feed.mu.Unlock()
	for i := int64(1); i <= 3; i++ {
		feed.set(i, store.Active)
		if !e.step(ctx) {
			t.Fatal("an idle wake-up failed")
		}
	}
	feed.mu.Lock()
	idleReads := feed.reads - reads
	feed.mu.Unlock()
	if idleReads != 0 {
		t.Errorf("%d change reads with no stream open, want 0", idleReads)
	}

	s := openStream(t, url, strconv.FormatUint(resume, 10))
	// Opening the stream asked for a wake-up; this is it.
	select {
	case <-e.wake:
	default:
		t.Fatal("opening a stream did not wake the hub")
	}
	if !e.step(ctx) {
		t.Fatal("the catch-up poll failed")
	}
	for want := int64(1); want <= 3; want++ {
		if r := ruleOf(t, s.next()); r.ID != want {
			t.Fatalf("caught-up event for rule %d, want %d", r.ID, want)
		}
	}
}
