package reconcile

import (
	"time"
)

// Storm control. After the speaker restarted, or whenever the RIB is found
// empty while many rules are desired, every rule is announced again at
// once: that burst goes to every upstream router. Config.AnnounceRate
// paces it with a token bucket: each pass announces what the bucket holds
// (at most 50 ms worth) and leaves the rest pending, and the loop wakes
// again when the bucket has refilled. Only additions during such a storm
// are paced: updates, withdrawals and expiry are never delayed, and
// ordinary additions (an API bulk write into a populated RIB) go at full
// speed.
//
// Order inside a pass: retiring rules (expired or withdrawn by an
// operator) are withdrawn first, then additions and updates, then orphans.
// Make-before-break matters where a new path replaces an old one: an update
// replaces the path in place (one UPDATE), and an orphan may be the old
// form of a rule just re-added, so orphans still go last. A retiring rule
// is replaced by nothing, so withdrawing it first loses no protection and
// keeps expiry exact when a large batch of additions runs in the same
// pass.

// Restarter is optionally implemented by a Speaker that can say when its
// RIB was recreated (bgp.Speaker's Epoch) and count peers that reset and
// came back (GoBGP re-sends them the whole table by itself).
type Restarter interface {
	Epoch() uint64
	PeerReestablished() uint64
}

// stormWindow is how much the token bucket holds: one pass's batch.
const stormWindow = 50 * time.Millisecond

// pacer is the token bucket of storm control.
type pacer struct {
	active bool
	tokens float64
	at     time.Time
	next   time.Time // when the loop must wake for the next batch; zero if none
}

// begin decides whether this pass is paced and how many additions it may
// make: -1 for unpaced. restarted reports a speaker restart since the last
// pass; empty an empty RIB at the start of this one.
func (p *pacer) begin(rate int, restarted, empty bool, adds int, now time.Time) int {
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
	p.tokens = min(burst, p.tokens+float64(rate)*now.Sub(p.at).Seconds())
	p.at = now
	return int(p.tokens)
}

// spent takes n tokens; when additions remain, it schedules the next
// batch.
func (p *pacer) spent(n, left, rate int) {
	if !p.active {
		return
	}
	p.tokens -= float64(n)
	if left == 0 {
		p.active = false // the storm is over
	}
	if left > 0 {
		need := min(float64(left), max(float64(rate)*stormWindow.Seconds(), 1)) - p.tokens
		p.next = p.at.Add(time.Duration(max(need, 1) / float64(rate) * float64(time.Second)))
	}
}

// checkRestart notices a speaker restart (a new epoch): what was seen in
// the old RIB says nothing about the new one, and the re-announcement that
// follows is counted as its own drift kind and paced.
func (r *Reconciler) checkRestart() bool {
	rs, ok := r.s.(Restarter)
	if !ok {
		return false
	}
	e := rs.Epoch()
	if !r.epochKnown {
		r.epoch, r.epochKnown = e, true
		return false
	}
	if e == r.epoch {
		return false
	}
	r.epoch = e
	r.restarts.Add(1)
	clear(r.seen)
	clear(r.expects)
	r.reannouncing = true
	r.log.Warn("speaker restarted; announcing every rule again")
	return true
}
