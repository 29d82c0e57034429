package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// The daemon's purge loop deletes what is older than the retention as
// seen from its clock: with a clock 100 days ahead, the finished rule and
// the old history go, the active rule stays.
func TestPurgeLoop(t *testing.T) {
	ctx, st := openTestStore(t)
	parse := func(s string) flowspec.Rule {
		r, err := flowspec.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	keep, _, _ := st.Upsert(ctx, store.Input{Rule: parse("match destination 203.0.113.7/32 then discard"), Actor: "t"})
	st.Upsert(ctx, store.Input{Rule: parse("match destination 203.0.113.7/32 then rate-limit 5"), Actor: "t"})
	gone, _, _ := st.Upsert(ctx, store.Input{Rule: parse("match destination 203.0.113.8/32 then discard"), Actor: "t"})
	st.Withdraw(ctx, gone.ID, "t")
	if err := st.Finish(ctx, gone.ID, store.Withdrawn); err != nil {
		t.Fatal(err)
	}
	last, _, _ := st.Upsert(ctx, store.Input{Rule: parse("match destination 203.0.113.9/32 then discard"), Actor: "t"})

	lctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	later := func() time.Time { return time.Now().Add(100 * 24 * time.Hour) }
	go func() {
		runPurges(lctx, hclog.NewNullLogger(), st, 90*24*time.Hour, later, 0, time.Hour)
		close(done)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := st.Get(ctx, gone.ID)
		h, _ := st.History(ctx, keep.ID)
		if errors.Is(err, store.ErrNotFound) && len(h) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: finished rule %v, %d history entries of the active rule", err, len(h))
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a failure deadline
	}
	stop()
	<-done
	if r, err := st.Get(ctx, keep.ID); err != nil || r.State != store.Active {
		t.Errorf("the active rule: %+v, %v", r, err)
	}
	if h, _ := st.History(ctx, last.ID); len(h) != 1 {
		t.Errorf("the newest history entry was purged: %v", h)
	}
}
