package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// TestLeakedCountsNoPathInFlight: a load is no leak. Right after each
// Announce returned, the path is in GoBGP's RIB but perhaps not yet in
// the mirror; Leaked used to count it (the NLRI noted when announced, the
// mirror not showing it yet), so during a load it ran ahead of the leak.
func TestLeakedCountsNoPathInFlight(t *testing.T) {
	s := startSpeaker(t, Config{})
	ctx := context.Background()
	const n = 2000
	most := 0
	for i := range n {
		if err := announceOne(s, ctx, flowspec.Rule{Match: churnMatch(t, i), Action: flowspec.Discard()}); err != nil {
			t.Fatal(err)
		}
		most = max(most, s.Leaked())
	}
	eventually(t, 30*time.Second, "mirror with every path", func() bool { return s.Len() == n })
	if most != 0 || s.Leaked() != 0 {
		t.Errorf("Leaked up to %d during a load of %d new rules (now %d), want 0: nothing was withdrawn", most, n, s.Leaked())
	}
	// Nothing is kept per path of a load: the set holds removals only
	// (35 MB of hashes at a million routes when it held every NLRI).
	s.restarts.mu.Lock()
	kept := len(s.restarts.gone)
	s.restarts.mu.Unlock()
	if kept != 0 {
		t.Errorf("%d NLRI hashes kept after a load that withdrew nothing, want 0", kept)
	}
	for i := range 10 {
		if err := withdrawOne(s, ctx, churnMatch(t, i)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "ten leaked destinations", func() bool { return s.Leaked() == 10 })
	// An NLRI announced again gets its destination back: no longer leaked.
	for i := range 4 {
		if err := announceOne(s, ctx, flowspec.Rule{Match: churnMatch(t, i), Action: flowspec.Discard()}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "six leaked destinations", func() bool { return s.Leaked() == 6 })
}

// TestLeakedCountsRoutes: RTBH routes are told apart by their prefix.
// The set keyed each NLRI by its FlowSpec components, which a route has
// none of: every route of a family was one entry, and a churn of
// blackholes never counted as a leak.
func TestLeakedCountsRoutes(t *testing.T) {
	s := startSpeaker(t, Config{RouteNextHop4: netip.MustParseAddr("192.0.2.1")})
	ctx := context.Background()
	route := func(i int) flowspec.Rule {
		r, err := flowspec.Parse(fmt.Sprintf("route 198.51.100.%d/32 then blackhole", i))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	const n = 10
	for i := range n {
		if err := announceOne(s, ctx, route(i)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "mirror with every route", func() bool { return s.Len() == n })
	for i := range 3 {
		if err := withdrawOne(s, ctx, route(i).Match); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "three leaked destinations", func() bool { return s.Leaked() == 3 })
}

// TestCompactorUnderChurn: the compactor restarts the speaker although
// the rules changed between its ticks (a sustained churn never leaves the
// mirror unchanged for a whole tick, which the compactor used to wait
// for: the leak then grew with every rule churned), and the live set is
// whole afterwards.
func TestCompactorUnderChurn(t *testing.T) {
	s := startSpeaker(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const live, threshold = 50, 200
	ticks := make(chan time.Time)
	done := make(chan struct{})
	go func() { s.compact(ctx, threshold, ticks); close(done) }()
	next := 0 // the rules [next-live, next) are live
	churn := func(steps int) {
		t.Helper()
		for range steps {
			if err := announceOne(s, ctx, flowspec.Rule{Match: churnMatch(t, next), Action: flowspec.Discard()}); err != nil {
				t.Fatal(err)
			}
			if next >= live {
				if err := withdrawOne(s, ctx, churnMatch(t, next-live)); err != nil {
					t.Fatal(err)
				}
			}
			next++
		}
	}
	churn(live + threshold)
	eventually(t, 30*time.Second, "the leak past the threshold", func() bool { return s.Leaked() >= threshold })
	ticks <- time.Now()
	gen := s.Generation()
	churn(10)
	eventually(t, 30*time.Second, "the mirror changed", func() bool { return s.Generation() != gen })
	ticks <- time.Now() // over on two ticks in a row, the mirror changing
	eventually(t, 30*time.Second, "a compaction during the churn", func() bool { return s.Restarts() >= 1 })
	cancel()
	<-done
	// The RIB replayed into the new server keeps every live rule, and
	// only those.
	eventually(t, 30*time.Second, "the mirror holds the live set", func() bool {
		m := mirrorOf(s)
		if len(m) != live {
			return false
		}
		for i := next - live; i < next; i++ {
			if _, ok := m[churnMatch(t, i)]; !ok {
				return false
			}
		}
		return true
	})
	if n := s.Leaked(); n != 0 {
		t.Errorf("Leaked %d after the compaction, want 0", n)
	}
}
