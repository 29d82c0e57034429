package reconcile

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
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

// statusSignal is a fakeStore that closes wrote once a status write
// returned.
type statusSignal struct {
	*fakeStore
	once  sync.Once
	wrote chan struct{}
}

func (s *statusSignal) SetStatus(ctx context.Context, ids []int64, announced bool, lastErr string) error {
	err := s.fakeStore.SetStatus(ctx, ids, announced, lastErr)
	s.once.Do(func() { close(s.wrote) })
	return err
}

// The statuses a pass observed (here: a path adopted) are written while
// the speaker takes the pass's additions, not after them: during a bulk
// load they are the last pass's announcements, and GoBGP's server loop
// waited idle for their commits. The speaker here does not return from
// the addition until the adoption's status write returned.
func TestObservedStatusWrittenWhileSpeakerWorks(t *testing.T) {
	fs := newFakeStore()
	st := &statusSignal{fakeStore: fs, wrote: make(chan struct{})}
	sp := newFakeSpeaker()
	adopted := fs.add(testRule(t, 1, discard()), time.Time{})
	sp.set(testRule(t, 1, discard()).Match, discard(), true)
	added := fs.add(testRule(t, 2, discard()), time.Time{})
	addMatch := testRule(t, 2, discard()).Match
	var overlapped atomic.Bool
	sp.announceErr = func(r flowspec.Rule) error {
		if r.Match != addMatch {
			return nil
		}
		select {
		case <-st.wrote:
			overlapped.Store(true)
		case <-time.After(30 * time.Second):
		}
		return nil
	}
	r := New(testLogger(t), st, sp, Config{})
	r.runPass(context.Background(), true, nil)
	if !overlapped.Load() {
		t.Fatal("the adopted rule's status was not written while the speaker took the pass's addition")
	}
	if res := r.LastPass(); res.Added != 1 || res.Errors != 0 {
		t.Fatalf("pass: %+v, want one addition and no errors", res)
	}
	if s := fs.get(adopted); !s.Announced || s.LastError != "" {
		t.Fatalf("adopted rule's status: announced %v, error %q", s.Announced, s.LastError)
	}
	// The addition is reported once the mirror shows it (next pass).
	pass(t, r)
	if s := fs.get(added); !s.Announced {
		t.Fatal("added rule not reported announced by the next pass")
	}
}
