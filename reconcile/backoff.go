package reconcile

import (
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// op is what the reconciler asks of the speaker for one Match.
type op uint8

const (
	opAnnounce op = iota + 1
	opWithdraw
)

// attempt remembers a failed request for one Match, so that the next passes
// retry it with exponential backoff (transient) or never (terminal), without
// holding up any other Match. It applies only while the request is the same:
// a different op or action for the Match is a new request, tried at once.
type attempt struct {
	op       op
	action   flowspec.Action // for opAnnounce
	failures int
	next     time.Time // earliest retry; unused when terminal
	terminal bool
}

func (a *attempt) same(o op, act flowspec.Action) bool {
	return a.op == o && (o != opAnnounce || a.action == act)
}

// backoff is a capped exponential delay: base, 2·base, 4·base ... max.
type backoff struct {
	base, max time.Duration
}

// delay returns the wait after the given number of consecutive failures (≥1).
func (b backoff) delay(failures int) time.Duration {
	d := b.base
	for i := 1; i < failures && d < b.max; i++ {
		d *= 2
	}
	return min(d, b.max)
}

// expect is a change the speaker accepted that the mirror does not show
// yet. Until the mirror catches up (or the settle timeout passes) the same
// change is not requested again, so a pass that runs in between neither
// repeats work nor counts it as drift.
type expect struct {
	op       op
	action   flowspec.Action // for opAnnounce
	deadline time.Time
}

// met reports whether the mirror shows the expected change.
func (e expect) met(a flowspec.Action, present bool) bool {
	if e.op == opWithdraw {
		return !present
	}
	return present && a == e.action
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
