package reconcile

import (
	"context"
	"maps"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// Real parts: an in-process GoBGP without a listener and a SQLite store.

func realParts(t *testing.T) (*store.Store, *bgp.Speaker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(t.TempDir(), "ribkeeper.db")})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	sp := bgp.New(testLogger(t).Named("bgp"), bgp.Config{
		ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: -1,
	})
	if err := sp.Start(ctx); err != nil {
		t.Fatalf("bgp Start: %v", err)
	}
	t.Cleanup(sp.Stop)
	eventually(t, 10*time.Second, "mirror ready", func() bool { return sp.Paths(func(flowspec.Match, flowspec.Action) {}) })
	return st, sp
}

func ribOf(sp Speaker) map[flowspec.Match]flowspec.Action {
	out := make(map[flowspec.Match]flowspec.Action)
	sp.Paths(func(m flowspec.Match, a flowspec.Action) { out[m] = a })
	return out
}

func desiredOf(t *testing.T, st *store.Store) map[flowspec.Match]flowspec.Action {
	t.Helper()
	rows, err := st.ActiveRules(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[flowspec.Match]flowspec.Action)
	for _, r := range rows {
		if _, retiring := retiringState(r, time.Now()); !retiring {
			out[r.Rule.Match] = r.Rule.Action
		}
	}
	return out
}

