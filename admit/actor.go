package admit

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Source says through which door an actor came. It is recorded nowhere;
// it selects what the gate allows: static rules come only from
// SourceConfig, and only SourceConfig may store a rule for ever without a
// permission.
type Source string

// The sources of writes.
const (
	SourceSocket    Source = "socket"    // the control socket: the local operator
	SourceTCP       Source = "tcp"       // the TCP API, with or without a token
	SourceConfig    Source = "config"    // static [[rule]] entries
	SourceGuardrail Source = "guardrail" // the guardrails' enforcement after a reload
	SourceSignal    Source = "signal"    // a detector's signals, through a playbook ([[source]])
)

// Actor is who asks for a write. Name is recorded as the rule's actor in
// the audit trail; the zero Scope allows everything.
type Actor struct {
	Name   string
	Source Source
	// ReadOnly refuses every write (a token with role read).
	ReadOnly bool
	Scope    Scope
}

// CheckScope reports why a may not store r for the scope's sake (its
// prefixes and actions), or nil: the scope check of every write, for a
// caller that checks what it will write before it writes (a playbook's
// templates at load).
func (a Actor) CheckScope(r flowspec.Rule) error {
	if ref := scopeRefusal(a, r, -1); ref != nil {
		return ref
	}
	return nil
}

// who names a in messages: `token "cust"` over the TCP API.
func (a Actor) who() string {
	switch a.Source {
	case SourceTCP:
		return fmt.Sprintf("token %q", a.Name)
	case SourceSignal:
		return fmt.Sprintf("source %q", a.Name)
	}
	return fmt.Sprintf("%q", a.Name)
}

// Scope limits what an actor may do. The zero Scope limits nothing
// (an operator's unscoped token, the control socket).
type Scope struct {
	// Prefixes, if any: the actor acts only on rules whose destination
	// lies wholly inside one of them (a rule without a destination is
	// outside every prefix).
	Prefixes []netip.Prefix
	// Actions, if any: the only actions (flowspec.ActionNames) its rules
	// may use, and the only ones of rules it may change or withdraw.
	Actions []string
	// MaxActive caps the active rules it last wrote (0: no cap of its own).
	MaxActive int
	// MaxNewPerMinute caps the new rules it may create in any minute; 0
	// takes Limits.ScopedNewRulesPerMinute for a scoped actor, and no cap
	// for an unscoped one; negative means no cap.
	MaxNewPerMinute int
	// NeverExpires lets it store rules that never expire (otherwise only
	// [guardrails] allow_never_expires or the configuration's static rules
	// do).
	NeverExpires bool
	// OthersRules lets a scoped actor change and withdraw rules that
	// another actor wrote (inside its prefixes and actions).
	OthersRules bool
}

// Scoped reports whether s limits destinations, actions or active rules:
// such an actor acts only on its own rules unless OthersRules.
func (s Scope) Scoped() bool {
	return len(s.Prefixes) > 0 || len(s.Actions) > 0 || s.MaxActive > 0
}

// Sees reports whether an actor with scope s may see, and act on, a rule
// with match m: every rule without prefixes, else one whose destination
// lies wholly inside one of them.
func (s Scope) Sees(m flowspec.Match) bool {
	if len(s.Prefixes) == 0 {
		return true
	}
	d, ok := m.Destination()
	return ok && s.Covers(d)
}

// Covers reports whether d lies wholly inside one of s's prefixes.
func (s Scope) Covers(d netip.Prefix) bool {
	for _, p := range s.Prefixes {
		if p.Addr().Is4() == d.Addr().Is4() && p.Bits() <= d.Bits() && p.Contains(d.Addr()) {
			return true
		}
	}
	return false
}

// forbiddenAction returns the first action of r that s may not use, or "".
func (s Scope) forbiddenAction(r flowspec.Rule) string {
	if len(s.Actions) == 0 {
		return ""
	}
	for _, a := range flowspec.UsedActionNames(r) {
		if !slices.Contains(s.Actions, a) {
			return a
		}
	}
	return ""
}

func (s Scope) prefixList() string {
	out := make([]string, len(s.Prefixes))
	for i, p := range s.Prefixes {
		out[i] = p.String()
	}
	return strings.Join(out, ", ")
}
