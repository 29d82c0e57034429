package reconcile

import (
	"errors"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// The work queue on its own: backoff doubles up to the cap and is per
// request, a terminal failure holds only the same request, an accepted
// request waits for the mirror or its settle timeout, and next says when
// the loop must wake.
func TestWorkQueue(t *testing.T) {
	q := newWorkQueue(Config{RetryBase: 100 * time.Millisecond, RetryMax: time.Second, SettleTimeout: 2 * time.Second}.withDefaults())
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	m, other := testRule(t, 1, discard()).Match, testRule(t, 2, discard()).Match
	flaky := errors.New("speaker busy")

	// Transient: 100ms, 200ms, 400ms, 800ms, then the 1s cap.
	at := t0
	for i, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		in, term := q.failed(m, opAnnounce, discard(), flaky, at)
		if term || in != want*time.Millisecond {
			t.Fatalf("failure %d: retry in %v (terminal %v), want %v", i+1, in, term, want*time.Millisecond)
		}
		if next := q.next(); !next.Equal(at.Add(in)) {
			t.Fatalf("failure %d: next wake %v, want %v", i+1, next, at.Add(in))
		}
		if wait, pending := q.waiting(m, opAnnounce, discard(), at.Add(in-time.Nanosecond)); !wait || !pending {
			t.Fatalf("failure %d: not held back before its retry", i+1)
		}
		at = at.Add(in)
		if wait, _ := q.waiting(m, opAnnounce, discard(), at); wait {
			t.Fatalf("failure %d: held back at its retry time", i+1)
		}
	}
	// Another request for the same Match (another action) goes at once;
	// another Match was never held.
	if wait, _ := q.waiting(m, opAnnounce, rateLimit(5), t0); wait {
		t.Fatal("a different request waited for the old one's backoff")
	}
	if wait, _ := q.waiting(other, opAnnounce, discard(), t0); wait {
		t.Fatal("another Match waited")
	}

	// Terminal: held while the same, not pending, no wake-up for it.
	q.done(m)
	if _, term := q.failed(m, opAnnounce, discard(), &terminalErr{"NLRI too long"}, t0); !term {
		t.Fatal("terminal error not terminal")
	}
	if wait, pending := q.waiting(m, opAnnounce, discard(), t0.Add(time.Hour)); !wait || pending {
		t.Fatalf("terminal request: wait %v pending %v, want held, not pending", wait, pending)
	}
	if !q.next().IsZero() {
		t.Fatalf("next wake %v for a terminal failure only", q.next())
	}

	// Accepted: in flight until the mirror shows it or the settle timeout.
	q.accepted(other, opAnnounce, discard(), t0)
	if !q.inFlight(other) || q.idle() {
		t.Fatal("accepted request not in flight")
	}
	if wait, pending := q.waiting(other, opAnnounce, discard(), t0); !wait || !pending {
		t.Fatal("accepted request asked again before the mirror showed it")
	}
	if next := q.next(); !next.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("next wake %v, want the settle timeout %v", next, t0.Add(2*time.Second))
	}
	notYet := func(flowspec.Match) (flowspec.Action, bool, bool) { return flowspec.Action{}, false, true }
	q.observe(notYet, t0.Add(time.Second))
	if !q.inFlight(other) {
		t.Fatal("expectation dropped before the mirror showed it or it timed out")
	}
	shown := func(flowspec.Match) (flowspec.Action, bool, bool) { return discard(), true, true }
	q.observe(shown, t0.Add(time.Second))
	if q.inFlight(other) {
		t.Fatal("expectation kept after the mirror showed it")
	}
	q.accepted(other, opWithdraw, flowspec.Action{}, t0)
	q.observe(shown, t0.Add(2*time.Second))
	if q.inFlight(other) {
		t.Fatal("expectation kept past its settle timeout")
	}

	// prune forgets attempts of Matches neither wanted nor orphans.
	q.prune(Plan{}, func(flowspec.Match) bool { return false })
	if len(q.attempts) != 0 {
		t.Fatalf("%d attempts kept for Matches nothing wants", len(q.attempts))
	}
}
