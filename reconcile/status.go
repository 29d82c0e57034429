package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ruleStatus is what this site's reconciler reports for one rule.
type ruleStatus struct {
	announced bool
	lastErr   string
}

// statusChunk is the most rules one status write names. A pass after a
// bulk load reports 100,000 rules and more at once; as one write, that
// held the store's single writer for seconds (API writes queued behind it
// missed their deadline: [store] write_timeout) and built the history of
// every rule in memory before its commit (150 MB at 100,000 rules). In
// chunks, other writes take turns and each chunk's garbage is freed as
// the next one is built.
const statusChunk = 5000

// statusBatch collects the statuses a pass wants to report. flush writes only
// those that differ from what was last written, batched by status, and
// remembers them: a pass that changes nothing writes nothing.
type statusBatch struct {
	want map[int64]ruleStatus
}

// reserve makes room for n more statuses when that is many (see
// workQueue.reserve).
func (b *statusBatch) reserve(n int) { b.want = reserved(b.want, n) }

func (b *statusBatch) set(id int64, announced bool, lastErr string) {
	if b.want == nil {
		b.want = make(map[int64]ruleStatus)
	}
	b.want[id] = ruleStatus{announced: announced, lastErr: lastErr}
}

// flush writes the changed statuses through d, statusChunk rules a write
// at most. What the store holds is
// the status on c's rows (as read, then as written); it is updated only
// for writes that succeeded, so failed ones are retried by a later pass.
// now gives the time each write returned.
func (b *statusBatch) flush(ctx context.Context, d Desired, c *source, now func() time.Time) (writes int, err error) {
	w := b.start(ctx, d, c, now)
	if w.total >= readAheadMin {
		c.prefetch(ctx, d)
	}
	writes, _, err = w.done(c)
	return writes, err
}

// statusWrites is a flush under way: its writes run off the loop, and
// done takes their results into the copy, on the loop.
type statusWrites struct {
	chunks []statusChunkWrite
	total  int // rules named by the writes
	wait   func()
}

type statusChunkWrite struct {
	st  ruleStatus
	ids []int64
	err error
	at  time.Time
}

// start begins the writes of flush and returns without waiting for
// them. The copy c is read here and changed only by done: nothing may
// call start again before done.
func (b *statusBatch) start(ctx context.Context, d Desired, c *source, now func() time.Time) *statusWrites {
	groups := make(map[ruleStatus][]int64)
	for id, st := range b.want {
		if rw := c.byID.get(id); rw != nil && rw.status() == st {
			continue
		}
		groups[st] = append(groups[st], id)
	}
	// Deterministic order keeps logs and tests readable.
	keys := make([]ruleStatus, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b ruleStatus) int {
		if a.announced != b.announced {
			if a.announced {
				return 1
			}
			return -1
		}
		return strings.Compare(a.lastErr, b.lastErr)
	})
	w := &statusWrites{}
	for _, st := range keys {
		all := groups[st]
		slices.Sort(all)
		w.total += len(all)
		for lo := 0; lo < len(all); lo += statusChunk {
			w.chunks = append(w.chunks, statusChunkWrite{st: st, ids: all[lo:min(lo+statusChunk, len(all))]})
		}
	}
	// The chunks go to the store statusParallel at a time (its committer
	// runs the next while the last one's commit syncs); the loop works
	// meanwhile (reads ahead, talks to the speaker). What the copy holds
	// changes on the loop, in order, once they returned (done). Every
	// chunk runs (none is skipped): a chunk not run would read as
	// written.
	chunks := w.chunks
	w.wait = startEach(len(chunks), statusParallel, func() bool { return false }, func(i int) {
		ch := &chunks[i]
		ch.err = d.SetStatus(ctx, ch.ids, ch.st.announced, ch.st.lastErr)
		ch.at = now()
	})
	return w
}

// done waits for the writes and records those that succeeded in c.
// rules is how many rules' statuses were written.
func (w *statusWrites) done(c *source) (writes, rules int, err error) {
	w.wait()
	for _, ch := range w.chunks {
		if ch.err != nil {
			if err == nil {
				err = fmt.Errorf("set status of %d rules: %w", len(ch.ids), ch.err)
			}
			continue
		}
		writes++
		rules += len(ch.ids)
		for _, id := range ch.ids {
			c.wrote(id, ch.st, ch.at)
		}
	}
	return writes, rules, err
}

// statusParallel is how many status writes of a pass are in flight at
// once.
const statusParallel = 2
