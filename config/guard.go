// This file holds ribkeeper's guardrails: the limits an operator sets
// so that no typo, runaway detector or script can blackhole or filter what
// must stay reachable.
//
// It is pure: a Guardrails (from the [guardrails] table) and rules in, a
// verdict out. The same checks run on every write path (API, CLI, static
// configuration) and, after a configuration reload, over the active rules,
// so a rule that a new guardrail forbids is withdrawn with the reason.
//
// Guardrails, by the name a Violation carries:
//
//	safelist                   no rule may match traffic to a safelisted prefix
//	prefix_length              destination prefix length within the family's range
//	ttl_required               every rule has a TTL
//	max_ttl                    no TTL longer than this
//	max_active_rules           quota of active rules in total
//	max_rules_per_destination  quota of active rules with the same destination prefix
//	max_new_rules_per_minute   rate of new rules (updates of existing ones are free)
//
// The first four concern one rule and also apply to rules already active
// (Guardrails.CheckActive); the quotas and the rate limit apply only when
// rules are added.

package config

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Guardrail names.
const (
	GuardSafelist        = "safelist"
	GuardPrefixLength    = "prefix_length"
	GuardTTLRequired     = "ttl_required"
	GuardMaxTTL          = "max_ttl"
	GuardMaxActive       = "max_active_rules"
	GuardMaxPerDest      = "max_rules_per_destination"
	GuardMaxNewPerMinute = "max_new_rules_per_minute"
)

// Range is an inclusive range of prefix lengths.
type Range struct{ Min, Max int }

// Contains reports whether n is in r.
func (r Range) Contains(n int) bool { return n >= r.Min && n <= r.Max }

func (r Range) String() string {
	if r.Min == r.Max {
		return fmt.Sprintf("/%d", r.Min)
	}
	return fmt.Sprintf("/%d to /%d", r.Min, r.Max)
}

// Guardrails is one set of guardrails. The zero Guardrails allows everything
// except routes shorter than a host route (see DefaultPrefixLengths).
// Treat it as read-only once in use.
type Guardrails struct {
	// Safelist are prefixes no rule may filter or blackhole.
	Safelist []netip.Prefix
	// PrefixLengths maps a family to the destination prefix lengths it
	// allows; a family without an entry gets DefaultPrefixLengths.
	PrefixLengths map[flowspec.Family]Range
	// RequireTTL refuses rules without a TTL.
	RequireTTL bool
	// MaxTTL is the longest TTL allowed (0: no limit).
	MaxTTL time.Duration
	// MaxActiveRules caps active rules in total (0: no cap).
	MaxActiveRules int
	// MaxRulesPerDestination caps active rules per destination prefix
	// (0: no cap).
	MaxRulesPerDestination int
	// MaxNewRulesPerMinute caps rules created per minute (0: no cap).
	MaxNewRulesPerMinute int
}

// DefaultPrefixLengths is what each family allows unless configured:
// routes (RTBH) are host routes only, /32 or /128; FlowSpec any length.
func DefaultPrefixLengths(f flowspec.Family) Range {
	switch f {
	case flowspec.IPv4Unicast:
		return Range{32, 32}
	case flowspec.IPv6Unicast:
		return Range{128, 128}
	case flowspec.IPv6:
		return Range{0, 128}
	}
	return Range{0, 32}
}

// Lengths returns the allowed destination prefix lengths of family f.
func (c *Guardrails) Lengths(f flowspec.Family) Range {
	if r, ok := c.PrefixLengths[f]; ok {
		return r
	}
	return DefaultPrefixLengths(f)
}

// NeedsActive reports whether Check needs the active rules (a quota is set).
func (c *Guardrails) NeedsActive() bool { return c.MaxActiveRules > 0 || c.MaxRulesPerDestination > 0 }

// Violation is a rule that a guardrail refuses.
type Violation struct {
	Guardrail string // one of the names above
	Rule      string // the rule's text
	Index     int    // position of the rule in the request (0 for one rule)
	// Field is the request field at fault: "text" or "ttl".
	Field string
	Msg   string // why, in operator terms
}

