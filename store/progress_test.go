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
	// well within it (even on a busy machine), the whole walk does not:
	// halfway through, the walk's consumer holds it for longer than the
	// timeout, as a reconciler compacting a million rules does.
	s.timeout = time.Second
	start := time.Now()
	read := 0
	err := s.EachActive(ctx, func(*Rule) error {
		if read++; read == n/2 {
			<-time.After(time.Until(start.Add(s.timeout * 3 / 2)))
		}
		return nil
	})
	took := time.Since(start)
	t.Logf("read %d rows in %v with a %v timeout", read, took, s.timeout)
	if err != nil {
		t.Fatalf("full read with a %v timeout: %v", s.timeout, err)
	}
	if read != n {
		t.Fatalf("read %d rows, want %d", read, n)
	}
}
