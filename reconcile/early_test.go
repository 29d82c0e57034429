package reconcile

import (
	"context"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/flowspec"
)

// gatedSpeaker is a fakeSpeaker whose Announce and Withdraw, once called,
// wait until the test lets them go on: a speaker call still running.
type gatedSpeaker struct {
	*fakeSpeaker
	entered chan struct{}
	release chan struct{}
}

func (g *gatedSpeaker) Announce(ctx context.Context, rules []flowspec.Rule) []error {
	g.entered <- struct{}{}
	<-g.release
	return g.fakeSpeaker.Announce(ctx, rules)
}

func (g *gatedSpeaker) Withdraw(ctx context.Context, ms []flowspec.Match) []error {
	g.entered <- struct{}{}
	<-g.release
	return g.fakeSpeaker.Withdraw(ctx, ms)
}

// The early change reaches the speaker before the caller's commit starts:
// AnnounceEarly and WithdrawEarly return once the speaker has taken it,
// so the commit does not compete with the UPDATE for the CPU; a speaker
// call that takes longer than EarlyWait does not hold the commit up.
func TestEarlyReturnsOnceTheSpeakerTookIt(t *testing.T) {
	for _, op := range []string{"announce", "withdraw"} {
		t.Run(op, func(t *testing.T) {
			fc := clock.NewFake(time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC))
			sp := &gatedSpeaker{fakeSpeaker: newFakeSpeaker(), entered: make(chan struct{}), release: make(chan struct{})}
			r := New(testLogger(t), newFakeStore(), sp, Config{Clock: fc})
			rule := testRule(t, 1, discard())
			if op == "withdraw" {
				sp.fakeSpeaker.Announce(context.Background(), []flowspec.Rule{rule})
			}
			early := func() {
				if op == "announce" {
					r.AnnounceEarly(rule)
				} else {
					r.WithdrawEarly(rule.Match)
				}
			}
			taken := func() bool {
				_, in := sp.snapshot()[rule.Match]
				return in == (op == "announce")
			}
			limit := time.NewTimer(30 * time.Second)
			defer limit.Stop()
			wait := func(ch <-chan struct{}, what string) {
				t.Helper()
				select {
				case <-ch:
				case <-limit.C:
					t.Fatalf("%s: not within 30 s", what)
				}
			}

			// The speaker takes it: the call returns after it, not before.
			done := make(chan struct{})
			go func() { early(); close(done) }()
			wait(sp.entered, "speaker called")
			eventually(t, 30*time.Second, "a wait for the speaker call armed", func() bool {
				at, ok := fc.Next()
				return ok && at.Equal(fc.Now().Add(EarlyWait))
			})
			select {
			case <-done:
				t.Fatalf("%s returned while its speaker call was still running", op)
			default:
			}
			sp.release <- struct{}{}
			wait(done, op+" returned after the speaker call")
			if !taken() {
				t.Fatalf("%s returned before the speaker had taken the change", op)
			}

			// A speaker call that hangs holds the caller for EarlyWait only.
			r.Settle(rule.Match)
			done = make(chan struct{})
			go func() { early(); close(done) }()
			wait(sp.entered, "speaker called again")
			eventually(t, 30*time.Second, "a wait for the second speaker call armed", func() bool {
				at, ok := fc.Next()
				return ok && at.Equal(fc.Now().Add(EarlyWait))
			})
			fc.Advance(EarlyWait)
			wait(done, op+" returned after EarlyWait")
			sp.release <- struct{}{} // the call goes on in the background
			r.Settle(rule.Match)     // waits for it to have returned
			if !taken() {
				t.Fatalf("the speaker call of the second %s did not complete", op)
			}
		})
	}
}
