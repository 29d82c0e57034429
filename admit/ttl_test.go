package admit_test

import (
	"context"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/store"
)

// queuedStore is a real store whose writes wait, once called, until the
// test lets them go on: a write queued behind a large commit.
type queuedStore struct {
	*store.Store
	entered chan struct{}
	release chan struct{}
}

func (q *queuedStore) Upsert(ctx context.Context, in store.Input) (store.Rule, bool, error) {
	q.entered <- struct{}{}
	<-q.release
	return q.Store.Upsert(ctx, in)
}

func (q *queuedStore) UpsertMany(ctx context.Context, ins []store.Input) ([]store.Rule, error) {
	q.entered <- struct{}{}
	<-q.release
	return q.Store.UpsertMany(ctx, ins)
}

// A TTL stays relative until the commit: a 1 s TTL whose write waits
// longer than that behind other commits is stored, and expires 1 s after
// it was stored, not refused as "not in the future" (BenchmarkChurn). The
// gate and the store share one clock.Fake, moved on while the write waits.
func TestTTLRelativeUntilTheCommit(t *testing.T) {
	ctx := context.Background()
	c := clock.NewFake(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	st := openStore(t, c)
	q := &queuedStore{Store: st, entered: make(chan struct{}), release: make(chan struct{})}
	g := admit.New(admit.Config{Store: q, Clock: c})
	ttl := "1s"
	cases := map[string]func() ([]store.Rule, error){
		"single": func() ([]store.Rule, error) {
			r, _, err := g.Add(ctx, noc, admit.Request{Text: "match destination 203.0.113.40/32 then discard", TTL: &ttl})
			return []store.Rule{r}, err
		},
		"batch": func() ([]store.Rule, error) {
			return g.AddMany(ctx, noc, []admit.Request{{Text: "match destination 203.0.113.41/32 then discard", TTL: &ttl}})
		},
	}
	for name, write := range cases {
		type result struct {
			rules []store.Rule
			err   error
		}
		done := make(chan result, 1)
		go func() {
			rs, err := write()
			done <- result{rs, err}
		}()
		<-q.entered
		c.Advance(3 * time.Second)
		stored := c.Now()
		q.release <- struct{}{}
		res := <-done
		if res.err != nil {
			t.Fatalf("%s: a write that waited past its TTL: %v", name, res.err)
		}
		if want := stored.Add(time.Second); !res.rules[0].ExpiresAt.Equal(want) {
			t.Errorf("%s: expires at %v, want 1s after it was stored, %v", name, res.rules[0].ExpiresAt, want)
		}
	}
}
