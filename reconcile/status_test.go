package reconcile

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/store"
)

// The status reporter writes only statuses that differ from what the
// store holds, one write per distinct status, and records only what was
// written: a failed write is tried again by the next report.
func TestStatusReporter(t *testing.T) {
	st := newFakeStore()
	var rows []store.Rule
	for i := range 4 {
		id := st.add(testRule(t, i, discard()), time.Time{})
		rows = append(rows, st.get(id))
	}
	var src source
	src.load(rows)
	ctx := context.Background()

	var b statusBatch
	b.set(rows[0].ID, true, "")
	b.set(rows[1].ID, true, "")
	b.set(rows[2].ID, false, "speaker busy")
	b.set(rows[3].ID, false, "") // what the store holds already
	writes, err := b.flush(ctx, st, &src, time.Now)
	if err != nil || writes != 2 {
		t.Fatalf("flush: %d writes, %v; want one per distinct changed status (2)", writes, err)
	}
	if g := st.get(rows[0].ID); !g.Announced || st.get(rows[2].ID).LastError != "speaker busy" {
		t.Fatalf("statuses not written: %+v", g)
	}
	// Unchanged: nothing to write.
	if writes, _ := b.flush(ctx, st, &src, time.Now); writes != 0 {
		t.Fatalf("second flush of the same statuses wrote %d times", writes)
	}
	// A failed write is not recorded as the store's: the next report
	// writes it.
	st.writeErr = errors.New("database is locked")
	var c statusBatch
	c.set(rows[3].ID, true, "")
	if _, err := c.flush(ctx, st, &src, time.Now); err == nil {
		t.Fatal("flush did not report the failed write")
	}
	st.writeErr = nil
	if writes, err := c.flush(ctx, st, &src, time.Now); err != nil || writes != 1 || !st.get(rows[3].ID).Announced {
		t.Fatalf("retry after a failed write: %d writes, %v", writes, err)
	}
}

// A status report of more rules than statusChunk is written in chunks of
// at most statusChunk: one write of a bulk load's 100,000 statuses held
// the store's writer for seconds. Every status is written all the same.
func TestStatusWrittenInChunks(t *testing.T) {
	st := newFakeStore()
	n := 2*statusChunk + 7
	var rows []store.Rule
	for i := range n {
		id := st.add(testRule(t, i, discard()), time.Time{})
		rows = append(rows, st.get(id))
	}
	var src source
	src.load(rows)
	var b statusBatch
	for _, r := range rows {
		b.set(r.ID, true, "")
	}
	writes, err := b.flush(context.Background(), st, &src, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if writes != 3 || st.mostStatus > statusChunk {
		t.Errorf("%d writes, the largest of %d rules; want 3 of at most %d", writes, st.mostStatus, statusChunk)
	}
	for _, r := range rows {
		if !st.get(r.ID).Announced {
			t.Fatalf("rule %d: status not written", r.ID)
		}
	}
	if writes, _ := b.flush(context.Background(), st, &src, time.Now); writes != 0 {
		t.Errorf("the same report again wrote %d times", writes)
	}
}
