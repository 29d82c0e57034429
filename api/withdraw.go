package api

import (
	"net/http"

	"github.com/hashicorp/go-hclog"
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
	a := writer(r)
	done, err := s.gate.WithdrawMatch(r.Context(), a, req.Text)
	if err != nil {
		return 0, nil, err
	}
	out := RuleList{Rules: []Rule{}}
	for _, wr := range done {
		s.log.Info("rule changed", "rule", wr.ID, "op", "withdraw", "family", wr.Rule.Match.Family(),
			"actor", a.Name, "text", wr.Text)
		out.Rules = append(out.Rules, ruleFromStore(wr))
	}
	return http.StatusOK, out, nil
}

// WithdrawMatchesRequest is the body of POST /v1/rules/withdraw/batch.
type WithdrawMatchesRequest struct {
	Rules []WithdrawMatchRequest `json:"rules"`
}

// withdrawMatches handles POST /v1/rules/withdraw/batch: withdraw the
// active rule of each text's match, in one transaction, all or none
// (errors name the text at fault, "rules[3].text"); texts whose match has
// no active rule are skipped. 200 {"rules": [rule...]}: the rules
// withdrawn.
func (s *Server) withdrawMatches(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req WithdrawMatchesRequest
	if err := decodeJSON(r, &req, s.opts.maxBodyBytes); err != nil {
		return 0, nil, err
	}
	texts := make([]string, len(req.Rules))
	for i, rr := range req.Rules {
		texts[i] = rr.Text
	}
	a := writer(r)
	done, err := s.gate.WithdrawMatches(r.Context(), a, texts)
	if err != nil {
		return 0, nil, err
	}
	out := RuleList{Rules: make([]Rule, 0, len(done))}
	for i, wr := range done {
		lvl := hclog.Info
		if i >= maxBatchInfoLogs {
			lvl = hclog.Debug
		}
		s.log.Log(lvl, "rule changed", "rule", wr.ID, "op", "withdraw", "family", wr.Rule.Match.Family(),
			"actor", a.Name, "text", wr.Text)
		out.Rules = append(out.Rules, ruleFromStore(wr))
	}
	if len(done) > maxBatchInfoLogs {
		s.log.Info("and more rule changes in this batch (logged at debug level)", "count", len(done)-maxBatchInfoLogs, "actor", a.Name)
	}
	return http.StatusOK, out, nil
}
