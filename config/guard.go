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
