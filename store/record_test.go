package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/clock"
)

// KeepRecord rewrites the identity record after every commit that
// changed desired state, but counts the active rules (a read of every
// one of them) at most every 10 s: in between, a record carries the last
// count, and 0 as soon as no rule is active.
func TestKeepRecordCountsAtMostEveryTenSeconds(t *testing.T) {
	clk := clock.NewFake(time.Now())
	cfg := sqliteFresh(t)
	cfg.Clock = clk
	s := open(t, cfg, "a")
	file := filepath.Join(t.TempDir(), "identity.json")
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan struct{})
	go func() { s.KeepRecord(ctx, file); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	// recordWith waits for a record with lastID and returns it.
	recordWith := func(lastID int64) Record {
		t.Helper()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(30 * time.Second)
		for {
			if rec, ok, err := ReadRecord(file); err == nil && ok && rec.LastID == lastID {
				return rec
			}
			select {
			case <-tick.C:
			case <-deadline:
				rec, ok, err := ReadRecord(file)
				t.Fatalf("no record with last rule id %d after 30 s; last read: %+v %v %v", lastID, rec, ok, err)
			}
		}
	}
	add := func(from, to int) {
		t.Helper()
		var ins []Input
		for i := from; i <= to; i++ {
			ins = append(ins, Input{Rule: rule(t, i, "discard"), Actor: "t"})
		}
		if _, err := s.UpsertMany(ctx, ins); err != nil {
			t.Fatal(err)
		}
	}

	add(1, 1)
	if rec := recordWith(1); rec.Active != 1 {
		t.Fatalf("after the first rule the record says %d active, want 1", rec.Active)
	}
	clk.Advance(5 * time.Second)
	add(2, 3)
	if rec := recordWith(3); rec.Active != 1 {
		t.Fatalf("5 s after the last count the record says %d active: it was counted again (want the last count, 1)", rec.Active)
	}
	clk.Advance(5 * time.Second)
	add(4, 4)
	if rec := recordWith(4); rec.Active < 3 {
		t.Fatalf("10 s after the last count the record says %d active: it was not counted again", rec.Active)
	}
	// Every rule gone: the record says so at once.
	var items []FinishItem
	for id := int64(1); id <= 4; id++ {
		if _, err := s.Withdraw(ctx, id, "t"); err != nil {
			t.Fatal(err)
		}
		items = append(items, FinishItem{ID: id, State: Withdrawn})
	}
	if errs, err := s.FinishMany(ctx, items); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	// The record follows a burst of changes once recordEvery passed.
	clk.Advance(recordEvery)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		rec, ok, err := ReadRecord(file)
		if err == nil && ok && rec.Active == 0 {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("every rule withdrawn, the record still says %+v (%v %v) after 30 s", rec, ok, err)
		}
	}
}
