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
// Safe by default: with the shipped configuration a rule that names no
// TTL gets one (default_ttl), no TTL exceeds max_ttl, no rule stored
// through the API lives forever, a FlowSpec rule needs a destination no
// broader than DefaultPrefixLengths, and nothing may filter, redirect or
// blackhole the appliance's own addresses, its neighbors, or the BGP
// sessions between them (protected_address, bgp_session: these two
// cannot be opened). Each of the others is opened by a setting its
// refusal names.
//
// Guardrails, by the name a Violation carries:
//
//	protected_address          no filter, redirect or blackhole of the appliance's or its neighbors' addresses
//	bgp_session                no FlowSpec rule that matches BGP between the appliance and its routers
//	prefix_length              destination prefix length within the family's range
//	destination_required       a FlowSpec rule has a destination prefix
//	safelist                   no rule may match traffic to a safelisted prefix
//	ttl_required               every rule has a TTL (require_ttl)
//	never_expire               a rule that never expires needs the permission
//	max_ttl                    no TTL longer than this
//	max_active_rules           quota of active rules in total
//	max_rules_per_destination  quota of active rules with the same destination prefix
//	max_new_rules_per_minute   rate of new rules (updates of existing ones are free)
//	token.max_active_rules     quota of a scoped API token: the active rules it wrote
//
// The guardrails up to max_ttl concern one rule; all but never_expire
// also apply to rules already active (CheckActive, Enforce): who wrote
// an active rule, and with what permission, is not known afterwards. The
// quotas and the rate limit apply only when rules are added. Static
// rules are permanent by design: every guardrail on the rule's match
// applies to them, the TTL rules and quotas do not (CheckStatic).
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
	ProtectedAddress    = "protected_address"
	BGPSession          = "bgp_session"
	PrefixLength        = "prefix_length"
	DestinationRequired = "destination_required"
	Safelist            = "safelist"
	TTLRequired         = "ttl_required"
	NeverExpire         = "never_expire"
	MaxTTL              = "max_ttl"
	MaxActive           = "max_active_rules"
	MaxPerDest          = "max_rules_per_destination"
	MaxNewPerMinute     = "max_new_rules_per_minute"
	TokenMaxActive      = "token.max_active_rules"
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

// DefaultPrefixLengths is what each family allows unless configured.
// Routes (RTBH) are host routes only, /32 or /128: a shorter blackhole
// takes down every address it covers. FlowSpec destinations are /8 to
// /32 for IPv4 and /32 to /128 for IPv6: a /8 is the largest block any
// one network holds, and a /32 is the standard allocation of one IPv6
// network (the RIRs' default for an ISP), so a broader destination
// reaches into other networks' space (all of it, for /0) — a typo or a
// runaway script, not a mitigation. An operator whose own aggregate is
// broader opens it with [guardrails] prefix_lengths.
func DefaultPrefixLengths(f flowspec.Family) config.Range {
	switch f {
	case flowspec.IPv4Unicast:
		return config.Range{Min: 32, Max: 32}
	case flowspec.IPv6Unicast:
		return config.Range{Min: 128, Max: 128}
	case flowspec.IPv6:
		return config.Range{Min: 32, Max: 128}
	}
	return config.Range{Min: 8, Max: 32}
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
	// ExpiresAt is the expiry the write gives; zero with KeepExpiry
	// unset is an explicit "never".
	ExpiresAt time.Time
	// KeepExpiry is set when the write gives no TTL: an active rule
	// keeps its stored expiry (which is checked), a new one gets the
	// default TTL.
	KeepExpiry bool
	// MayNeverExpire is the writer's permission to store a rule that
	// never expires; [guardrails] allow_never_expire gives it to every
	// writer.
	MayNeverExpire bool
}

// Decision is what Check decided for one Input. The expiry to store is
// the decision's, not the Input's: a rule that gave no TTL has none, and
// storing it as given would make it permanent. Store it with Apply.
type Decision struct {
	// ExpiresAt is when the rule will expire (zero: never): the TTL the
	// write gave, the default TTL of a new rule that gave none, or the
	// active rule's own expiry when it is kept.
	ExpiresAt time.Time
	// KeepExpiry says the rule is active and keeps its expiry.
	KeepExpiry bool
	// DefaultTTL says ExpiresAt is now plus [guardrails] default_ttl.
	DefaultTTL bool
	// Warnings say what is allowed but dangerous, one sentence each.
	Warnings []string

	ifNew time.Time // with KeepExpiry: the expiry should the rule be created after all
}

