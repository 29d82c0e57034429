package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/clock"
)

// A relative TTL counts from the transaction that stores the rule: writes
// queued behind a long commit keep their whole TTL (single and batch).
// The store's clock is a clock.Fake moved on while the committer is held.
func TestTTLCountsFromTheCommit(t *testing.T) {
	ctx := ctxT(t)
	c := clock.NewFake(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	cfg := sqliteFresh(t)
	cfg.Clock = c
	s := open(t, cfg, "a")

	// A write that holds the committer until released.
	hold, entered := make(chan struct{}), make(chan struct{})
	blocker := &writeReq{ctx: ctx, n: 1, done: make(chan error, 1),
		fn: func(context.Context, *wtx) (bool, error) {
			close(entered)
			<-hold
			return false, nil
		}}
	if !s.group.submit(blocker) {
		t.Fatal("committer stopped")
	}
	<-entered
	queued := make(chan int, 8)
	s.group.mu.Lock()
	s.group.queued = queued
	s.group.mu.Unlock()
	type result struct {
		rules []Rule
		err   error
	}
	one, many := make(chan result, 1), make(chan result, 1)
	go func() {
		r, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), Actor: "test", TTL: time.Second})
		one <- result{[]Rule{r}, err}
	}()
	go func() {
		rs, err := s.UpsertMany(ctx, []Input{{Rule: rule(t, 2, "discard"), Actor: "test", TTL: time.Second}})
		many <- result{rs, err}
	}()
	limit := time.NewTimer(30 * time.Second)
	defer limit.Stop()
	for n := 0; n < 2; {
		select {
		case n = <-queued:
		case <-limit.C:
			t.Fatalf("not within 30s: both writes queued behind the held commit (%d queued)", n)
		}
	}
	c.Advance(5 * time.Second) // the queue waits past the TTL
	committed := c.Now()
	close(hold)
	if err := <-blocker.done; err != nil {
		t.Fatal(err)
	}
	want := normTime(committed.Add(time.Second))
	for name, ch := range map[string]chan result{"Upsert": one, "UpsertMany": many} {
		res := <-ch
		if res.err != nil {
			t.Fatalf("%s after waiting in the queue: %v", name, res.err)
		}
		got, err := s.Get(ctx, res.rules[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.ExpiresAt.Equal(want) || !res.rules[0].ExpiresAt.Equal(want) {
			t.Errorf("%s: expires at %v (answered %v), want the commit time plus the TTL, %v",
				name, got.ExpiresAt, res.rules[0].ExpiresAt, want)
		}
	}

	if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, 3, "discard"), TTL: -time.Second}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("a negative TTL: %v, want ErrInvalidInput", err)
	}
}
