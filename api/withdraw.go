package api

import (
	"net/http"
	"strings"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// WithdrawMatchRequest is the body of POST /v1/rules/withdraw.
type WithdrawMatchRequest struct {
	// Text is rule text as given to POST /v1/rules; only its match is used,
	// so a detector can send the same text to ban and to unban.
	Text string `json:"text"`
}

// withdrawMatch handles POST /v1/rules/withdraw: withdraw the active rule
// with the match of the given text, for callers that keep no rule ids
// (detectors). It is idempotent: no active rule with that match is not an
// error, the answer is then an empty list.
func (s *Server) withdrawMatch(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req WithdrawMatchRequest
	if err := decodeJSON(r, &req, s.opts.maxBodyBytes); err != nil {
		return 0, nil, err
	}
	text := strings.TrimSpace(req.Text)
	if text == "" {
		return 0, nil, newError(http.StatusBadRequest, CodeInvalidRule, "text",
			`text is required, e.g. "match destination 203.0.113.7/32 then discard"`)
	}
	rule, err := flowspec.Parse(text)
	if err != nil {
		return 0, nil, ruleTextError("text", err)
	}
	if id := scopeOf(r.Context()); !id.sees(rule.Match) {
		return 0, nil, id.outside(rule.Match, "text", "the rule", false)
	}
	active, err := s.rules.List(r.Context(), store.Active)
	if err != nil {
		return 0, nil, err
	}
	out := RuleList{Rules: []Rule{}}
	for _, sr := range active {
		if sr.Rule.Match != rule.Match || sr.WithdrawRequested {
			continue
		}
		if sr.Origin != "" {
			return 0, nil, &store.DeclaredError{ID: sr.ID, Origin: sr.Origin}
		}
		wr, err := s.rules.Withdraw(r.Context(), sr.ID, actor(r))
		if err != nil {
			return 0, nil, err
		}
		s.log.Info("rule changed", "rule", wr.ID, "op", "withdraw", "family", wr.Rule.Match.Family(),
			"actor", actor(r), "text", wr.Text)
		out.Rules = append(out.Rules, ruleFromStore(wr))
	}
	return http.StatusOK, out, nil
}
