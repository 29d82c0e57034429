package reconcile

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// deltaOf compacts d as source.changedSince does.
func deltaOf(d store.Delta) delta {
	out := delta{gone: d.Gone, next: d.Next}
	for i := range d.Active {
		out.active = append(out.active, rowOf(&d.Active[i]))
	}
	return out
}

// TestCompactRows: after many rows came in incrementally (and some left
// or changed), compactRows puts every live row in one slice, byID points
// into it, and nothing else about the copy changes.
func TestCompactRows(t *testing.T) {
	var c source
	var first []store.Rule
	for i := range 10 {
		first = append(first, store.Rule{ID: int64(i + 1), Rule: testRule(t, i, discard()), State: store.Active})
	}
	c.load(first)
	nop := func(flowspec.Match) {}
	var delta store.Delta
	for i := 10; i < 10+2*bigScratch; i++ {
		delta.Active = append(delta.Active, store.Rule{ID: int64(i + 1), Rule: testRule(t, i, discard()), State: store.Active})
	}
	delta.Gone = []int64{3, 20, 21}
	c.apply(deltaOf(delta), nop)
	// A changed row: replaced by a copy in extra.
	c.apply(deltaOf(store.Delta{Active: []store.Rule{{ID: 30, Rule: testRule(t, 29, rateLimit(5)), State: store.Active}}}), nop)
	c.byID.get(40).flags |= rowSeen

	want := make(map[int64]row, c.byID.len())
	c.byID.all(func(r *row) { want[r.ID] = *r })
	c.compactRows(false)
	if len(c.extra) != 0 || len(c.rows) != len(want) || c.byID.len() != len(want) {
		t.Fatalf("after compacting: %d rows, %d extra, %d by id; want %d rows", len(c.rows), len(c.extra), c.byID.len(), len(want))
	}
	for i := range c.rows {
		r := &c.rows[i]
		w, ok := want[r.ID]
		if !ok || c.byID.get(r.ID) != r || c.byMatch.one.getMatch(r.Match) != r {
			t.Fatalf("row %d: in want %v, byID points into rows %v, byMatch %v", r.ID, ok, c.byID.get(r.ID) == r, c.byMatch.one.getMatch(r.Match) == r)
		}
		w.flags &^= rowExtra
		if *r != w {
			t.Fatalf("row %d changed: %+v, want %+v", r.ID, *r, w)
		}
	}
	if c.byID.get(30).Action != rateLimit(5) || c.byID.get(40).flags&rowSeen == 0 {
		t.Fatal("a row's fields were lost")
	}
	// Below the threshold (fewer extra rows than rows): left alone.
	rows := c.rows
	c.apply(deltaOf(store.Delta{Active: []store.Rule{{ID: 99999, Rule: testRule(t, 99998, discard()), State: store.Active}}}), nop)
	c.compactRows(false)
	if len(c.extra) != 1 || &c.rows[0] != &rows[0] {
		t.Fatal("compacted a copy with few new rows")
	}
	// The end of a burst: fewer new rows than old, yet many; a busy pass
	// leaves them, a quiet one compacts them all.
	var more store.Delta
	for i := 100000; i < 100000+bigScratch; i++ {
		more.Active = append(more.Active, store.Rule{ID: int64(i + 1), Rule: testRule(t, i, discard()), State: store.Active})
	}
	c.apply(deltaOf(more), nop)
	c.compactRows(false)
	if len(c.extra) != bigScratch+1 {
		t.Fatalf("a busy pass compacted %d new rows against %d old", bigScratch+1, len(c.rows))
	}
	c.compactRows(true)
	if len(c.extra) != 0 || len(c.rows) != c.byID.len() {
		t.Fatalf("after a quiet pass: %d extra, %d rows, %d by id", len(c.extra), len(c.rows), c.byID.len())
	}
	for i := range c.rows {
		if c.byID.get(c.rows[i].ID) != &c.rows[i] || c.byMatch.one.getMatch(c.rows[i].Match) != &c.rows[i] {
			t.Fatalf("row %d: byID does not point into the compacted rows", c.rows[i].ID)
		}
	}
}

// heldStore hands every rule of its fakeStore in a store.Rule of its own
// that carries what the reconciler does not keep (Sites, Text) in an
// allocation it tracks with a weak pointer. When it hands the last rule
// it collects garbage and records in held how many of the earlier ones
// are still reachable: a reader holding the table as store.Rules (or
// copies of them) keeps them all; one that compacts each as it arrives
// keeps none.
type heldStore struct {
	*fakeStore
	held, walks int
}

