package guard

import (
	"fmt"
	"time"

	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/store"
)

// decideTTL resolves the expiry of in at now, given the active rule with
// the same match (e, if exists), and applies the TTL guardrails:
//
//   - a TTL given is checked against max_ttl;
//   - no TTL on an active rule keeps its expiry, which is checked against
//     max_ttl (require_ttl refuses keeping "never"); a rule that never
//     expires may keep that without the permission, which was checked
//     when it was stored;
//   - no TTL on a new rule gets default_ttl (refused under require_ttl;
//     with default_ttl "never" the rule never expires, see below);
//   - a rule that never expires needs in.MayNeverExpire or
//     allow_never_expire, and is refused under require_ttl.
func decideTTL(l *config.Guardrails, in Input, e store.Existing, exists bool, now time.Time) (Decision, *Violation) {
	// The rule's text names it in a violation only: not built for every
	// rule that passes (a fifth of a batch's allocations at the gate).
	text := func() string { return in.Rule.String() }
	defTTL, maxTTL := l.TTLDefault(), l.TTLMax()
	never := func(why string) (Decision, *Violation) {
		if l.RequireTTL {
			return Decision{}, &Violation{Guardrail: TTLRequired, Rule: text(), Field: "ttl",
				Msg: "every rule needs a TTL here ([guardrails] require_ttl); give one (e.g. 30m)"}
		}
		if !in.MayNeverExpire && !l.AllowNeverExpire {
			return Decision{}, &Violation{Guardrail: NeverExpire, Rule: text(), Field: "ttl",
				Msg: why + ", and only the configuration or a writer with the permission may store a rule that never expires: give a TTL (e.g. 30m), declare the rule in the configuration ([[rule]]), or set [guardrails] allow_never_expire = true"}
		}
		return Decision{}, nil
	}
	switch {
	case in.KeepExpiry && exists:
		// Should the rule stop being active before the write lands,
		// it is created: with the default TTL, as a new rule would be.
		d := Decision{ExpiresAt: e.ExpiresAt, KeepExpiry: true, ifNew: e.ExpiresAt}
		if defTTL > 0 {
			d.ifNew = now.Add(defTTL)
		}
		if e.ExpiresAt.IsZero() {
			if l.RequireTTL {
				return Decision{}, &Violation{Guardrail: TTLRequired, Rule: text(), Field: "ttl",
					Msg: "the rule never expires and every rule needs a TTL here ([guardrails] require_ttl); give one (e.g. 30m)"}
			}
			return d, nil
		}
		left := max(e.ExpiresAt.Sub(now).Round(time.Second), time.Second)
		if maxTTL > 0 && left > maxTTL {
			return Decision{}, &Violation{Guardrail: MaxTTL, Rule: text(), Field: "ttl",
				Msg: fmt.Sprintf("the rule keeps its expiry, in %s, later than the maximum TTL %s: give a TTL of at most %s, or raise [guardrails] max_ttl", left, maxTTL, maxTTL)}
		}
		return d, nil
	case in.KeepExpiry && l.RequireTTL:
		return Decision{}, &Violation{Guardrail: TTLRequired, Rule: text(), Field: "ttl",
			Msg: "every rule needs a TTL here ([guardrails] require_ttl); give one (e.g. 30m)"}
	case in.KeepExpiry && defTTL > 0:
		if maxTTL > 0 && defTTL > maxTTL {
			return Decision{}, &Violation{Guardrail: MaxTTL, Rule: text(), Field: "ttl",
				Msg: fmt.Sprintf("the default TTL %s is longer than the maximum %s: give a TTL of at most %s", defTTL, maxTTL, maxTTL)}
		}
		return Decision{ExpiresAt: now.Add(defTTL), DefaultTTL: true}, nil
	case in.KeepExpiry:
		return never("the rule gives no TTL and [guardrails] default_ttl is \"never\"")
	case in.ExpiresAt.IsZero():
		return never("the rule never expires (ttl \"never\")")
	}
	ttl := in.ExpiresAt.Sub(now).Round(time.Second)
	if maxTTL > 0 && ttl > maxTTL {
		return Decision{}, &Violation{Guardrail: MaxTTL, Rule: text(), Field: "ttl",
			Msg: fmt.Sprintf("TTL %s is longer than the maximum %s: give a shorter one, or raise [guardrails] max_ttl", ttl, maxTTL)}
	}
	return Decision{ExpiresAt: in.ExpiresAt}, nil
}