func TestGoBGPSecondPassChangesNothing(t *testing.T) {
	st, sp := realParts(t)
	ctx := context.Background()
	const n = 50
	for i := range n {
		a := discard()
		if i%2 == 1 {
			a = rateLimit(1000 * i)
		}
		if _, _, err := st.Upsert(ctx, store.Input{Rule: testRule(t, i, a), ExpiresAt: time.Now().Add(time.Hour), Actor: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	// A path announced behind the store's back (an orphan) and a rule whose
	// path carries another action (drift).
	if err := sp.Announce(ctx, []flowspec.Rule{testRule(t, 1000, discard())})[0]; err != nil {
		t.Fatal(err)
	}
	if err := sp.Announce(ctx, []flowspec.Rule{testRule(t, 1, rateLimit(5))})[0]; err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "mirror shows the preloaded paths", func() bool { return len(ribOf(sp)) == 2 })

	r := New(testLogger(t), st, sp, Config{})
	first := pass(t, r)
	if first.Added != n-1 || first.Updated != 1 || first.Withdrawn != 1 || first.Errors != 0 {
		t.Fatalf("first pass = %+v", first)
	}
	want := desiredOf(t, st)
	eventually(t, 5*time.Second, "mirror == desired", func() bool { return maps.Equal(ribOf(sp), want) })

	for i := range 2 {
		res := pass(t, r)
		if res.Changed() || res.Adopted != n || res.Pending != 0 || res.Errors != 0 || res.Err != "" {
			t.Errorf("pass %d after convergence = %+v, want %d adopted and nothing else", i+2, res, n)
		}
	}
	rows, err := st.ActiveRules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if !row.Announced || row.LastError != "" {
			t.Errorf("rule %d status = %v %q, want announced", row.ID, row.Announced, row.LastError)
		}
	}
}

func TestGoBGPLifecycle(t *testing.T) {
	st, sp := realParts(t)
	ctx := context.Background()
	r := New(testLogger(t), st, sp, Config{ResyncInterval: time.Hour})
	startLoop(t, r)

	keep, _, err := st.Upsert(ctx, store.Input{Rule: testRule(t, 1, discard()), Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	gone, _, err := st.Upsert(ctx, store.Input{Rule: testRule(t, 2, rateLimit(100)), Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	expires := time.Now().Add(2 * time.Second)
	exp, _, err := st.Upsert(ctx, store.Input{Rule: testRule(t, 3, discard()), ExpiresAt: expires, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "rules announced", func() bool {
		rib := ribOf(sp)
		_, ok1 := rib[keep.Rule.Match]
		_, ok2 := rib[gone.Rule.Match]
		return ok1 && ok2
	})

	if _, err := st.Withdraw(ctx, gone.ID, "test"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "withdrawn rule final", func() bool {
		g, err := st.Get(ctx, gone.ID)
		return err == nil && g.State == store.Withdrawn
	})
	if _, ok := ribOf(sp)[gone.Rule.Match]; ok {
		t.Error("rule final while its path is still in the RIB")
	}

	eventually(t, 5*time.Second, "expired rule final", func() bool {
		g, err := st.Get(ctx, exp.ID)
		return err == nil && g.State == store.Expired
	})
	// How late expiry is, is not timed here (a loaded machine): exactness
	// is TestExpiryUsesTimer's, on an injected clock.
	if g, _ := st.Get(ctx, exp.ID); time.Now().Before(expires) || g.ExpiresAt.IsZero() {
		t.Errorf("rule expired before its ExpiresAt %v", expires)
	}
	rib := ribOf(sp)
	if _, ok := rib[exp.Rule.Match]; ok || len(rib) != 1 || rib[keep.Rule.Match] != keep.Rule.Action {
		t.Errorf("RIB after lifecycle = %v, want only rule %d", rib, keep.ID)
	}
}

// TestGoBGPSkipAndRestart: with the real store and speaker, a pass with
// nothing changed skips the walk, while any change on either side (store
// write, path deleted behind our back, speaker restart) is repaired.
func TestGoBGPSkipAndRestart(t *testing.T) {
	st, sp := realParts(t)
	ctx := context.Background()
	const n = 30
	for i := range n {
		if _, _, err := st.Upsert(ctx, store.Input{Rule: testRule(t, i, discard()), ExpiresAt: time.Now().Add(time.Hour), Actor: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	r := New(testLogger(t), st, sp, Config{AnnounceRate: 10}) // 10 per batch
	settle := func(what string) PassResult {
		t.Helper()
		var res PassResult
		eventually(t, 10*time.Second, what, func() bool {
			r.runPass(ctx, false, nil)
			res = r.LastPass()
			return !res.Changed() && res.Pending == 0 && res.Errors == 0
		})
		return res
	}
	r.runPass(ctx, true, nil)
	settle("initial convergence")
	// Once the mirror's events for what was announced have all arrived
	// (they come from GoBGP's goroutines, later on a loaded machine), a
	// pass with nothing changed skips the comparison.
	eventually(t, 30*time.Second, "a skipped pass", func() bool {
		r.runPass(ctx, false, nil)
		res := r.LastPass()
		if res.Changed() {
			t.Fatalf("nothing changed, yet the pass changed something: %+v", res)
		}
		return res.Skipped && res.Adopted == n
	})
	if !maps.Equal(ribOf(sp), desiredOf(t, st)) {
		t.Fatal("RIB differs from desired state")
	}

	// Store change: read incrementally, not skipped.
	rule := testRule(t, 3, rateLimit(100))
	if _, _, err := st.Upsert(ctx, store.Input{Rule: rule, Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	r.runPass(ctx, false, nil)
	if res := r.LastPass(); res.Skipped || res.Updated != 1 || res.Full {
		t.Fatalf("after a store change: %+v", res)
	}
	settle("update shown")

	// Drift: a path deleted behind our back.
	if err := sp.Withdraw(ctx, []flowspec.Match{testRule(t, 5, discard()).Match})[0]; err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "mirror shows the deletion", func() bool { return len(ribOf(sp)) == n-1 })
	before := r.Drift().Readded
	settle("re-added")
	if r.Drift().Readded != before+1 {
		t.Fatalf("drift = %+v", r.Drift())
	}

	// Speaker restart on a fresh server: it is loaded with what the old
	// one held, so the reconciler counts the restart, compares everything
	// and finds nothing to announce again.
	if err := sp.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(ribOf(sp), desiredOf(t, st)) {
		t.Fatal("the restarted speaker does not hold the desired table")
	}
	r.runPass(ctx, false, nil)
	if res := r.LastPass(); res.Added != 0 || res.Adopted != n || res.Pending != 0 {
		t.Fatalf("first pass after restart = %+v, want all %d adopted", res, n)
	}
	if d := r.Drift(); d.SpeakerRestarts != 1 || d.Reannounced != 0 {
		t.Fatalf("drift after restart = %+v", d)
	}
}
