// This file holds the settings of ribkeeper's guardrails ([guardrails]) as
// plain values. Package guard applies them on every write path.

package config

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Shipped defaults of [guardrails], those of the zero Guardrails. Each
// can be opened deliberately (see Guardrails).
const (
	// DefaultRuleTTL is the TTL of a new rule that names none: an hour
	// covers a typical attack and is what detectors such as FastNetMon
	// ban for by default; a forgotten rule then lapses by itself.
	DefaultRuleTTL = time.Hour
	// DefaultMaxTTL is the longest TTL a rule may have: a week carries a
	// manual mitigation over a weekend or a holiday, and a rule nobody
	// renews is gone within the week. A filter meant to stay belongs in
	// the configuration ([[rule]]).
	DefaultMaxTTL = 7 * 24 * time.Hour
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

// Unlimited, as Guardrails.DefaultTTL or MaxTTL, turns that default off:
// rules without a TTL never expire ("never" in the file), or no TTL is
// too long ("none").
const Unlimited time.Duration = -1

// Guardrails is one set of guardrails, as configured. The zero Guardrails
// is the shipped defaults: DefaultRuleTTL and DefaultMaxTTL, rules that
// never expire and FlowSpec rules without a destination refused,
// destinations within guard.DefaultPrefixLengths, and no quota. Each
// field opens one of them. Treat it as read-only once in use.
type Guardrails struct {
	// Safelist are prefixes no rule may filter or blackhole.
	Safelist []netip.Prefix
	// PrefixLengths maps a family to the destination prefix lengths it
	// allows; a family without an entry gets guard.DefaultPrefixLengths.
	PrefixLengths map[flowspec.Family]Range
	// RequireTTL refuses rules without a TTL instead of giving them the
	// default TTL, and refuses rules that never expire.
	RequireTTL bool
	// DefaultTTL is the TTL of a new rule that names none (0:
	// DefaultRuleTTL; Unlimited: none, such a rule never expires and
	// needs the permission to). An update that names none keeps the
	// rule's expiry. Read it with TTLDefault.
	DefaultTTL time.Duration
	// MaxTTL is the longest TTL allowed (0: DefaultMaxTTL; Unlimited: no
	// limit). A rule that never expires is not bound by it: it needs
	// AllowNeverExpire or the writer's permission. Read it with TTLMax.
	MaxTTL time.Duration
	// AllowNeverExpire lets every writer store rules that never expire
	// (ttl "never"); otherwise only the configuration ([[rule]]) and
	// actors with the permission may.
	AllowNeverExpire bool
	// AllowNoDestination lets a FlowSpec rule have no destination prefix
	// (it then matches traffic to every address).
	AllowNoDestination bool
	// MaxActiveRules caps active rules in total (0: no cap).
	MaxActiveRules int
	// MaxRulesPerDestination caps active rules per destination prefix
	// (0: no cap).
	MaxRulesPerDestination int
	// MaxNewRulesPerMinute caps rules created per minute (0: no cap).
	MaxNewRulesPerMinute int
	// Protected is what no rule may filter, redirect or blackhole, and
	// whose BGP sessions no rule may match. It is not written in
	// [guardrails]: Load derives it from [bgp] and the neighbors, and
	// nothing opens it.
	Protected Protected
}

// TTLDefault is the TTL a new rule that names none gets; 0: none, it
// never expires.
func (l *Guardrails) TTLDefault() time.Duration { return effective(l.DefaultTTL, DefaultRuleTTL) }

// TTLMax is the longest TTL allowed; 0: no limit.
func (l *Guardrails) TTLMax() time.Duration { return effective(l.MaxTTL, DefaultMaxTTL) }

func effective(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// Protected are the appliance's own addresses and its routers', which the
// guardrails always protect: a rule that cut them would cut the sessions
// that carry every rule, including the one that would undo it.
type Protected struct {
	// Own are the appliance's addresses: its router id, its listen
	// addresses (unspecified ones left out) and the neighbors' local
	// addresses.
	Own []netip.Addr
	// Neighbors are the configured neighbors' addresses.
	Neighbors []netip.Addr
	// NeighborPrefixes are the prefixes dynamic neighbors dial in from.
	NeighborPrefixes []netip.Prefix
	// Ports are the TCP ports of the BGP sessions: 179, the listen port,
	// and each neighbor's port, sorted, each once.
	Ports []uint16
}

// protectedOf derives what the guardrails protect from c's [bgp], its
// neighbors and dynamic neighbors.
func protectedOf(c *Config) Protected {
	var p Protected
	own := func(a netip.Addr) {
		if a.IsValid() && !a.IsUnspecified() && !slices.Contains(p.Own, a) {
			p.Own = append(p.Own, a)
		}
	}
	own(c.BGP.RouterID)
	for _, a := range c.BGP.ListenAddresses {
		own(a)
	}
	ports := []uint16{179}
	if c.BGP.ListenPort > 0 {
		ports = append(ports, uint16(c.BGP.ListenPort))
	}
	for _, n := range c.Neighbors {
		own(n.LocalAddress)
		if n.Address.IsValid() {
			p.Neighbors = append(p.Neighbors, n.Address)
		}
		if n.Port > 0 {
			ports = append(ports, n.Port)
		}
	}
	for _, d := range c.DynamicNeighbors {
		if d.Prefix.IsValid() {
			p.NeighborPrefixes = append(p.NeighborPrefixes, d.Prefix)
		}
	}
	slices.Sort(ports)
	p.Ports = slices.Compact(ports)
	return p
}

// Upper bounds of the [limits] settings: past these a setting is a
// mistake, not a choice (a site name longer than the store keeps, a
// batch no body limit lets through).
const (
	maxBatchRulesCap    = 1000000
	maxSitesPerRuleCap  = 1024
	maxSiteNameBytesCap = 128
	maxTextBytesCap     = 65536
	maxSetRulesCap      = 10000000
	maxSetBodyBytesCap  = 1 << 30
)

// limits validates [limits].
func (v *validator) limits(f *file, c *Config) {
	l := &f.Limits
	for _, q := range []struct {
		key string
		n   int64
		max int64
		dst *int
	}{
		{"limits.max_batch_rules", l.MaxBatchRules, maxBatchRulesCap, &c.Limits.MaxBatchRules},
		{"limits.max_sites_per_rule", l.MaxSitesPerRule, maxSitesPerRuleCap, &c.Limits.MaxSitesPerRule},
		{"limits.max_site_name_bytes", l.MaxSiteNameBytes, maxSiteNameBytesCap, &c.Limits.MaxSiteNameBytes},
		{"limits.max_text_bytes", l.MaxTextBytes, maxTextBytesCap, &c.Limits.MaxTextBytes},
		{"limits.scoped_new_rules_per_minute", l.ScopedNewRulesPerMinute, 1 << 31, &c.Limits.ScopedNewRulesPerMinute},
		{"limits.max_set_rules", l.MaxSetRules, maxSetRulesCap, &c.Limits.MaxSetRules},
		{"limits.max_set_body_bytes", l.MaxSetBodyBytes, maxSetBodyBytesCap, &c.Limits.MaxSetBodyBytes},
	} {
		if q.n < 0 || q.n > q.max {
			v.add(q.key, "%d is out of range: use 1 to %d, or leave it out for the default", q.n, q.max)
			continue
		}
		*q.dst = int(q.n)
	}
}
