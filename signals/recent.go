package signals

import (
	"context"
	"sync"
	"time"
)

// Record is one signal a way in received, as operators see it in the
// ring of recent signals: accepted by the Sink, or refused, and why. A
// refusal before the request could be read (a bad signature, a body that
// does not parse) has no valid Signal.Target.
type Record struct {
	// Seq numbers records in the order they were added, from 1.
	Seq uint64
	// Via is the kind of way in: "webhook", "alertmanager",
	// "fastnetmon", "gobgp".
	Via    string
	Signal Signal
	// Accepted is true when the Sink accepted the signal; Reason is why
	// it was not.
	Accepted bool
	Reason   string
}

// DefaultRecent is the number of records a Recent keeps by default.
const DefaultRecent = 1024

// Recent is a bounded ring of the last records: what detectors sent,
// kept so that operators (GET /v1/signals) and tests can see it. A record
// costs at most a Signal's bounds, so the ring's memory is bounded by
// its size. Safe for concurrent use.
type Recent struct {
	mu   sync.Mutex
	ring []Record
	next int // where the next record goes
	seq  uint64
}

// NewRecent returns a ring that keeps the last n records (DefaultRecent
// if n <= 0).
func NewRecent(n int) *Recent {
	if n <= 0 {
		n = DefaultRecent
	}
	return &Recent{ring: make([]Record, 0, n)}
}

// Add keeps r (its Seq is set here), dropping the oldest record when the
// ring is full.
func (rc *Recent) Add(r Record) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.seq++
	r.Seq = rc.seq
	if len(rc.ring) < cap(rc.ring) {
		rc.ring = append(rc.ring, r)
		return
	}
	rc.ring[rc.next] = r
	rc.next = (rc.next + 1) % len(rc.ring)
}

// List returns up to max records (all if max <= 0) for which keep is
// true (every one if keep is nil), newest first.
func (rc *Recent) List(keep func(Record) bool, max int) []Record {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := []Record{}
	n := len(rc.ring)
	for i := range n {
		// Newest first: the slot before next, backwards.
		r := rc.ring[(rc.next-1-i+2*n)%n]
		if keep != nil && !keep(r) {
			continue
		}
		out = append(out, r)
		if max > 0 && len(out) == max {
			break
		}
	}
	return out
}

// Recording returns a Sink that passes each signal to next and adds to
// rc what became of it, as a record of the way in via. now stamps
// signals that arrive without At (nil: time.Now).
func (rc *Recent) Recording(next Sink, via string, now func() time.Time) Sink {
	if now == nil {
		now = time.Now
	}
	return recording{rc: rc, next: next, via: via, now: now}
}

type recording struct {
	rc   *Recent
	next Sink
	via  string
	now  func() time.Time
}

func (r recording) Accept(ctx context.Context, s Signal) error {
	if s.At.IsZero() {
		s.At = r.now()
	}
	err := r.next.Accept(ctx, s)
	rec := Record{Via: r.via, Signal: s, Accepted: err == nil}
	if err != nil {
		rec.Reason = err.Error()
	}
	r.rc.Add(rec)
	return err
}
