package reconcile

import (
	"context"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// The start-up walk hands the speaker, while it reads, exactly the rules
// the first pass would announce and the caller did not keep back: not a
// withdrawn, expired or invalid one, nor one breaking a guardrail. The
// first pass then adopts them (each announced once) and announces only
// the rest.
func TestPreloadAnnouncesAsItReads(t *testing.T) {
	const plain = 2*announceBatch + 500
	r, st, sp := newTest(t, Config{})
	now := time.Now()
	want := make(map[flowspec.Match]bool)
	for i := range plain {
		rule := testRule(t, i, discard())
		st.add(rule, time.Time{})
		want[rule.Match] = true
	}
	gone := st.add(testRule(t, plain, discard()), time.Time{})
	st.withdraw(gone)
	st.add(testRule(t, plain+1, discard()), now.Add(-time.Minute))                   // expired while down
	st.add(flowspec.Rule{Match: testRule(t, plain+2, discard()).Match}, time.Time{}) // no valid action
	held := st.add(testRule(t, plain+3, discard()), time.Time{})                     // breaks a guardrail, say

	ctx := context.Background()
	rev, err := st.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := r.Preload(ctx)
	seen := 0
	if err := st.EachActive(ctx, func(x *store.Rule) error {
		seen++
		p.Add(x, x.ID != held)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rows, n := p.Finish()
	if rows.Len() != seen || n != plain {
		t.Fatalf("Finish: %d rows (want %d), %d announced (want %d)", rows.Len(), seen, n, plain)
	}
	rib := sp.snapshot()
	if len(rib) != plain {
		t.Errorf("the walk announced %d rules, want the %d plain ones", len(rib), plain)
	}
	for m := range rib {
		if !want[m] {
			t.Errorf("the walk announced %v, which is not a plain rule", m)
		}
	}
	calls := sp.callCount()

	r.Seed(rev, rows, now)
	startLoop(t, r)
	<-r.Loaded()
	// Loaded: the first pass handed every difference to the speaker.
	if got := sp.callCount() - calls; got != 1 {
		t.Errorf("the first pass announced %d rules again, want only the held one", got)
	}
	if _, ok := sp.snapshot()[st.get(held).Rule.Match]; !ok {
		t.Errorf("the held rule, still active, is not announced by the first pass")
	}
}

// Nothing goes to the speaker ahead of the first pass in a dry run, nor
// while the mirror cannot show the RIB; the rows are read all the same.
func TestPreloadNothingBlind(t *testing.T) {
	for _, c := range []struct {
		name    string
		dry     bool
		unready bool
	}{{"dry run", true, false}, {"mirror not ready", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			r, st, sp := newTest(t, Config{DryRun: c.dry})
			if c.unready {
				sp.setReady(false)
			}
			for i := range 10 {
				st.add(testRule(t, i, discard()), time.Time{})
			}
			p := r.Preload(context.Background())
			if err := st.EachActive(context.Background(), func(x *store.Rule) error { p.Add(x, true); return nil }); err != nil {
				t.Fatal(err)
			}
			rows, n := p.Finish()
			if rows.Len() != 10 || n != 0 || sp.callCount() != 0 {
				t.Fatalf("%d rows read, %d announced, %d speaker calls; want 10, 0, 0", rows.Len(), n, sp.callCount())
			}
		})
	}
}