// Apply sets in's expiry as decided. A kept expiry is kept by the store
// (store.KeepExpiry); should the rule stop being active between Check
// and the write, the write creates it with the default TTL.
func (d Decision) Apply(in *store.Input) {
	in.ExpiresAt = d.ExpiresAt
	in.Keep &^= store.KeepExpiry
	if d.KeepExpiry {
		in.ExpiresAt = d.ifNew
		in.Keep |= store.KeepExpiry
	}
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

// New returns a Guard with limits l (with the addresses they protect,
// l.Protected).
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
// It returns, when nothing is violated, one Decision per input, in order,
// whose expiry the caller stores (Decision.Apply); else the first
// violation; or the error of the count.
func (g *Guard) Check(ctx context.Context, c Counter, ins []Input, q Quota) ([]Decision, *Violation, error) {
	return g.check(ctx, c, ins, q, true)
}

// Preview is Check that records nothing: what Check would answer now,
// for a dry run (rule validate, rule add --dry-run).
func (g *Guard) Preview(ctx context.Context, c Counter, ins []Input, q Quota) ([]Decision, *Violation, error) {
	return g.check(ctx, c, ins, q, false)
}

func (g *Guard) check(ctx context.Context, c Counter, ins []Input, q Quota, record bool) ([]Decision, *Violation, error) {
	l := g.Limits()
	now := g.now()
	keeps := false
	for _, in := range ins {
		keeps = keeps || in.KeepExpiry
	}
	// Whether a rule without a TTL is new (default TTL) or an update
	// (keeps its expiry) is the store's to say.
	needCounts := keeps || l.MaxActiveRules > 0 || l.MaxRulesPerDestination > 0 || l.MaxNewRulesPerMinute > 0 || q.Max > 0
	var counts store.QuotaCounts
	if needCounts {
		qq := store.QuotaQuery{Matches: make([]flowspec.Match, 0, len(ins)), Total: l.MaxActiveRules > 0}
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
			return nil, nil, err
		}
	}
	ds := make([]Decision, len(ins))
	for i, in := range ins {
		e, exists := counts.Existing[in.Rule.Match]
		if v := checkMatch(l, in.Rule); v != nil {
			v.Index = i
			return nil, v, nil
		}
		d, v := decideTTL(l, in, e, exists, now)
		if v != nil {
			v.Index = i
			return nil, v, nil
		}
		d.Warnings = warnings(l, in.Rule, d, now)
		ds[i] = d
	}
	if !needCounts {
		return ds, nil, nil
	}
	if v := checkQuotas(l, ins, q, counts); v != nil {
		return nil, v, nil
	}
	created := 0
	seen := make(map[flowspec.Match]bool, len(ins))
	for _, in := range ins {
		if _, ok := counts.Existing[in.Rule.Match]; !ok && !seen[in.Rule.Match] {
			created++
		}
		seen[in.Rule.Match] = true
	}
	if ok, retry := g.rate.allow(now, created, l.MaxNewRulesPerMinute, record); !ok {
		last := ins[len(ins)-1]
		return nil, &Violation{Guardrail: MaxNewPerMinute, Rule: last.Rule.String(), Index: len(ins) - 1, Field: "text",
			Msg: fmt.Sprintf("more than %d new rules in one minute; retry in %s, or raise [guardrails] max_new_rules_per_minute", l.MaxNewRulesPerMinute, retry.Round(time.Second))}, nil
	}
	return ds, nil, nil
}

