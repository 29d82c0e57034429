package reconcile

import (
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Storm control. After the speaker restarted, or whenever the RIB is found
// empty while many rules are desired, every rule is announced again at
// once: that burst goes to every upstream router. Config.AnnounceRate
// paces it with a token bucket: each pass announces what the bucket holds
// (at most one second worth) and queues the rest, and the loop wakes again
// when the bucket has refilled. Only additions during such a storm are
// paced: updates, withdrawals and expiry are never delayed, and ordinary
// additions (an API bulk write into a populated RIB) go at full speed.
//
// Queued additions are not compared again by every pass (at 100,000 rules
// that walk would cost more than the announcing): a pass takes its batch
// from the front of the queue and checks each Match there in O(1) (still
// desired, with the same rule, still not in the RIB). Anything that
// changes a queued Match marks it dirty as usual, so the comparison plans
// it afresh; a stale queue entry is dropped when it comes up.
//
// Order inside a pass: retiring rules (expired or withdrawn by an
// operator) are withdrawn first, then additions and updates, then orphans.
// Make-before-break matters where a new path replaces an old one: an update
// replaces the path in place (one UPDATE), and an orphan may be the old
// form of a rule just re-added, so orphans still go last. A retiring rule
// is replaced by nothing, so withdrawing it first loses no protection and
// keeps expiry exact when a large batch of additions runs in the same
// pass.

// The process's first load (until Loaded) is never paced: a session
// established meanwhile came up with this process, holds nothing of ours,
// and would have got GoBGP's whole table at once had the load finished
// before it came up; pacing it only made a restart without graceful
// restart slower than GoBGP's own initial sync (5 s at the default rate
// for 100,000 rules, against 4.4 s for GoBGP to send them all). Graceful-
// restart sessions wait for the load anyway (bgp.Config.HoldPeers).
//
// Pacing protects established sessions only. While no peer is
// established (right after a restart the RIB starts loading before the
// routers have reconnected) additions reach no router, and a session that
// comes up later gets GoBGP's own dump of the table, the same as it would
// from GoBGP alone. So a storm with no established peer is announced at
// once, and every pass asks the speaker again (EstablishedPeers). A session
// that comes up during such a pass gets the rest of that pass unpaced;
// the passes after it are paced.

// stormWindow is how much the token bucket holds: one pass's batch. A
// pass costs a few milliseconds of its own, so a batch must be large for
// that overhead not to slow the rate down; one second at the default rate
// (20,000/s) is what GoBGP itself sends a new peer in about a second.
const stormWindow = time.Second

// pacer is the token bucket of storm control.
type pacer struct {
	active bool
	tokens float64
	at     time.Time
	next   time.Time // when the loop must wake for the next batch; zero if none
}

// begin decides whether this pass is paced and how many additions it may
// make: -1 for unpaced. restarted reports a speaker restart since the last
// pass; empty an empty RIB at the start of this one; peersUp whether any
// session is established.
func (p *pacer) begin(rate int, restarted, empty, peersUp bool, adds int, now time.Time) int {
	p.next = time.Time{}
	if rate <= 0 {
		p.active = false
		return -1
	}
	burst := max(float64(rate)*stormWindow.Seconds(), 1)
	if !p.active && (restarted || empty) && float64(adds) > burst {
		p.active, p.tokens, p.at = true, burst, now
	}
	if !p.active {
		return -1
	}
	if adds == 0 {
		p.active = false
		return -1
	}
	if !peersUp {
		// Nothing to protect: everything at once, as an ordinary pass
		// (the storm queue costs more than it saves here: 100,000 rules
		// took 6.8 s in batches, 4.3 s in one pass).
		p.active = false
		return -1
	}
	p.tokens = min(burst, p.tokens+float64(rate)*now.Sub(p.at).Seconds())
	p.at = now
	return int(p.tokens)
}

// spent takes n tokens at now (the end of the announcing); when additions
// remain, it schedules the next batch. The tokens refill from the start of
// the pass, so the time the pass spent announcing counts: a pass that took
// longer than its batch's worth is followed at once.
func (p *pacer) spent(n, left, rate int, now time.Time) {
	if !p.active {
		return
	}
	burst := max(float64(rate)*stormWindow.Seconds(), 1)
	if left == 0 {
		p.active = false // the storm is over
		return
	}
	p.tokens -= float64(n)
	if now.After(p.at) {
		p.tokens = min(burst, p.tokens+float64(rate)*now.Sub(p.at).Seconds())
		p.at = now
	}
	// Wake when a batch's worth is there (or all that is left), not for a
	// trickle: each pass has a fixed cost.
	need := min(float64(left), burst) - p.tokens
	if need <= 0 {
		p.next = now
		return
	}
	p.next = p.at.Add(time.Duration(need / float64(rate) * float64(time.Second)))
}

// enqueue adds the Matches of adds to the storm queue (once each).
func (q *workQueue) enqueue(adds []Item) {
	if q.queued == nil {
		q.queued = make(map[flowspec.Match]struct{}, len(adds))
	}
	for _, it := range adds {
		if _, ok := q.queued[it.Match]; !ok {
			q.queued[it.Match] = struct{}{}
			q.queue = append(q.queue, it.Match)
		}
	}
}

// unpace empties the storm queue and returns what it held: pacing ended,
// and those Matches must be compared again.
func (q *workQueue) unpace(now time.Time) (dropped []flowspec.Match) {
	dropped = q.queue
	q.queue, q.queued = nil, nil
	q.pace.next = now
	return dropped
}

// dequeue takes up to n additions from the front of the storm queue and
// returns them as plan items, dropping entries that are stale: no longer
// desired (or retiring) in the view (want says), or already in the RIB
// (present says; a path that came in is a changed, and so dirty, Match).
// ok is false when the mirror is not initialised (then nothing is taken).
func (q *workQueue) dequeue(n int, want func(flowspec.Match) (Want, bool), present func(flowspec.Match) (bool, bool), buf []Item) (items []Item, ok bool) {
	items = buf[:0]
	i := 0
	for ; i < len(q.queue) && len(items) < n; i++ {
		m := q.queue[i]
		w, desired := want(m)
		if !desired || w.Retire != "" {
			delete(q.queued, m)
			continue
		}
		in, ok := present(m)
		if !ok {
			q.queue = q.queue[i:]
			return items, false
		}
		delete(q.queued, m)
		if in {
			continue
		}
		items = append(items, Item{ID: w.ID, Match: m, Action: w.Action})
	}
	clear(q.queue[:i])
	q.queue = q.queue[i:]
	if len(q.queue) == 0 {
		// Give the memory of a large storm back.
		q.queue, q.queued = nil, nil
	}
	return items, true
}

// checkRestart notices a speaker restart (a new epoch): what was seen in
// the old RIB says nothing about the new one, and the re-announcement that
// follows is counted as its own drift kind and paced.
func (r *Reconciler) checkRestart() bool {
	e := r.s.Epoch()
	if !r.epochKnown {
		r.epoch, r.epochKnown = e, true
		return false
	}
	if e == r.epoch {
		return false
	}
	r.epoch = e
	r.restarts.Add(1)
	r.src.byID.all(func(rw *row) { rw.flags &^= rowSeen })
	r.work.restarted()
	r.reannouncing = true
	r.log.Warn("speaker restarted; comparing every rule again")
	return true
}

// peersUp reports whether any BGP session is established.
func (r *Reconciler) peersUp() bool { return r.s.EstablishedPeers() > 0 }
