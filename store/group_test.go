package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// upsertReq returns a queued request that upserts rule i and then fails
// with fail, if not nil, after its row is written.
func upsertReq(t *testing.T, s *Store, i int, fail error) (*writeReq, *Rule) {
	t.Helper()
	now := dbTimeNow()
	e, err := encode(Input{Rule: rule(t, i, "discard"), Actor: "test"}, -1, now)
	if err != nil {
		t.Fatal(err)
	}
	var r Rule
	req := &writeReq{ctx: ctxT(t), n: 1, done: make(chan error, 1),
		fn: func(ctx context.Context, w *wtx) (bool, error) {
			var err error
			r, _, _, err = s.upsertTx(ctx, w, &e, now)
			if err == nil {
				err = fail
			}
			return true, err
		}}
	return req, &r
}

// A write that fails inside a group is rolled back alone: the writes
// before and after it in the same transaction commit, with their history.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	ctx := ctxT(t)
	s := open(t, sqliteFresh(t), "a")
	boom := errors.New("boom")
	a, ra := upsertReq(t, s, 1, nil)
	b, rb := upsertReq(t, s, 2, boom)
	c, rc := upsertReq(t, s, 3, nil)
	if !s.group.submit(a, b, c) {
		t.Fatal("committer stopped")
	}
	for name, req := range map[string]*writeReq{"a": a, "c": c} {
		if err := <-req.done; err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if err := <-b.done; !errors.Is(err, boom) {
		t.Fatalf("b: %v, want boom", err)
	}
	for _, r := range []*Rule{ra, rc} {
		g, err := s.Get(ctx, r.ID)
		if err != nil || !equalRule(g, *r) {
			t.Fatalf("Get(%d) = %+v, %v", r.ID, g, err)
		}
		if h, err := s.History(ctx, r.ID); err != nil || len(h) != 1 || h[0].Kind != EventCreated {
			t.Fatalf("History(%d) = %+v, %v", r.ID, h, err)
		}
	}
	all, err := s.List(ctx, "")
	if err != nil || len(all) != 2 {
		t.Fatalf("List = %d rules, %v; want 2 (b rolled back, id %d)", len(all), err, rb.ID)
	}
	// b's Match is free: storing it again creates it.
	if _, created, err := s.Upsert(ctx, Input{Rule: rule(t, 2, "discard")}); err != nil || !created {
		t.Fatalf("Upsert(b again): created=%v, %v", created, err)
	}
}

// A caller that gives up before its write ran gets its context's error and
// the write never happens.
func TestGroupCommitAbandoned(t *testing.T) {
	s := open(t, sqliteFresh(t), "a")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Upsert(cancelled) = %v", err)
	}
	req, _ := upsertReq(t, s, 2, nil)
	req.state.Store(reqAbandoned)
	ok, _ := upsertReq(t, s, 3, nil)
	s.group.submit(req, ok)
	if err := <-ok.done; err != nil {
		t.Fatal(err)
	}
	if all, err := s.List(ctxT(t), ""); err != nil || len(all) != 1 {
		t.Fatalf("List = %+v, %v; want only rule 3", all, err)
	}
}

