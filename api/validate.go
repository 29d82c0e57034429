package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ribkeeper/ribkeeper/guard"
	"github.com/ribkeeper/ribkeeper/store"
)

// Validation is the body of POST /v1/validate: the request checked as
// POST /v1/rules would check it, with nothing stored.
type Validation struct {
	Valid  bool   `json:"valid"`
	Family string `json:"family"`
	// Text is the rule in canonical form, as it would be stored.
	Text   string `json:"text"`
	Match  string `json:"match"`
	Action string `json:"action"`
	// ExpiresAt is when the rule would expire (absent: never): the ttl
	// of the request, the default TTL of a new rule without one, or an
	// active rule's own expiry, which an update without a ttl keeps.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// DefaultTTL says ExpiresAt comes from [guardrails] default_ttl.
	DefaultTTL bool `json:"default_ttl,omitempty"`
	// KeepsExpiry says the rule is active and keeps its expiry.
	KeepsExpiry bool `json:"keeps_expiry,omitempty"`
	// Guardrail, when Valid is false, is the guardrail that would refuse
	// the rule: POST /v1/rules answers it with 422 guardrail_violation.
	Guardrail *GuardrailBreach `json:"guardrail,omitempty"`
	// Warnings say what about an allowed rule is dangerous, one sentence
	// each.
	Warnings []string `json:"warnings,omitempty"`
}

// GuardrailBreach is the guardrail a rule would break.
type GuardrailBreach struct {
	Name    string `json:"name"`  // e.g. "prefix_length", "protected_address"
	Field   string `json:"field"` // "text" or "ttl"
	Message string `json:"message"`
}

// previewer is what validate asks of guarded rules (Guarded): the
// guardrails' answer for in, recording nothing.
type previewer interface {
	preview(ctx context.Context, in store.Input) (guard.Decision, *guard.Violation, error)
}

// validateRule handles POST /v1/validate: the same body as POST
// /v1/rules, parsed by the same parser and refused with the same errors
// (invalid_rule with the column of the offending word, invalid_ttl,
// unsendable_rule, out_of_scope for a scoped token, an unknown site), and
// nothing is stored. With guarded rules (Guarded) it also answers what
// the guardrails would: the guardrail a rule breaks (valid false), the
// expiry it would get, and warnings; nothing is recorded (the rate of new
// rules counts only stored ones).
func (s *Server) validateRule(w http.ResponseWriter, r *http.Request) (int, any, error) {
	in, err := s.ruleInput(r)
	if err != nil {
		return 0, nil, err
	}
	if err := s.knownSites(r.Context(), in); err != nil {
		return 0, nil, err
	}
	out := Validation{
		Valid:  true,
		Family: in.Rule.Match.Family().String(),
		Text:   in.Rule.String(),
		Match:  in.Rule.Match.String(),
		Action: in.Rule.Action.String(),
	}
	expires := in.ExpiresAt
	if s.guardrails != nil {
		d, v, err := s.guardrails.preview(r.Context(), in)
		if err != nil {
			return 0, nil, err
		}
		if v != nil {
			out.Valid = false
			out.Guardrail = &GuardrailBreach{Name: v.Guardrail, Field: v.Field, Message: OneLine(v.Msg)}
		}
		expires, out.DefaultTTL, out.KeepsExpiry, out.Warnings = d.ExpiresAt, d.DefaultTTL, d.KeepExpiry, d.Warnings
	}
	if !expires.IsZero() && out.Valid {
		t := expires.UTC()
		out.ExpiresAt = &t
	}
	return http.StatusOK, out, nil
}

// knownSites refuses sites no appliance registered, as the store does
// when it stores the rule.
func (s *Server) knownSites(ctx context.Context, in store.Input) error {
	if len(in.Sites) == 0 || in.AllowUnknownSites {
		return nil
	}
	known, err := s.rules.Sites(ctx)
	if err != nil {
		return err
	}
	for _, site := range in.Sites {
		if slices.Contains(known, strings.TrimSpace(site)) {
			continue
		}
		list := "none yet"
		if len(known) > 0 {
			list = strings.Join(known, ", ")
		}
		return &store.InputError{Index: -1, Field: "sites", Msg: fmt.Sprintf(
			"unknown site %q: the known sites are %s; check the spelling, or allow unknown sites (CLI --allow-unknown-sites, JSON allow_unknown_sites) for a site not started yet",
			site, list)}
	}
	return nil
}
