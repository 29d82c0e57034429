// Package signals is the model of what a detector tells ribkeeper: an
// attack seen (or no longer seen) on a target. Every way in (the signed
// JSON webhook, Alertmanager, FastNetMon's notify hook and its GoBGP API
// calls) turns what it receives into a Signal and hands it to a Sink; the
// playbook engine is the Sink that turns signals into rules through the
// admission gate, the source being the actor.
//
// This package holds only the model and its bounds; it imports nothing of
// ribkeeper, so the ways in and the engine depend on it and not on each
// other.
package signals

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// State is where an attack is: a detector reports its start, that it goes
// on, and its end.
type State string

// The states of a signal.
const (
	Start   State = "start"
	Ongoing State = "ongoing"
	End     State = "end"
)

// Bounds on what one signal may carry: a detector's message is not an
// unbounded store.
const (
	MaxPorts       = 16   // per list of ports in a Vector
	MaxIDBytes     = 128  // AttackID, Source
	MaxDetailBytes = 1024 // Detail
)

// Vector is what the attack traffic looks like, as far as the detector
// knows: every field is optional (zero: any).
type Vector struct {
	// Protocol is an IP protocol name ("udp", "tcp", "icmp", ...) or
	// number as text; "" for any.
	Protocol string
	SrcPorts []uint16
	DstPorts []uint16
	// TCPFlags in the rule language's syntax (e.g. "syn"), "" for any.
	TCPFlags string
}

// Key is a stable text form of v: signals for the same target with the
// same key are one incident.
func (v Vector) Key() string {
	var b strings.Builder
	b.WriteString(strings.ToLower(v.Protocol))
	for _, l := range [][]uint16{v.SrcPorts, v.DstPorts} {
		b.WriteByte('|')
		for i, p := range l {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprint(&b, p)
		}
	}
	b.WriteByte('|')
	b.WriteString(strings.ToLower(v.TCPFlags))
	return b.String()
}

// Signal is one report of a detector.
type Signal struct {
	// Source is the configured name of the detector that sent it: the
	// actor of every rule it causes.
	Source string
	// Target is the attacked address or prefix.
	Target netip.Prefix
	Vector Vector
	// PPS and BPS are the attack's rate as the detector measured it (0:
	// unknown).
	PPS, BPS uint64
	// Confidence is the detector's confidence, 0 to 1 (0: unknown).
	Confidence float64
	// AttackID is the detector's own id of the attack, if it has one.
	AttackID string
	State    State
	// At is when the signal was received (the daemon's clock, not the
	// detector's).
	At time.Time
	// Detail is free text for people (an alert's summary).
	Detail string
}

// ErrInvalid is wrapped by every error of Check.
var ErrInvalid = errors.New("invalid signal")

// Check reports the first thing wrong with s, naming the field.
func (s Signal) Check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
	}
	switch {
	case s.Source == "" || len(s.Source) > MaxIDBytes:
		return bad("source must be 1 to %d bytes", MaxIDBytes)
	case !s.Target.IsValid():
		return bad("target must be an IP address or prefix, e.g. 192.0.2.10/32")
	case s.Target != s.Target.Masked():
		return bad("target %s has host bits set; use %s", s.Target, s.Target.Masked())
	case len(s.Vector.SrcPorts) > MaxPorts || len(s.Vector.DstPorts) > MaxPorts:
		return bad("at most %d source and %d destination ports", MaxPorts, MaxPorts)
	case len(s.Vector.Protocol) > 16 || len(s.Vector.TCPFlags) > 64:
		return bad("protocol or tcp flags too long")
	case s.Confidence < 0 || s.Confidence > 1 || s.Confidence != s.Confidence:
		return bad("confidence must be between 0 and 1")
	case len(s.AttackID) > MaxIDBytes:
		return bad("attack id longer than %d bytes", MaxIDBytes)
	case len(s.Detail) > MaxDetailBytes:
		return bad("detail longer than %d bytes", MaxDetailBytes)
	}
	switch s.State {
	case Start, Ongoing, End:
	default:
		return bad("state %q is not one of start, ongoing, end", s.State)
	}
	return nil
}

// Sink takes signals. Accept returns once the signal is accepted (and,
// for the engine, its effect on the incident decided); an error says why
// it was not, in words for the detector's operator.
type Sink interface {
	Accept(ctx context.Context, s Signal) error
}