// checkQuotas applies the quotas to ins given the counts.
func checkQuotas(l *config.Guardrails, ins []Input, q Quota, counts store.QuotaCounts) *Violation {
	seen := make(map[flowspec.Match]bool, len(ins))
	total, mine := counts.Active, counts.ByActor
	perDest := counts.ByDestination
	if perDest == nil {
		perDest = map[netip.Prefix]int{}
	}
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
					Msg: fmt.Sprintf("token %q would have %d active rules; its max_active_rules is %d: withdraw some of its rules first, or raise max_active_rules of this [[api.token]]", q.Actor, mine, q.Max)}
			}
		}
		if exists {
			continue
		}
		total++
		if l.MaxActiveRules > 0 && total > l.MaxActiveRules {
			return &Violation{Guardrail: MaxActive, Rule: in.Rule.String(), Index: i, Field: "text",
				Msg: fmt.Sprintf("it would be active rule number %d; the maximum is %d: withdraw rules first, or raise [guardrails] max_active_rules", total, l.MaxActiveRules)}
		}
		if d, ok := m.Destination(); ok && l.MaxRulesPerDestination > 0 {
			perDest[d]++
			if perDest[d] > l.MaxRulesPerDestination {
				return &Violation{Guardrail: MaxPerDest, Rule: in.Rule.String(), Index: i, Field: "text",
					Msg: fmt.Sprintf("%d active rules would have destination %s; the maximum is %d: combine them, withdraw one first, or raise [guardrails] max_rules_per_destination", perDest[d], d, l.MaxRulesPerDestination)}
			}
		}
	}
	return nil
}

// CheckActive applies the guardrails that concern one rule to a rule that
// is already active, with remaining its time left (0: never expires).
// The permission a rule that never expires needed when it was stored is
// not checked again; require_ttl still refuses it.
func CheckActive(l *config.Guardrails, r flowspec.Rule, remaining time.Duration) *Violation {
	if v := checkMatch(l, r); v != nil {
		return v
	}
	// The rule's text only for a violation: the start checks every
	// active rule, nearly all of which pass.
	switch maxTTL := l.TTLMax(); {
	case l.RequireTTL && remaining <= 0:
		return &Violation{Guardrail: TTLRequired, Rule: r.String(), Field: "ttl", Msg: "the rule never expires and every rule now needs a TTL ([guardrails] require_ttl)"}
	case maxTTL > 0 && remaining > maxTTL:
		return &Violation{Guardrail: MaxTTL, Rule: r.String(), Field: "ttl",
			Msg: fmt.Sprintf("it expires in %s, later than the maximum TTL %s ([guardrails] max_ttl)", remaining.Round(time.Second), maxTTL)}
	}
	return nil
}

// CheckStatic applies to the static rules ([[rule]]) the guardrails that
// concern a rule's match: protected addresses, BGP sessions, prefix
// lengths, the destination, the safelist. Static rules are permanent by
// design: the TTL rules do not apply, nor the quotas (a declared rule is
// not a runaway script's). The i-th violation's Index is the rule's
// position in rules.
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

// checkMatch applies the guardrails on what a rule matches: protected
// addresses and BGP sessions first (they cannot be opened), then the
// prefix lengths, the destination and the safelist. A FlowSpec rule
// whose action filters nothing (accept, sample, terminal) passes the
// protected addresses, the BGP sessions and the safelist.
func checkMatch(l *config.Guardrails, r flowspec.Rule) *Violation {
	f := r.Match.Family()
	passive := !f.IsRoute() && filtersNothing(r.Action)
	if !passive {
		if v := checkProtected(&l.Protected, r); v != nil {
			return v
		}
	}
	dst, hasDst := r.Match.Destination()
	if hasDst {
		if rg := Lengths(l, f); !rg.Contains(dst.Bits()) {
			return &Violation{Guardrail: PrefixLength, Rule: r.String(), Field: "text",
				Msg: fmt.Sprintf("destination %s: %s allows prefix lengths %s; narrow the destination, or set [guardrails] prefix_lengths.%s", dst, f, rg, famKey(f))}
		}
	} else if !l.AllowNoDestination {
		return &Violation{Guardrail: DestinationRequired, Rule: r.String(), Field: "text",
			Msg: "the rule has no destination prefix, so it matches traffic to every address; add a destination (\"match destination 203.0.113.7/32 ...\"), or set [guardrails] allow_no_destination = true"}
	}
	if passive {
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
				Msg: fmt.Sprintf("destination %s overlaps the safelisted %s; narrow it, or change [guardrails] safelist", dst, s)}
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

// allow reports whether, with n new rules at now, at most limit rules
// were created in the minute up to now, and records them if it does and
// record is set. limit 0 allows everything. On refusal it also returns
// how long until enough of the window has passed.
func (l *rateLimiter) allow(now time.Time, n, limit int, record bool) (bool, time.Duration) {
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
	if record {
		for range n {
			l.times = append(l.times, now)
		}
	}
	return true, 0
}
