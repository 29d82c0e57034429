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
	s := open(t, sqliteFresh(t), "a")
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
	// The store's call timeout, short from here: every 1,024 rows come
	// well within it, the whole table does not.
	s.timeout = 100 * time.Millisecond
	start := time.Now()
	rows, err := s.ActiveRules(ctx)
	took := time.Since(start)
	t.Logf("read %d rows in %v with a %v timeout", len(rows), took, s.timeout)
	if err != nil {
		t.Fatalf("full read with a %v timeout: %v", s.timeout, err)
	}
	if len(rows) != n {
		t.Fatalf("read %d rows, want %d", len(rows), n)
	}
}
