package admit

import (
	"sync"
	"time"
)

// actorRates is the rate limit on new rules per actor: a sliding window
// of one minute per actor name. Actors are the configured tokens, so the
// map is bounded by the configuration; an actor whose window empties is
// dropped.
type actorRates struct {
	mu sync.Mutex
	m  map[string][]time.Time // creation times within the last minute, oldest first
}

// window drops the times of actor's window older than a minute before
// now and returns what is left. The caller holds mu.
func (r *actorRates) window(actor string, now time.Time) []time.Time {
	ts := r.m[actor]
	cut := now.Add(-time.Minute)
	i := 0
	for i < len(ts) && !ts[i].After(cut) {
		i++
	}
	ts = ts[i:]
	if len(ts) == 0 {
		delete(r.m, actor)
		return nil
	}
	r.m[actor] = ts
	return ts
}

// peek reports whether actor may create n more rules at now with at most
// limit a minute, and if not, how long until it may.
func (r *actorRates) peek(actor string, now time.Time, n, limit int) (bool, time.Duration) {
	if n == 0 || limit <= 0 {
		return true, 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string][]time.Time{}
	}
	ts := r.window(actor, now)
	if len(ts)+n <= limit {
		return true, 0
	}
	if n > limit {
		return false, time.Minute
	}
	// The window must lose len(ts)+n-limit entries: wait until the last
	// of them is a minute old.
	return false, ts[len(ts)+n-limit-1].Add(time.Minute).Sub(now)
}

// record counts n new rules of actor at now.
func (r *actorRates) record(actor string, now time.Time, n int) {
	if n == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string][]time.Time{}
	}
	ts := r.window(actor, now)
	for range n {
		ts = append(ts, now)
	}
	r.m[actor] = ts
}