func (v *Violation) Error() string {
	return fmt.Sprintf("rule %q violates guardrail %s: %s", v.Rule, v.Guardrail, v.Msg)
}

// GuardInput is one rule to be stored: the rule and its TTL (0: none).
type GuardInput struct {
	Rule flowspec.Rule
	TTL  time.Duration
}

// CheckRule applies the guardrails that concern one rule on its own.
func (c *Guardrails) CheckRule(in GuardInput) *Violation {
	if v := c.checkMatch(in.Rule); v != nil {
		return v
	}
	text := in.Rule.String()
	switch {
	case c.RequireTTL && in.TTL <= 0:
		return &Violation{Guardrail: GuardTTLRequired, Rule: text, Field: "ttl", Msg: "every rule needs a TTL here; give one (e.g. 30m)"}
	case c.MaxTTL > 0 && in.TTL > c.MaxTTL:
		return &Violation{Guardrail: GuardMaxTTL, Rule: text, Field: "ttl", Msg: fmt.Sprintf("TTL %s is longer than the maximum %s", in.TTL, c.MaxTTL)}
	}
	return nil
}

// checkMatch applies the safelist and the prefix lengths.
func (c *Guardrails) checkMatch(r flowspec.Rule) *Violation {
	f := r.Match.Family()
	dst, hasDst := r.Match.Destination()
	if hasDst {
		if rg := c.Lengths(f); !rg.Contains(dst.Bits()) {
			msg := fmt.Sprintf("destination %s: %s allows prefix lengths %s", dst, f, rg)
			if f.IsRoute() {
				msg += " (a shorter blackhole needs [guardrails] prefix_lengths." + famKey(f) + ")"
			}
			return &Violation{Guardrail: GuardPrefixLength, Rule: r.String(), Field: "text", Msg: msg}
		}
	}
	// An accept-only FlowSpec rule filters nothing: the safelist allows it.
	if !f.IsRoute() && r.Action == flowspec.Accept() {
		return nil
	}
	for _, s := range c.Safelist {
		if s.Addr().Is6() != f.Is6() {
			continue
		}
		switch {
		case !hasDst:
			return &Violation{Guardrail: GuardSafelist, Rule: r.String(), Field: "text",
				Msg: fmt.Sprintf("the rule has no destination prefix, so it also matches the safelisted %s; add a destination outside it", s)}
		case dst.Overlaps(s):
			return &Violation{Guardrail: GuardSafelist, Rule: r.String(), Field: "text",
				Msg: fmt.Sprintf("destination %s overlaps the safelisted %s", dst, s)}
		}
	}
	return nil
}

func famKey(f flowspec.Family) string {
	switch f {
	case flowspec.IPv4:
		return "ipv4_flowspec"
	case flowspec.IPv6:
		return "ipv6_flowspec"
	case flowspec.IPv4Unicast:
		return "ipv4_unicast"
	}
	return "ipv6_unicast"
}

// Check applies every guardrail except the rate limit to ins, which are to
// be stored on top of active (the rules active now). A rule whose Match is
// already active is an update: it is checked on its own but counts
// against no quota. It returns the first violation, or nil.
func (c *Guardrails) Check(ins []GuardInput, active []flowspec.Match) *Violation {
	for i, in := range ins {
		if v := c.CheckRule(in); v != nil {
			v.Index = i
			return v
		}
	}
	if !c.NeedsActive() {
		return nil
	}
	have := make(map[flowspec.Match]bool, len(active))
	perDest := map[netip.Prefix]int{}
	for _, m := range active {
		have[m] = true
		if d, ok := m.Destination(); ok {
			perDest[d]++
		}
	}
	total := len(have)
	for i, in := range ins {
		m := in.Rule.Match
		if have[m] {
			continue
		}
		have[m] = true
		total++
		if c.MaxActiveRules > 0 && total > c.MaxActiveRules {
			return &Violation{Guardrail: GuardMaxActive, Rule: in.Rule.String(), Index: i, Field: "text",
				Msg: fmt.Sprintf("it would be active rule number %d; the maximum is %d", total, c.MaxActiveRules)}
		}
		if d, ok := m.Destination(); ok {
			perDest[d]++
			if c.MaxRulesPerDestination > 0 && perDest[d] > c.MaxRulesPerDestination {
				return &Violation{Guardrail: GuardMaxPerDest, Rule: in.Rule.String(), Index: i, Field: "text",
					Msg: fmt.Sprintf("%d active rules would have destination %s; the maximum is %d", perDest[d], d, c.MaxRulesPerDestination)}
			}
		}
	}
	return nil
}

