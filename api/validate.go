package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

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
	// ExpiresAt is when the rule would expire, if the request has a ttl.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// validateRule handles POST /v1/validate: the same body as POST
// /v1/rules, parsed by the same parser and refused with the same errors
// (invalid_rule with the column of the offending word, invalid_ttl,
// unsendable_rule, out_of_scope for a scoped token, an unknown site), and
// nothing is stored. Guardrails
// (quotas, the safelist) are checked only when a rule is stored.
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
	if !in.ExpiresAt.IsZero() {
		t := in.ExpiresAt.UTC()
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
