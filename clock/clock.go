// Package clock is the time the daemon's loops run on: a reading of now and
// timers. Production uses Real; tests use Fake, which moves only when the
// test says so and fires every timer whose time has come, so that expiry,
// backoff and resync are tested without sleeping or asserting a wall-clock
// window.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock reads the time and arms timers.
type Clock interface {
	Now() time.Time
	// NewTimer returns a stopped timer.
	NewTimer() Timer
}

// Timer delivers the time on C once it fires. Reset arms it to fire after
// d (discarding any earlier arming, fired or not); Stop disarms it.
type Timer interface {
	C() <-chan time.Time
	Reset(d time.Duration)
	Stop()
}

// Real is the system clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer returns a stopped time.Timer.
func (Real) NewTimer() Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return realTimer{t}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }

// Reset: since Go 1.23 a Reset or Stop discards a stale expiry, so no
// draining is needed.
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }
func (r realTimer) Stop()                 { r.t.Stop() }

// Fake is a clock that moves only by Advance or Set. Its timers fire (a
// value on a channel with room for one) when the clock reaches their time.
// Safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	armed  chan struct{}
}

// NewFake returns a Fake reading start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, armed: make(chan struct{}, 1)}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a stopped fake timer.
func (f *Fake) NewTimer() Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	f.timers = append(f.timers, t)
	return t
}

// Advance moves the clock on by d and fires the timers that are due.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set moves the clock to t (never back) and fires the timers that are due,
// earliest first.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	if t.After(f.now) {
		f.now = t
	}
	var due []*fakeTimer
	for _, tm := range f.timers {
		if tm.armed && !tm.at.After(f.now) {
			due = append(due, tm)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	now := f.now
	for _, tm := range due {
		tm.armed = false
		select {
		case tm.c <- now:
		default:
		}
	}
	f.mu.Unlock()
}

// Armed delivers a wake-up each time a timer is armed: a test waits on it
// to know the loop has scheduled its next wake before moving the clock.
func (f *Fake) Armed() <-chan struct{} { return f.armed }

// Next returns when the earliest armed timer fires; ok is false if none is
// armed.
func (f *Fake) Next() (at time.Time, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, tm := range f.timers {
		if tm.armed && (!ok || tm.at.Before(at)) {
			at, ok = tm.at, true
		}
	}
	return at, ok
}

type fakeTimer struct {
	f     *Fake
	c     chan time.Time
	at    time.Time
	armed bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Reset(d time.Duration) {
	t.f.mu.Lock()
	// Discard a value that fired before this arming, as time.Timer does.
	select {
	case <-t.c:
	default:
	}
	t.at, t.armed = t.f.now.Add(d), true
	fire := d <= 0
	if fire {
		t.armed = false
		select {
		case t.c <- t.f.now:
		default:
		}
	}
	t.f.mu.Unlock()
	if !fire {
		select {
		case t.f.armed <- struct{}{}:
		default:
		}
	}
}

func (t *fakeTimer) Stop() {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.armed = false
	select {
	case <-t.c:
	default:
	}
}
