package store

import (
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/clock"
)

// A full read is bounded by its progress, not its total time: a table
// that takes several timeouts to read is read whole while rows keep
// coming (a fixed deadline failed every full read of a million rules on a
// busy appliance, so a restart announced nothing).
func TestFullReadBoundedByProgress(t *testing.T) {
	cfg := sqliteFresh(t)
	s := open(t, cfg, "a")
	const n, batch = 100_000, 10_000
	ctx := ctxT(t)
	for lo := 0; lo < n; lo += batch {
		in := make([]Input, 0, batch)
		for i := lo; i < lo+batch; i++ {
			in = append(in, Input{Rule: rule(t, i+1, "discard"), Actor: "t"})
		}
		if _, err := s.UpsertMany(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	// A store of its own on the same file with a call timeout of a
	// second on a clock the test drives, and a reader that takes 350 ms
	// of it over every 10,000 rows: the walk lasts over three timeouts,
	// while the database sends rows all along.
	clk := clock.NewFake(time.Now())
	cfg.Timeout, cfg.Clock = time.Second, clk
	short := open(t, cfg, "a")
	start := clk.Now()
	got := 0
	err := short.EachActive(ctx, func(*Rule) error {
		if got++; got%10_000 == 0 {
			clk.Advance(350 * time.Millisecond)
		}
		return nil
	})
	took := clk.Now().Sub(start)
	t.Logf("read %d rows in %v with a %v timeout", got, took, cfg.Timeout)
	if err != nil {
		t.Fatalf("full read with a %v timeout: %v", cfg.Timeout, err)
	}
	if got != n {
		t.Fatalf("read %d rows, want %d", got, n)
	}
	if took <= 3*cfg.Timeout {
		t.Fatalf("the walk took %v, not over three timeouts: it shows nothing about the bound", took)
	}
}