// Many concurrent writers of new and existing Matches each get their own
// correct answer, and every acknowledged rule is stored.
func TestGroupCommitConcurrentWriters(t *testing.T) {
	ctx := ctxT(t)
	cfg := sqliteFresh(t)
	s := open(t, cfg, "a")
	const writers, each = 32, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	ids := make([][]int64, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				r, created, err := s.Upsert(ctx, Input{Rule: rule(t, w*each+i, "discard"), Reason: "first"})
				if err != nil || !created {
					errs <- fmt.Errorf("writer %d: created=%v %v", w, created, err)
					return
				}
				// The same Match again, from the same caller: an update.
				r2, created, err := s.Upsert(ctx, Input{Rule: rule(t, w*each+i, "discard"), Reason: "second"})
				if err != nil || created || r2.ID != r.ID {
					errs <- fmt.Errorf("writer %d: update created=%v id %d→%d %v", w, created, r.ID, r2.ID, err)
					return
				}
				if w%4 == 0 {
					if _, err := s.Withdraw(ctx, r.ID, "test"); err != nil {
						errs <- err
						return
					}
				}
				ids[w] = append(ids[w], r.ID)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s.Close()
	s2 := open(t, cfg, "a")
	all, err := s2.List(ctx, Active)
	if err != nil || len(all) != writers*each {
		t.Fatalf("after reopen: %d active rules, %v; want %d", len(all), err, writers*each)
	}
	for _, r := range all {
		if r.Reason != "second" || r.WithdrawRequested != withdrawn(ids, r.ID) {
			t.Fatalf("rule %d: reason %q withdraw_requested %v", r.ID, r.Reason, r.WithdrawRequested)
		}
	}
}

func withdrawn(ids [][]int64, id int64) bool {
	for w := 0; w < len(ids); w += 4 {
		for _, x := range ids[w] {
			if x == id {
				return true
			}
		}
	}
	return false
}

// Writes still queued when the Store closes fail; later writes fail too.
func TestGroupCommitClose(t *testing.T) {
	s := open(t, sqliteFresh(t), "a")
	s.Close()
	if _, _, err := s.Upsert(ctxT(t), Input{Rule: rule(t, 1, "discard")}); !errors.Is(err, errClosed) {
		t.Fatalf("Upsert after Close = %v", err)
	}
}

// Another process writing the same SQLite file wakes this one's change
// feed; its status writes do not, and neither does a quiet file.
func TestSQLiteChangesFromAnotherProcess(t *testing.T) {
	ctx := ctxT(t)
	cfg := sqliteFresh(t)
	a := open(t, cfg, "a")
	b := open(t, cfg, "b")
	quiet := func(what string) {
		t.Helper()
		drain(b)
		select {
		case <-b.Changes():
			t.Fatalf("change signal after %s", what)
		case <-time.After(3 * pollInterval):
		}
	}
	quiet("open")
	r, _, err := a.Upsert(ctx, Input{Rule: rule(t, 1, "discard")})
	if err != nil {
		t.Fatal(err)
	}
	// Seen by polling (how soon is not timed: a loaded machine is slow,
	// not wrong).
	waitChange(t, b, "Upsert by another process")
	if err := a.SetStatus(ctx, []int64{r.ID}, true, ""); err != nil {
		t.Fatal(err)
	}
	quiet("SetStatus by another process")
	// b's own writes wake b once (in-process), never again by polling.
	if _, _, err := b.Upsert(ctx, Input{Rule: rule(t, 2, "discard")}); err != nil {
		t.Fatal(err)
	}
	waitChange(t, b, "own Upsert")
	quiet("own Upsert, polled")
	if _, err := a.Withdraw(ctx, r.ID, "x"); err != nil {
		t.Fatal(err)
	}
	waitChange(t, b, "Withdraw by another process")
	if err := a.Finish(ctx, r.ID, Withdrawn); err != nil {
		t.Fatal(err)
	}
	waitChange(t, b, "Finish by another process")
}

// Status reports (background writes) wait while any other write is
// queued: a mitigation is not committed behind the statuses of a large
// load. Each kind keeps its order.
func TestGroupCommitBackgroundLast(t *testing.T) {
	req := func(name string, background bool) *writeReq {
		return &writeReq{op: name, n: maxGroup/2 + 1, background: background}
	}
	c := &committer{pending: []*writeReq{req("status 1", true), req("add 1", false), req("status 2", true), req("add 2", false)}}
	var order []string
	for g := c.take(); len(g) > 0; g = c.take() {
		for _, r := range g {
			order = append(order, r.op)
		}
		if len(order) == 1 {
			// A write that comes meanwhile still goes before the
			// statuses queued earlier.
			c.pending = append(c.pending, req("add 3", false))
		}
	}
	want := []string{"add 1", "add 2", "add 3", "status 1", "status 2"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("committed in the order %q, want %q", order, want)
	}
}
