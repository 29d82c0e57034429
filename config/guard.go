// This file holds the settings of ribkeeper's guardrails ([guardrails]) as
// plain values. Package guard applies them on every write path.

package config

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
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

// Guardrails is one set of guardrails, as configured. The zero Guardrails
// allows everything except routes shorter than a host route (the default
// prefix lengths, guard.DefaultPrefixLengths). Treat it as read-only once
// in use.
type Guardrails struct {
	// Safelist are prefixes no rule may filter or blackhole.
	Safelist []netip.Prefix
	// PrefixLengths maps a family to the destination prefix lengths it
	// allows; a family without an entry gets guard.DefaultPrefixLengths.
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

// Upper bounds of the [limits] settings: past these a setting is a
// mistake, not a choice (a site name longer than the store keeps, a
// batch no body limit lets through).
const (
	maxBatchRulesCap    = 1000000
	maxSitesPerRuleCap  = 1024
	maxSiteNameBytesCap = 128
	maxTextBytesCap     = 65536
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
	} {
		if q.n < 0 || q.n > q.max {
			v.add(q.key, "%d is out of range: use 1 to %d, or leave it out for the default", q.n, q.max)
			continue
		}
		*q.dst = int(q.n)
	}
}