func (h *heldStore) EachActive(ctx context.Context, fn func(*store.Rule) error) error {
	var active []store.Rule
	if err := h.fakeStore.EachActive(ctx, func(r *store.Rule) error {
		active = append(active, *r)
		return nil
	}); err != nil {
		return err
	}
	h.walks++
	h.held = -1
	var seen []weak.Pointer[[4]string]
	for i := range active {
		extra := new([4]string)
		extra[0] = strings.Repeat("x", 100)
		r := active[i]
		r.Sites, r.Text = extra[:], extra[0]
		if i == len(active)-1 {
			runtime.GC()
			h.held = 0
			for _, p := range seen {
				if p.Value() != nil {
					h.held++
				}
			}
		}
		seen = append(seen, weak.Make(extra))
		if err := fn(&r); err != nil {
			return err
		}
	}
	return nil
}

// The reconciler's full reads (the first pass's, the background resync's,
// the preview's, a seed's) compact each rule as the store hands it over:
// by the last rule, none of the earlier store.Rules is reachable (at a
// million rules they were 1.15 GB, held until the whole table was read).
func TestFullReadHoldsNoStoreRules(t *testing.T) {
	const n = 500
	h := &heldStore{fakeStore: newFakeStore()}
	for i := range n {
		h.add(testRule(t, i, discard()), time.Time{})
	}
	sp := newFakeSpeaker()
	r := New(testLogger(t), h, sp, Config{})
	check := func(what string, walks int) {
		t.Helper()
		if h.walks != walks {
			t.Fatalf("%s: %d walks of the store, want %d", what, h.walks, walks)
		}
		if h.held != 0 {
			t.Errorf("%s: %d of the %d rules handed over before the last were still reachable when it came", what, h.held, n-1)
		}
	}
	if res := pass(t, r); res.Added != n {
		t.Fatalf("first pass = %+v, want a full read adding %d", res, n)
	}
	check("first pass", 1)

	snap := readSnapshot(context.Background(), h, time.Now, 0)
	if snap.err != nil || snap.byID.len() != n {
		t.Fatalf("background read: %d rules, %v", snap.byID.len(), snap.err)
	}
	check("background read", 2)

	if _, err := r.Preview(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("preview", 3)

	var rows Rows
	if err := h.EachActive(context.Background(), func(x *store.Rule) error { rows.Add(x); return nil }); err != nil {
		t.Fatal(err)
	}
	check("seed", 4)
	if rows.Len() != n {
		t.Fatalf("seed holds %d rows, want %d", rows.Len(), n)
	}
}

// A start-up read of a large table grows its rows by doubling: the table
// is copied a few times over, not once per quarter of growth.
func TestRowsGrowByDoubling(t *testing.T) {
	r := store.Rule{ID: 1, Rule: testRule(t, 1, discard()), State: store.Active}
	const n = 100_000
	allocs := testing.AllocsPerRun(1, func() {
		var rs Rows
		for range n {
			rs.Add(&r)
		}
	})
	// Doubling from 256: 9 allocations to 100,000 rows.
	if allocs > 12 {
		t.Errorf("%v allocations reading %d rows, want at most 12", allocs, n)
	}
}

// A read made ahead (source.prefetch) predates the status writes of the
// pass that made it: a row it holds again with the same lifecycle keeps
// the status the copy has recorded since, and the reads ahead are used
// once.
func TestReadAheadKeepsWrittenStatus(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	nop := func(flowspec.Match) {}
	st := newFakeStore()
	id := st.add(testRule(t, 1, discard()), time.Time{})
	var c source
	if _, _, err := c.read(ctx, st, now, false, nil, nop); err != nil {
		t.Fatal(err)
	}
	// A change the reconciler does not look at: the row reads as before.
	st.mu.Lock()
	st.touch(id)
	st.mu.Unlock()
	c.prefetch(ctx, st)
	if len(c.ahead) != 1 || len(c.ahead[0].active) != 1 {
		t.Fatalf("read ahead: %+v, want the one changed row", c.ahead)
	}
	// The pass's status write returns after the read ahead.
	if err := st.SetStatus(ctx, []int64{id}, true, ""); err != nil {
		t.Fatal(err)
	}
	c.wrote(id, ruleStatus{announced: true}, now)
	if _, all, err := c.read(ctx, st, now, false, nil, nop); err != nil || all {
		t.Fatalf("read = all %v, %v; want an incremental read", all, err)
	}
	if !c.byID.get(id).announced() {
		t.Fatal("the read ahead undid the status written after it")
	}
	if len(c.ahead) != 0 {
		t.Fatalf("%d reads ahead kept after they were applied", len(c.ahead))
	}
	// A complete read drops what was read ahead.
	st.mu.Lock()
	st.touch(id)
	st.mu.Unlock()
	c.prefetch(ctx, st)
	if _, all, err := c.read(ctx, st, now, true, nil, nop); err != nil || !all || len(c.ahead) != 0 {
		t.Fatalf("full read = all %v, %v, %d reads ahead left", all, err, len(c.ahead))
	}
}

// firstBatchHook is a fakeSpeaker whose first Announce call runs alone:
// the others wait until it has announced and then called after.
type firstBatchHook struct {
	*fakeSpeaker
	calls atomic.Int32
	after func()
	ran   chan struct{}
	t     *testing.T
}

func (h *firstBatchHook) Announce(ctx context.Context, rules []flowspec.Rule) []error {
	if h.calls.Add(1) == 1 {
		errs := h.fakeSpeaker.Announce(ctx, rules)
		h.after()
		close(h.ran)
		return errs
	}
	select {
	case <-h.ran:
	case <-time.After(30 * time.Second):
		h.t.Error("the first Announce call never returned")
	}
	return h.fakeSpeaker.Announce(ctx, rules)
}

// A pass whose additions take several batches reads the store's changes
// again each time a batch returns, not only once when the first batch
// starts: during a bulk load, rules the API committed while GoBGP took
// the pass's first batches are read by then, and the next pass does not
// keep GoBGP waiting while it reads them.
func TestPassReadsAheadAfterEachBatch(t *testing.T) {
	st := newFakeStore()
	n := 2*announceBatch + announceBatch/2 // three batches
	for i := range n {
		st.add(testRule(t, i, discard()), time.Time{})
	}
	var late int64
	sp := &firstBatchHook{fakeSpeaker: newFakeSpeaker(), ran: make(chan struct{}), t: t}
	sp.after = func() { late = st.add(testRule(t, n, discard()), time.Time{}) }
	r := New(testLogger(t), st, sp, Config{})
	r.runPass(context.Background(), true, nil)
	if res := r.LastPass(); res.Added != n {
		t.Fatalf("pass added %d, want %d", res.Added, n)
	}
	for _, dl := range r.src.ahead {
		for _, rw := range dl.active {
			if rw.ID == late {
				return
			}
		}
	}
	t.Fatalf("the rule committed while the first batch was with the speaker was not read ahead (%d reads ahead)", len(r.src.ahead))
}

// TestResyncSums: the periodic resync reads the store as sums and checks
// the copy against them. Changes the revisions showed (before or after
// the sums were read) and status writes that returned after the read
// started are not drift: the copy is kept and brought up to date, with
// no second complete read. A change no revision showed (an action, a
// status, a rule gone or added) is drift: every row is read again and
// the copy then holds what the store holds.
func TestResyncSums(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	nop := func(flowspec.Match) {}
	st := newFakeStore()
	var ids []int64
	for i := range 50 {
		ids = append(ids, st.add(testRule(t, i, discard()), now.Add(time.Hour)))
	}
	var c source
	if _, _, err := c.read(ctx, st, now, false, nil, nop); err != nil {
		t.Fatal(err)
	}
	// resync returns the complete reads it made of the store.
	resync := func(what string, between func()) (reads int) {
		t.Helper()
		reads0 := st.fullReads
		c.track(true)
		snap := readSums(ctx, st, c.sumSeed(), func() time.Time { return now }, c.byID.len())
		if snap.err != nil || len(snap.sums) == 0 || snap.byID.len() != 0 {
			t.Fatalf("%s: sums %d, rows %d, %v", what, len(snap.sums), snap.byID.len(), snap.err)
		}
		if between != nil {
			between()
		}
		if _, all, err := c.read(ctx, st, now, false, snap, nop); err != nil || !all {
			t.Fatalf("%s: read = all %v, %v; want a complete comparison", what, all, err)
		}
		c.track(false)
		reads = st.fullReads - reads0
		// The copy holds what the store holds, status included.
		want := make(map[int64]row)
		if err := st.EachActive(ctx, func(r *store.Rule) error { want[r.ID] = rowOf(r); return nil }); err != nil {
			t.Fatal(err)
		}
		if c.byID.len() != len(want) {
			t.Fatalf("%s: the copy has %d rows, the store %d", what, c.byID.len(), len(want))
		}
		for id, w := range want {
			r := c.byID.get(id)
			if r == nil || sumOf(c.sumSeed(), r) != sumOf(c.sumSeed(), &w) {
				t.Fatalf("%s: row %d is %+v in the copy, %+v in the store", what, id, r, w)
			}
		}
		return reads
	}
	drift := func(what string, want uint64) {
		t.Helper()
		if c.drifted != want {
			t.Fatalf("%s: %d drifts found, want %d", what, c.drifted, want)
		}
	}
	now = now.Add(time.Second)

	reads := resync("nothing changed", nil)
	drift("nothing changed", 0)
	// A change the copy has not read yet when the sums are taken, one
	// made after, and a status write returning after the read began.
	st.update(ids[1], rateLimit(1), now.Add(time.Hour))
	reads += resync("changes around the read", func() {
		st.update(ids[2], rateLimit(2), now.Add(time.Hour))
		st.add(testRule(t, 100, discard()), time.Time{})
		if err := st.SetStatus(ctx, []int64{ids[3]}, true, ""); err != nil {
			t.Fatal(err)
		}
		c.wrote(ids[3], ruleStatus{announced: true}, now)
	})
	drift("changes around the read", 0)
	if reads != 2 {
		t.Fatalf("%d complete reads for two resyncs without drift, want 2 (the sums)", reads)
	}
	if c.byID.get(ids[1]).Action != rateLimit(1) || c.byID.get(ids[2]).Action != rateLimit(2) || !c.byID.get(ids[3]).announced() {
		t.Fatal("the changes around the read are not in the copy")
	}

	// Behind the revisions' back: each is found and repaired.
	behind := []struct {
		what   string
		change func()
	}{
		{"an action", func() { st.rules[ids[4]].Rule.Action = rateLimit(4) }},
		{"an expiry", func() { st.rules[ids[5]].ExpiresAt = now.Add(2 * time.Hour) }},
		{"a status", func() { st.rules[ids[6]].Announced, st.rules[ids[6]].LastError = false, "refused" }},
		{"a rule gone", func() { delete(st.rules, ids[7]) }},
		{"a rule added", func() {
			st.nextID++
			st.rules[st.nextID] = &store.Rule{ID: st.nextID, Rule: testRule(t, 200, discard()), State: store.Active}
		}},
	}
	for i, b := range behind {
		st.mu.Lock()
		b.change()
		st.mu.Unlock()
		reads := resync(b.what, nil)
		drift(b.what, uint64(i+1))
		if reads != 2 {
			t.Fatalf("%s: %d complete reads, want 2 (the sums, then the rows)", b.what, reads)
		}
	}
}

// TestCopyShrinksAfterMassRemoval: the periodic resync keeps the copy
// (TestResyncSums), so the copy itself gives back what a mass withdrawal
// left: once quiet, the rows move into an array of the live ones, and
// the indexes and the expiry heap shrink.
func TestCopyShrinksAfterMassRemoval(t *testing.T) {
	const n, keep = 20_000, 100
	now := time.Unix(1_700_000_000, 0)
	var first []store.Rule
	for i := range n {
		first = append(first, store.Rule{ID: int64(i + 1), Rule: testRule(t, i, discard()), ExpiresAt: now.Add(time.Hour), State: store.Active})
	}
	var c source
	c.load(first)
	slots, matchSlots, heap := c.byID.size(), c.byMatch.one.size(), cap(c.expiry)
	var gone store.Delta
	for i := keep; i < n; i++ {
		gone.Gone = append(gone.Gone, int64(i+1))
	}
	c.apply(deltaOf(gone), func(flowspec.Match) {})
	if !c.scattered() {
		t.Fatal("the copy does not ask to be compacted after most rows went")
	}
	if c.compactRows(false) {
		t.Fatal("compacted while passes run")
	}
	if !c.compactRows(true) || len(c.rows) != keep || c.byID.len() != keep || c.scattered() {
		t.Fatalf("after a quiet compaction: %d rows, %d by id (scattered %v); want %d", len(c.rows), c.byID.len(), c.scattered(), keep)
	}
	if s := c.byID.size(); s*8 > slots || s > max(1024, 4*keep) {
		t.Fatalf("index by id has %d slots for %d rows (%d before)", s, keep, slots)
	}
	if s := c.byMatch.one.size(); s*8 > matchSlots || s > max(1024, 4*keep) {
		t.Fatalf("index by Match has %d slots for %d rows (%d before)", s, keep, matchSlots)
	}
	if cap(c.expiry)*4 > heap {
		t.Fatalf("expiry heap holds %d entries' room for %d rows (%d before)", cap(c.expiry), keep, heap)
	}
	for i := range keep {
		r := c.byID.get(int64(i + 1))
		if r == nil || c.byMatch.one.getMatch(r.Match) != r || r.flags&rowStale != 0 {
			t.Fatalf("row %d lost in the compaction", i+1)
		}
	}
	if c.nextExpiry() != now.Add(time.Hour) {
		t.Fatal("the rows kept no longer expire")
	}
}