// NewRules reports which of ins are not yet active (they would be created).
func NewRules(ins []GuardInput, active []flowspec.Match) int {
	have := make(map[flowspec.Match]bool, len(active))
	for _, m := range active {
		have[m] = true
	}
	n := 0
	for _, in := range ins {
		if !have[in.Rule.Match] {
			have[in.Rule.Match] = true
			n++
		}
	}
	return n
}

// CheckActive applies the per-rule guardrails to a rule that is already
// active, with remaining its time left (0: never expires). It is what a
// configuration reload runs over the active rules.
func (c *Guardrails) CheckActive(r flowspec.Rule, remaining time.Duration) *Violation {
	if v := c.checkMatch(r); v != nil {
		return v
	}
	switch {
	case c.RequireTTL && remaining <= 0:
		return &Violation{Guardrail: GuardTTLRequired, Rule: r.String(), Field: "ttl", Msg: "the rule never expires and every rule now needs a TTL"}
	case c.MaxTTL > 0 && remaining > c.MaxTTL:
		return &Violation{Guardrail: GuardMaxTTL, Rule: r.String(), Field: "ttl",
			Msg: fmt.Sprintf("it expires in %s, later than the maximum TTL %s", remaining.Round(time.Second), c.MaxTTL)}
	}
	return nil
}

// RateLimiter is the rate limit on new rules: a sliding window of one minute.
// It is safe for concurrent use and survives configuration reloads (the
// limit is passed on each call).
type RateLimiter struct {
	mu    sync.Mutex
	times []time.Time // creation times within the last minute, oldest first
}

// Allow records n new rules at now if, with them, at most limit rules were
// created in the minute up to now, and reports whether it did. limit 0
// allows everything. On refusal it also returns how long until enough of
// the window has passed.
func (l *RateLimiter) Allow(now time.Time, n, limit int) (bool, time.Duration) {
	if limit <= 0 || n == 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	cut := now.Add(-time.Minute)
	i := 0
	for i < len(l.times) && !l.times[i].After(cut) {
		i++
	}
	l.times = l.times[i:]
	if len(l.times)+n > limit {
		if n > limit {
			return false, time.Minute
		}
		wait := l.times[len(l.times)+n-limit-1].Sub(cut)
		return false, wait
	}
	for range n {
		l.times = append(l.times, now)
	}
	return true, 0
}

// RateViolation builds the violation of the rate limit for rule.
func RateViolation(rule flowspec.Rule, index, limit int, retry time.Duration) *Violation {
	return &Violation{Guardrail: GuardMaxNewPerMinute, Rule: rule.String(), Index: index, Field: "text",
		Msg: fmt.Sprintf("more than %d new rules in one minute; retry in %s", limit, retry.Round(time.Second))}
}

// GuardHolder is the current guardrails and the rate limiter's state: a
// configuration reload swaps the Guardrails atomically while writes go on,
// and the limiter's window survives it.
type GuardHolder struct {
	cfg atomic.Pointer[Guardrails]
	// RateLimiter is the rate limit on new rules.
	RateLimiter RateLimiter
}

// NewGuardHolder returns a GuardHolder with c.
func NewGuardHolder(c Guardrails) *GuardHolder {
	h := &GuardHolder{}
	h.Set(c)
	return h
}

// Set replaces the guardrails.
func (h *GuardHolder) Set(c Guardrails) { h.cfg.Store(&c) }

// Guardrails returns the current guardrails (the zero Guardrails before Set).
func (h *GuardHolder) Guardrails() *Guardrails {
	if c := h.cfg.Load(); c != nil {
		return c
	}
	return &Guardrails{}
}
