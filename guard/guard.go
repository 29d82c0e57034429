// Package guard owns ribkeeper's guardrails: the limits an operator sets
// so that no typo, runaway detector or script can blackhole or filter what
// must stay reachable. Every write path uses it: the HTTP API (add,
// update, batch, and the early announcement that precedes a commit), the
// static [[rule]] entries of the configuration, and the check of the
// active rules after a configuration change (Enforce).
//
// The limits themselves are plain values parsed by package config
// (config.Guardrails); this package holds the current ones (swapped
// atomically on reload) and the state of the rate limit, which survives
// reloads. Quotas are counted by the store (Counter), never by reading
// every active rule.
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
//	token.max_active_rules     quota of a scoped API token: the active rules it wrote
//
// The first four concern one rule and also apply to rules already active
// (CheckActive, Enforce); the quotas and the rate limit apply only when
// rules are added. Static rules are permanent by design: only the safelist
// and the prefix lengths apply to them (CheckStatic).
package guard

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// Guardrail names.
const (
	Safelist        = "safelist"
	PrefixLength    = "prefix_length"
	TTLRequired     = "ttl_required"
	MaxTTL          = "max_ttl"
	MaxActive       = "max_active_rules"
	MaxPerDest      = "max_rules_per_destination"
	MaxNewPerMinute = "max_new_rules_per_minute"
	TokenMaxActive  = "token.max_active_rules"
)

// Counter counts active rules for the quotas (implemented by *store.Store).
type Counter interface {
	QuotaCounts(ctx context.Context, q store.QuotaQuery) (store.QuotaCounts, error)
}

// Violation is a rule that a guardrail refuses.
type Violation struct {
	Guardrail string // one of the names above
	Rule      string // the rule's text
	Index     int    // position of the rule in the request (0 for one rule)
	// Field is the request field at fault: "text" or "ttl".
	Field string
	Msg   string // why, and what to do, in operator terms
}

func (v *Violation) Error() string {
	return fmt.Sprintf("rule %q violates guardrail %s: %s", v.Rule, v.Guardrail, v.Msg)
}

// DefaultPrefixLengths is what each family allows unless configured:
// routes (RTBH) are host routes only, /32 or /128; FlowSpec any length.
func DefaultPrefixLengths(f flowspec.Family) config.Range {
	switch f {
	case flowspec.IPv4Unicast:
		return config.Range{Min: 32, Max: 32}
	case flowspec.IPv6Unicast:
		return config.Range{Min: 128, Max: 128}
	case flowspec.IPv6:
		return config.Range{Min: 0, Max: 128}
	}
	return config.Range{Min: 0, Max: 32}
}

// Lengths returns the allowed destination prefix lengths of family f.
func Lengths(l *config.Guardrails, f flowspec.Family) config.Range {
	if r, ok := l.PrefixLengths[f]; ok {
		return r
	}
	return DefaultPrefixLengths(f)
}

// Input is one rule a write is to store.
type Input struct {
	Rule flowspec.Rule
	// ExpiresAt is the expiry the write gives (zero: never).
	ExpiresAt time.Time
	// KeepExpiry is set when the write updates an active rule without
	// giving an expiry: the rule keeps the stored one, which is checked.
	KeepExpiry bool
}

// Quota is the quota of a scoped API token: at most Max active rules
// whose last writer is Actor. The zero Quota limits nothing.
type Quota struct {
	Actor string
	Max   int
}

// Guard is the current guardrails and the rate limiter's state. It is safe
// for concurrent use; a configuration reload swaps the limits (Set) while
// writes go on, and the limiter's window survives it. Check does not
// serialize writes: a caller that needs quotas to hold exactly under
// concurrent writes serializes its check-and-store itself.
type Guard struct {
	limits atomic.Pointer[config.Guardrails]
	rate   rateLimiter
	now    func() time.Time
}

// New returns a Guard with limits l.
func New(l config.Guardrails) *Guard {
	g := &Guard{now: time.Now}
	g.Set(l)
	return g
}

// WithClock sets the clock that TTLs and the rate limit are measured by
// (default time.Now); for tests.
func (g *Guard) WithClock(now func() time.Time) *Guard {
	g.now = now
	return g
}

// Set replaces the limits.
func (g *Guard) Set(l config.Guardrails) { g.limits.Store(&l) }

// Limits returns the current limits.
func (g *Guard) Limits() *config.Guardrails { return g.limits.Load() }

