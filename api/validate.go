package api

import (
	"net/http"
	"time"

	"github.com/ribkeeper/ribkeeper/admit"
)

// Validation is the body of POST /v1/validate: the request checked as
// POST /v1/rules would check it, with nothing stored.
type Validation struct {
	// Valid is false when a guardrail would refuse the rule (Guardrail
	// says which); every other refusal is the error a write would get.
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

// validateRule handles POST /v1/validate: the same body as POST
// /v1/rules, checked by the gate exactly as a write of it would be
// (parser, bounds, scope, sites, the guardrails and quotas), and nothing
// is stored or counted. A guardrail's refusal answers 200 with valid
// false and the guardrail; every other refusal is the write's error. A
// valid rule comes with the expiry it would get and the warnings about
// what is allowed but dangerous.
func (s *Server) validateRule(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req ruleRequest
	if err := decodeJSON(r, &req, s.opts.maxBodyBytes); err != nil {
		return 0, nil, err
	}
	v, err := s.gate.Validate(r.Context(), writer(r), req.admit())
	if err != nil {
		return 0, nil, err
	}
	if v.Refusal != nil && v.Refusal.Kind != admit.KindGuardrail {
		return 0, nil, v.Refusal
	}
	out := Validation{
		Valid:       v.Refusal == nil,
		Family:      v.Rule.Match.Family().String(),
		Text:        v.Rule.String(),
		Match:       v.Rule.Match.String(),
		Action:      v.Rule.Action.String(),
		DefaultTTL:  v.DefaultTTL,
		KeepsExpiry: v.KeepsExpiry,
		Warnings:    v.Warnings,
	}
	if ref := v.Refusal; ref != nil {
		out.Guardrail = &GuardrailBreach{Name: ref.Guardrail, Field: ref.Field, Message: OneLine(ref.Detail)}
	} else if !v.ExpiresAt.IsZero() {
		t := v.ExpiresAt.UTC()
		out.ExpiresAt = &t
	}
	return http.StatusOK, out, nil
}
