package store

import (
	"testing"
	"time"
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
	// second, and a reader that takes 300 ms over every 10,000 rows: the
	// walk lasts over three timeouts, while the database sends rows all
	// along (a loaded machine pauses a read for well over 100 ms now and
	// then, so the database's own speed cannot make the walk long).
	cfg.Timeout = time.Second
	short := open(t, cfg, "a")
	start := time.Now()
	got := 0
	err := short.EachActive(ctx, func(*Rule) error {
		if got++; got%10_000 == 0 {
			time.Sleep(300 * time.Millisecond) // the reader's own time, not a synchronisation
		}
		return nil
	})
	took := time.Since(start)
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