// Check applies every guardrail to ins, which one write is to store, and
// the token quota q: the per-rule checks first, then the quotas counted by
// c, then the rate of new rules (recorded only when everything passed). A
// rule whose Match is already active is an update: it counts against no
// quota, except a token's when another writer's rule becomes the token's.
// It returns the first violation, nil, or the error of the count.
func (g *Guard) Check(ctx context.Context, c Counter, ins []Input, q Quota) (*Violation, error) {
	l := g.Limits()
	now := g.now()
	ttls := make([]time.Duration, len(ins))
	keeps := false
	for i, in := range ins {
		if !in.ExpiresAt.IsZero() {
			ttls[i] = in.ExpiresAt.Sub(now).Round(time.Second)
		}
		keeps = keeps || in.KeepExpiry
	}
	keeps = keeps && (l.RequireTTL || l.MaxTTL > 0)
	needCounts := keeps || l.MaxActiveRules > 0 || l.MaxRulesPerDestination > 0 || l.MaxNewRulesPerMinute > 0 || q.Max > 0
	var counts store.QuotaCounts
	if needCounts {
		qq := store.QuotaQuery{Matches: make([]flowspec.Match, 0, len(ins))}
		if q.Max > 0 {
			qq.Actor = q.Actor
		}
		for _, in := range ins {
			qq.Matches = append(qq.Matches, in.Rule.Match)
			if d, ok := in.Rule.Match.Destination(); ok && l.MaxRulesPerDestination > 0 {
				qq.Destinations = append(qq.Destinations, d)
			}
		}
		var err error
		if counts, err = c.QuotaCounts(ctx, qq); err != nil {
			return nil, err
		}
	}
	for i, in := range ins {
		ttl := ttls[i]
		if e, ok := counts.Existing[in.Rule.Match]; ok && in.KeepExpiry {
			// An update that keeps the stored expiry is checked with
			// the TTL the rule has left.
			ttl = 0
			if !e.ExpiresAt.IsZero() {
				ttl = max(e.ExpiresAt.Sub(now).Round(time.Second), time.Second)
			}
		}
		if v := checkRule(l, in.Rule, ttl, false); v != nil {
			v.Index = i
			return v, nil
		}
	}
	if !needCounts {
		return nil, nil
	}
	seen := make(map[flowspec.Match]bool, len(ins))
	total, mine := counts.Active, counts.ByActor
	perDest := counts.ByDestination
	if perDest == nil {
		perDest = map[netip.Prefix]int{}
	}
	created := 0
	for i, in := range ins {
		m := in.Rule.Match
		if seen[m] {
			continue
		}
		seen[m] = true
		e, exists := counts.Existing[m]
		if q.Max > 0 && (!exists || e.Actor != q.Actor) {
			mine++
			if mine > q.Max {
				return &Violation{Guardrail: TokenMaxActive, Rule: in.Rule.String(), Index: i, Field: "text",
					Msg: fmt.Sprintf("token %q would have %d active rules; its max_active_rules is %d: withdraw some of its rules first, or raise max_active_rules of this [[api.token]]", q.Actor, mine, q.Max)}, nil
			}
		}
		if exists {
			continue
		}
		created++
		total++
		if l.MaxActiveRules > 0 && total > l.MaxActiveRules {
			return &Violation{Guardrail: MaxActive, Rule: in.Rule.String(), Index: i, Field: "text",
				Msg: fmt.Sprintf("it would be active rule number %d; the maximum is %d: withdraw rules first, or raise [guardrails] max_active_rules", total, l.MaxActiveRules)}, nil
		}
		if d, ok := m.Destination(); ok && l.MaxRulesPerDestination > 0 {
			perDest[d]++
			if perDest[d] > l.MaxRulesPerDestination {
				return &Violation{Guardrail: MaxPerDest, Rule: in.Rule.String(), Index: i, Field: "text",
					Msg: fmt.Sprintf("%d active rules would have destination %s; the maximum is %d: combine them, or withdraw one first", perDest[d], d, l.MaxRulesPerDestination)}, nil
			}
		}
	}
	if ok, retry := g.rate.allow(now, created, l.MaxNewRulesPerMinute); !ok {
		last := ins[len(ins)-1]
		return &Violation{Guardrail: MaxNewPerMinute, Rule: last.Rule.String(), Index: len(ins) - 1, Field: "text",
			Msg: fmt.Sprintf("more than %d new rules in one minute; retry in %s", l.MaxNewRulesPerMinute, retry.Round(time.Second))}, nil
	}
	return nil, nil
}

