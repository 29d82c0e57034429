package notify

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/clock"
)

const secret = "0123456789abcdef0123456789abcdef"

// receiver is a webhook receiver that can be down (503) or stuck.
type receiver struct {
	t        *testing.T
	down     atomic.Bool
	refuseID atomic.Uint64 // the delivery answered 400
	block    chan struct{}
	attempts atomic.Int64

	mu   sync.Mutex
	got  []Payload
	text []string
	more chan struct{}
}

func newReceiver(t *testing.T) (*receiver, *httptest.Server) {
	r := &receiver{t: t, more: make(chan struct{}, 1)}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.attempts.Add(1)
	if r.block != nil {
		select {
		case <-r.block:
		case <-req.Context().Done():
			return
		}
	}
	if r.down.Load() {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	body, _ := io.ReadAll(req.Body)
	if id := r.refuseID.Load(); id != 0 && req.Header.Get(HeaderDelivery) == strconv.FormatUint(id, 10) {
		http.Error(w, "malformed", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	if sig := req.Header.Get(HeaderSignature); sig != "" {
		want := Sign(secret, req.Header.Get(HeaderTimestamp), body)
		if !hmac.Equal([]byte(sig), []byte(want)) {
			r.t.Errorf("signature %s, want %s", sig, want)
		}
		var p Payload
		if err := json.Unmarshal(body, &p); err != nil {
			r.t.Errorf("payload: %v", err)
		}
		if req.Header.Get(HeaderDelivery) != strconv.FormatUint(p.ID, 10) || req.Header.Get(HeaderEvent) != string(p.Kind) {
			r.t.Errorf("headers %v do not match payload %+v", req.Header, p)
		}
		r.got = append(r.got, p)
	} else {
		var m map[string]string
		_ = json.Unmarshal(body, &m)
		r.text = append(r.text, m["text"])
	}
	r.mu.Unlock()
	select {
	case r.more <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusNoContent)
}

// waitFor waits until cond holds, on the receiver's deliveries.
func (r *receiver) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.more:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func event(i int) Event {
	return Event{Kind: PeerDown, Summary: "peer " + strconv.Itoa(i) + " down", Peer: &Peer{Address: "192.0.2.1"}}
}

// watch makes n signal each recorded attempt on the returned channel.
func watch(n *Notifier) <-chan struct{} {
	c := make(chan struct{}, 1)
	n.settled = func() {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	return c
}

// waitStatus waits until the first target's status satisfies cond.
func waitStatus(t *testing.T, n *Notifier, settled <-chan struct{}, cond func(TargetStatus) bool) TargetStatus {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if st := n.Status()[0]; cond(st) {
			return st
		}
		select {
		case <-settled:
		case <-deadline:
			t.Fatalf("timed out; status %+v", n.Status()[0])
		}
	}
}

func start(t *testing.T, n *Notifier) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = n.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// A receiver that is down for a while gets every event afterwards, once
// and in order, with retries paced by the backoff on the injected clock.
func TestDownReceiverGetsEveryEventInOrder(t *testing.T) {
	r, srv := newReceiver(t)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	n := New(hclog.NewNullLogger(), clk, "ams1", []Target{{Name: "w", Kind: KindWebhook, URL: srv.URL, Secret: secret}},
		WithBackoff(time.Second, 8*time.Second))
	settled := watch(n)
	r.down.Store(true)
	start(t, n)
	for i := range 10 {
		n.Notify(event(i))
	}
	// Four failed attempts: each arms the retry timer, which the test
	// fires; the waits double up to the cap.
	var waits []time.Duration
	for range 4 {
		<-clk.Armed()
		at, ok := clk.Next()
		if !ok {
			t.Fatal("no retry armed")
		}
		waits = append(waits, at.Sub(clk.Now()))
		st := n.Status()[0]
		if st.Delivered != 0 || st.Queued != 10 || st.LastError == "" {
			t.Fatalf("while down: %+v", st)
		}
		clk.Set(at)
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}; !equalDurations(waits, want) {
		t.Errorf("backoff %v, want %v", waits, want)
	}
	<-clk.Armed()
	r.down.Store(false)
	at, _ := clk.Next()
	clk.Set(at)
	r.waitFor(t, "ten deliveries", func() bool { return len(r.got) == 10 })
	for i, p := range r.got {
		if p.ID != uint64(i+1) || p.Summary != event(i).Summary || p.Site != "ams1" || p.Peer == nil {
			t.Errorf("delivery %d = %+v", i, p)
		}
	}
	st := waitStatus(t, n, settled, func(st TargetStatus) bool { return st.Queued == 0 })
	if st.Delivered != 10 || st.Retries != 5 || st.Dropped != 0 {
		t.Errorf("status after: %+v", st)
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The queue bound holds: the oldest events are dropped, counted, and the
// next delivery says how many.
func TestQueueBound(t *testing.T) {
	r, srv := newReceiver(t)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	n := New(hclog.NewNullLogger(), clk, "ams1", []Target{{Name: "w", Kind: KindWebhook, URL: srv.URL, Secret: secret, Queue: 5}})
	for i := range 20 {
		n.Notify(event(i))
	}
	if st := n.Status()[0]; st.Queued != 5 || st.Dropped != 15 {
		t.Fatalf("status: %+v", st)
	}
	start(t, n)
	r.waitFor(t, "five deliveries", func() bool { return len(r.got) == 5 })
	for i, p := range r.got {
		if p.ID != uint64(16+i) {
			t.Errorf("delivery %d has id %d, want %d", i, p.ID, 16+i)
		}
		if want := map[bool]uint64{true: 15}[i == 0]; p.DroppedBefore != want {
			t.Errorf("delivery %d: dropped_before %d, want %d", i, p.DroppedBefore, want)
		}
	}
}

// Notify never blocks, whatever the receiver does: with a receiver that
// never answers, a hundred thousand events are queued up to the bound and
// the rest dropped, and the calls return.
func TestNotifyNeverBlocks(t *testing.T) {
	r, srv := newReceiver(t)
	r.block = make(chan struct{})
	defer close(r.block)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	n := New(hclog.NewNullLogger(), clk, "ams1", []Target{{Name: "w", Kind: KindWebhook, URL: srv.URL, Secret: secret, Queue: 100}})
	start(t, n)
	for i := range 100_000 {
		n.Notify(event(i))
	}
	st := n.Status()[0]
	if st.Queued > 100 || st.Dropped < 100_000-101 {
		t.Errorf("status: %+v", st)
	}
}

// A receiver's permanent refusal drops that event (counted as failed) and
// delivery goes on with the next.
func TestPermanentRefusalSkipsTheEvent(t *testing.T) {
	r, srv := newReceiver(t)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	n := New(hclog.NewNullLogger(), clk, "ams1", []Target{{Name: "w", Kind: KindWebhook, URL: srv.URL, Secret: secret}})
	settled := watch(n)
	r.refuseID.Store(1)
	n.Notify(event(0))
	n.Notify(event(1))
	start(t, n)
	r.waitFor(t, "the next event", func() bool { return len(r.got) == 1 })
	if st := waitStatus(t, n, settled, func(st TargetStatus) bool { return st.Queued == 0 }); st.Failed != 1 || st.Delivered != 1 {
		t.Errorf("status %+v", st)
	}
	if r.got[0].ID != 2 {
		t.Errorf("delivered %+v, want id 2", r.got[0])
	}
}

// A Slack target gets a text message; a target with Kinds only those.
func TestSlackAndKinds(t *testing.T) {
	r, srv := newReceiver(t)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	n := New(hclog.NewNullLogger(), clk, "ams1", []Target{{Name: "s", Kind: KindSlack, URL: srv.URL, Kinds: []Kind{IncidentOpened}}})
	settled := watch(n)
	start(t, n)
	n.Notify(event(0))
	n.Notify(Event{Kind: IncidentOpened, Summary: "UDP flood on 192.0.2.10/32", Incident: &Incident{ID: 7}})
	r.waitFor(t, "the slack message", func() bool { return len(r.text) == 1 })
	if want := "[ams1] incident.opened: UDP flood on 192.0.2.10/32"; r.text[0] != want {
		t.Errorf("text %q, want %q", r.text[0], want)
	}
	if st := waitStatus(t, n, settled, func(st TargetStatus) bool { return st.Queued == 0 }); st.Delivered != 1 {
		t.Errorf("status %+v", st)
	}
}

// A reload keeps an unchanged target's queue and counters.
func TestSetTargetsKeepsUnchanged(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	a := Target{Name: "a", Kind: KindWebhook, URL: "http://127.0.0.1:1/", Secret: secret}
	b := Target{Name: "b", Kind: KindSlack, URL: "http://127.0.0.1:2/"}
	n := New(hclog.NewNullLogger(), clk, "ams1", []Target{a, b})
	n.Notify(event(0))
	b.URL = "http://127.0.0.1:3/"
	n.SetTargets([]Target{a, b})
	st := n.Status()
	if st[0].Queued != 1 || st[1].Queued != 0 {
		t.Errorf("after reload: %+v", st)
	}
}
