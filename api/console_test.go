package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
)

// A client too slow to take its events is dropped (it reconnects with
// Last-Event-ID); closing the stream ends every stream.
func TestEventsSlowClientAndClose(t *testing.T) {
	e := NewEvents(nil, nil, nil, nil)
	_, slow, _ := e.subscribe(streamOwner{actor: "a"}, 0, false)
	_, fast, _ := e.subscribe(streamOwner{actor: "a"}, 0, false)
	for i := range subscriberBuffer + 1 {
		e.emit(EventRules, rulesData{Changed: i}, nil)
		if i < subscriberBuffer {
			ev := <-fast.ch
			fast.pending.Add(-int64(ev.size()))
		}
	}
	select {
	case <-slow.gone:
	default:
		t.Fatalf("a client that took none of %d events is still subscribed", subscriberBuffer+1)
	}
	select {
	case <-fast.gone:
		t.Fatal("a client that keeps up was dropped")
	default:
	}
	e.close()
	<-fast.gone
	if _, _, refused := e.subscribe(streamOwner{actor: "a"}, 0, false); refused == nil {
		t.Error("subscribed to a closed stream")
	}
}

// The stream of a running daemon ends when the daemon stops, and every
// write through the API wakes the stream.
func TestEventsRunEndsStreams(t *testing.T) {
	feed := newFakeFeed()
	e := NewEvents(nil, feed, nil, nil)
	srv := New(nil, nil, nil, nil, WithEvents(e))
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	ctx, cancel := context.WithCancel(context.Background())
	// The state events start from, before Run (whose first poll may
	// come after the change below: it then finds the change itself).
	e.poll(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()

	s := openStream(t, hs.URL, "")
	s.next() // hello
	feed.set(7, store.Active)
	e.Nudge() // as a write through the API does (TestEventsNudgedByWrites)
	if ev := s.next(); ev.typ != EventRule || ruleOf(t, ev).ID != 7 {
		t.Fatalf("got %s %s, want the rule", ev.typ, ev.data)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := io.ReadAll(s.r); err != nil {
		t.Fatalf("the stream did not end cleanly when the daemon stopped: %v", err)
	}
}

type fakeCounts struct {
	counts []store.Count
	byDest []store.DestinationCount // when set, counts are their sum
	drift  reconcile.DriftCounts
}

func (f *fakeCounts) Counts(context.Context) ([]store.Count, error) {
	if f.byDest != nil {
		var out []store.Count
		for _, c := range f.byDest {
			out = append(out, c.Count)
		}
		return out, nil
	}
	return f.counts, nil
}

func (f *fakeCounts) DestinationCounts(context.Context) ([]store.DestinationCount, error) {
	if f.byDest != nil {
		return f.byDest, nil
	}
	var out []store.DestinationCount
	for _, c := range f.counts {
		out = append(out, store.DestinationCount{Count: c})
	}
	return out, nil
}

func (f *fakeCounts) Drift() reconcile.DriftCounts { return f.drift }

// The series keeps one point per sample, oldest first, bounded; drift
// repairs are counted per sample.
func TestSeries(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	src := &fakeCounts{}
	peers := &fakePeers{}
	se := NewSeries(nil, SeriesSources{Rules: src, Drift: src, Peers: peers}, time.Minute, 3, func() time.Time { return now })
	ctx := context.Background()

	src.counts = []store.Count{{State: store.Active, N: 5, Announced: true}, {State: store.Active, N: 2}, {State: store.Withdrawn, N: 9}}
	src.drift = reconcile.DriftCounts{Readded: 2, OrphansWithdrawn: 1}
	se.Sample(ctx)
	now = now.Add(time.Minute)
	src.drift.Replaced = 4
	se.Sample(ctx)
	now = now.Add(time.Minute)
	se.Sample(ctx)
	now = now.Add(time.Minute)
	src.counts = nil
	src.drift.Readded = 3
	se.Sample(ctx)

	srv := New(nil, nil, nil, nil, WithSeries(se))
	w := httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/v1/series", nil))
	var body SeriesBody
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != 200 {
		t.Fatalf("GET /v1/series: %d %s", w.Code, w.Body)
	}
	if body.IntervalSeconds != 60 || len(body.Points) != 3 {
		t.Fatalf("series: %+v, want 3 points a minute apart", body)
	}
	start := time.Date(2026, 11, 24, 12, 1, 0, 0, time.UTC)
	want := []SeriesPoint{
		{At: start, Active: 7, Announced: 5, DriftRepairs: 4},
		{At: start.Add(time.Minute), Active: 7, Announced: 5},
		{At: start.Add(2 * time.Minute), DriftRepairs: 1},
	}
	for i, p := range body.Points {
		if !p.At.Equal(want[i].At) || p.Active != want[i].Active || p.Announced != want[i].Announced || p.DriftRepairs != want[i].DriftRepairs {
			t.Errorf("point %d = %+v, want %+v", i, p, want[i])
		}
	}
}
