package playbook

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/signals"
)

// State is where an incident is.
type State string

// The states of an incident.
const (
	// Active: the attack goes on; its step's rules are in force.
	Active State = "active"
	// Holding: the attack ended; the rules stay until EndsAt.
	Holding State = "holding"
	// Ended: the rules were withdrawn.
	Ended State = "ended"
)

// Rule states within an incident.
const (
	RuleActive    = "active"    // stored by the gate
	RuleWithdrawn = "withdrawn" // withdrawn by the incident (a later step or its end)
	RuleReplaced  = "replaced"  // a later step stored the same match again
	RuleShadow    = "shadow"    // shadow mode: the gate would store it
	RuleRefused   = "refused"   // the gate refused it (shadow mode: would refuse it)
	RuleFailed    = "failed"    // not rendered, or the store could not take it now (retried on the next signal)
)

// Incident is a copy of an incident as it stands.
type Incident struct {
	ID       int64
	Target   netip.Prefix
	Vector   signals.Vector
	Source   string // the source of the first signal: the actor of its rules
	Playbook string
	Shadow   bool
	// Step is the index of the step in force; Steps how many there are.
	Step, Steps int
	State       State
	OpenedAt    time.Time
	StepAt      time.Time // when Step began
	LastSignal  time.Time
	EndsAt      time.Time // Holding: when it ends
	EndedAt     time.Time
	// Signals counts every signal; StepSignals those since Step began.
	Signals, StepSignals int64
	PeakPPS, PeakBPS     uint64
	AttackID             string
	// Extended counts the TTL extensions of its rules.
	Extended int64
	Rules    []Rule
	Timeline []Entry
	// Omitted counts the timeline entries not kept ([incidents]
	// max_timeline).
	Omitted int64
}

// Rule is one rule an incident wrote (or, in shadow mode, would write).
type Rule struct {
	ID        int64 // 0 when not stored
	Text      string
	Step      int
	State     string
	ExpiresAt time.Time
	Error     string
	// Retry: a failed rule that is tried again (the store could not take
	// it, or it came over the source's rate of new rules).
	Retry bool
}

// Entry is one entry of an incident's timeline.
type Entry struct {
	At   time.Time
	Kind string // opened, rule, escalated, attack-ended, resumed, ended, note
	Text string
}

// incident is an open incident; mu guards everything but due, which the
// engine's mu guards.
type incident struct {
	mu    sync.Mutex
	inc   Incident
	pb    config.Playbook
	actor admit.Actor
	// maxTimeline is [incidents] max_timeline when it opened.
	maxTimeline int
	// retryAt is the earliest time failed rules are tried again.
	retryAt time.Time
	// refreshAfter is the earliest time a TTL extension that failed is
	// tried again on the timer.
	refreshAfter time.Time
	// savedAt is when it was last saved (Config.Store).
	savedAt time.Time
	// due is the next deadline (zero: none); the engine's mu.
	due time.Time
}

func (i *incident) note(at time.Time, kind, format string, args ...any) {
	if len(i.inc.Timeline) >= i.maxTimeline {
		i.inc.Omitted++
		return
	}
	i.inc.Timeline = append(i.inc.Timeline, Entry{At: at, Kind: kind, Text: fmt.Sprintf(format, args...)})
}

// snapshot copies i's incident; the caller holds i.mu.
func (i *incident) snapshot() Incident {
	c := i.inc
	c.Rules = slices.Clone(i.inc.Rules)
	c.Timeline = slices.Clone(i.inc.Timeline)
	c.Vector.DstPorts = slices.Clone(i.inc.Vector.DstPorts)
	c.Vector.SrcPorts = slices.Clone(i.inc.Vector.SrcPorts)
	return c
}

// deadlines are the times something is due for an incident (zero:
// nothing of that kind).
type deadlines struct {
	quiet    time.Time // the attack ends without signals (quiet_after)
	escalate time.Time // the next step (escalate_after)
	refresh  time.Time // a rule's TTL to extend without signals (quiet_after = "never")
	retry    time.Time // rules the store could not take, tried again
	end      time.Time // the end of hold-down
}

// deadlines returns what is due when for i; the caller holds i.mu.
func (i *incident) deadlines() deadlines {
	var d deadlines
	in := &i.inc
	switch in.State {
	case Active:
		if i.pb.QuietAfter > 0 {
			d.quiet = in.LastSignal.Add(i.pb.QuietAfter)
		}
		st := i.pb.Steps[in.Step]
		if in.Step+1 < len(i.pb.Steps) && st.EscalateAfter > 0 {
			d.escalate = in.StepAt.Add(st.EscalateAfter)
		}
		if i.pb.QuietAfter == 0 && !i.pb.Shadow {
			for _, r := range in.Rules {
				if r.Step == in.Step && r.State == RuleActive && !r.ExpiresAt.IsZero() {
					if t := r.ExpiresAt.Add(-st.TTL / 2); d.refresh.IsZero() || t.Before(d.refresh) {
						d.refresh = t
					}
				}
			}
			if !d.refresh.IsZero() && d.refresh.Before(i.refreshAfter) {
				d.refresh = i.refreshAfter // the last try failed
			}
		}
		for _, r := range in.Rules {
			if r.Step == in.Step && r.State == RuleFailed && r.Retry {
				d.retry = i.retryAt
				break
			}
		}
	case Holding:
		d.end = in.EndsAt
	}
	return d
}

// next is the earliest of d (zero: none).
func (d deadlines) next() time.Time {
	var n time.Time
	for _, t := range []time.Time{d.quiet, d.escalate, d.refresh, d.retry, d.end} {
		if !t.IsZero() && (n.IsZero() || t.Before(n)) {
			n = t
		}
	}
	return n
}

// printable keeps s on one printable line of at most n bytes: text from
// a detector goes into a rule's reason.
func printable(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if !unicode.IsPrint(r) || r == unicode.ReplacementChar {
			return '?'
		}
		return r
	}, s)
	if len(s) > n {
		s = s[:n]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}