// CheckRule applies the guardrails that concern one rule on its own, with
// ttl its TTL (0: none).
func (g *Guard) CheckRule(r flowspec.Rule, ttl time.Duration) *Violation {
	return checkRule(g.Limits(), r, ttl, false)
}

// CheckActive applies the per-rule guardrails to a rule that is already
// active, with remaining its time left (0: never expires).
func CheckActive(l *config.Guardrails, r flowspec.Rule, remaining time.Duration) *Violation {
	return checkRule(l, r, remaining, true)
}

// CheckStatic applies to the static rules ([[rule]]) the guardrails that
// concern a rule's match: the safelist and the prefix lengths. Static
// rules are permanent by design: require_ttl and max_ttl do not apply,
// nor the quotas (a declared rule is not a runaway script's). The i-th
// violation's Index is the rule's position in rules.
func CheckStatic(l *config.Guardrails, rules []config.StaticRule) []*Violation {
	var out []*Violation
	for i, sr := range rules {
		if v := checkMatch(l, sr.Rule); v != nil {
			v.Index = i
			out = append(out, v)
		}
	}
	return out
}

// checkRule applies the safelist, the prefix lengths and the TTL rules;
// active says the rule is already active (ttl is what it has left).
func checkRule(l *config.Guardrails, r flowspec.Rule, ttl time.Duration, active bool) *Violation {
	if v := checkMatch(l, r); v != nil {
		return v
	}
	text := r.String()
	switch {
	case l.RequireTTL && ttl <= 0 && active:
		return &Violation{Guardrail: TTLRequired, Rule: text, Field: "ttl", Msg: "the rule never expires and every rule now needs a TTL"}
	case l.RequireTTL && ttl <= 0:
		return &Violation{Guardrail: TTLRequired, Rule: text, Field: "ttl", Msg: "every rule needs a TTL here; give one (e.g. 30m)"}
	case l.MaxTTL > 0 && ttl > l.MaxTTL && active:
		return &Violation{Guardrail: MaxTTL, Rule: text, Field: "ttl",
			Msg: fmt.Sprintf("it expires in %s, later than the maximum TTL %s", ttl.Round(time.Second), l.MaxTTL)}
	case l.MaxTTL > 0 && ttl > l.MaxTTL:
		return &Violation{Guardrail: MaxTTL, Rule: text, Field: "ttl", Msg: fmt.Sprintf("TTL %s is longer than the maximum %s: give a shorter one", ttl, l.MaxTTL)}
	}
	return nil
}

// checkMatch applies the safelist and the prefix lengths.
func checkMatch(l *config.Guardrails, r flowspec.Rule) *Violation {
	f := r.Match.Family()
	dst, hasDst := r.Match.Destination()
	if hasDst {
		if rg := Lengths(l, f); !rg.Contains(dst.Bits()) {
			msg := fmt.Sprintf("destination %s: %s allows prefix lengths %s", dst, f, rg)
			if f.IsRoute() {
				msg += " (a shorter blackhole needs [guardrails] prefix_lengths." + famKey(f) + ")"
			}
			return &Violation{Guardrail: PrefixLength, Rule: r.String(), Field: "text", Msg: msg}
		}
	}
	// An accept-only FlowSpec rule filters nothing: the safelist allows it.
	if !f.IsRoute() && r.Action == flowspec.Accept() {
		return nil
	}
	for _, s := range l.Safelist {
		if s.Addr().Is6() != f.Is6() {
			continue
		}
		switch {
		case !hasDst:
			return &Violation{Guardrail: Safelist, Rule: r.String(), Field: "text",
				Msg: fmt.Sprintf("the rule has no destination prefix, so it also matches the safelisted %s; add a destination outside it", s)}
		case dst.Overlaps(s):
			return &Violation{Guardrail: Safelist, Rule: r.String(), Field: "text",
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

// rateLimiter is the rate limit on new rules: a sliding window of one
// minute. The limit is passed on each call, so it survives reloads.
type rateLimiter struct {
	mu    sync.Mutex
	times []time.Time // creation times within the last minute, oldest first
}

// allow records n new rules at now if, with them, at most limit rules were
// created in the minute up to now, and reports whether it did. limit 0
// allows everything. On refusal it also returns how long until enough of
// the window has passed.
func (l *rateLimiter) allow(now time.Time, n, limit int) (bool, time.Duration) {
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
		return false, l.times[len(l.times)+n-limit-1].Sub(cut)
	}
	for range n {
		l.times = append(l.times, now)
	}
	return true, 0
}
