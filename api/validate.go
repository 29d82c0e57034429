package api

import (
	"net/http"
	"time"
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
	// ExpiresAt is when the rule would expire; absent when it would
	// never expire or keeps the expiry of the active rule (KeepsExpiry).
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	KeepsExpiry bool       `json:"keeps_expiry,omitempty"`
	// Warnings say what is allowed but dangerous.
	Warnings []string `json:"warnings"`
}

// validateRule handles POST /v1/validate: the same body as POST
// /v1/rules, checked by the gate exactly as a write of it would be
// (parser, bounds, scope, the guardrails that concern the rule itself,
// sites), and nothing is stored: a rule a write would refuse gets the
// write's error (a guardrail's names the guardrail), and a valid one the
// warnings about what is allowed but dangerous.
func (s *Server) validateRule(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req ruleRequest
	if err := decodeJSON(r, &req, s.opts.maxBodyBytes); err != nil {
		return 0, nil, err
	}
	v, err := s.gate.Validate(r.Context(), writer(r), req.admit())
	if err != nil {
		return 0, nil, err
	}
	if v.Refusal != nil {
		return 0, nil, v.Refusal
	}
	out := Validation{
		Valid:       true,
		Family:      v.Rule.Match.Family().String(),
		Text:        v.Rule.String(),
		Match:       v.Rule.Match.String(),
		Action:      v.Rule.Action.String(),
		KeepsExpiry: v.KeepsExpiry,
		Warnings:    append([]string{}, v.Warnings...),
	}
	if !v.ExpiresAt.IsZero() {
		t := v.ExpiresAt.UTC()
		out.ExpiresAt = &t
	}
	return http.StatusOK, out, nil
}
