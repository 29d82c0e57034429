package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// handlerFunc returns the status and body of a successful response, or an
// error; errors become JSON errors (see Server.toError).
type handlerFunc func(w http.ResponseWriter, r *http.Request) (status int, body any, err error)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/rules", s.handle(s.addRule))
	mux.Handle("GET /v1/rules", s.handle(s.listRules))
	mux.Handle("GET /v1/rules/{id}", s.handle(s.getRule))
	mux.Handle("DELETE /v1/rules/{id}", s.handle(s.withdrawRule))
	mux.Handle("GET /v1/rib", s.handle(s.getRIB))
	mux.Handle("GET /v1/peers", s.handle(s.getPeers))
	return s.recoverer(s.limitBody(jsonFallback(mux)))
}

func (s *Server) handle(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, body, err := h(w, r)
		if err != nil {
			writeError(w, s.toError(r, err))
			return
		}
		writeJSON(w, status, body)
	})
}

// toError classifies err into the API's error vocabulary. Unclassified
// errors are logged and reported as internal without their text.
func (s *Server) toError(r *http.Request, err error) *Error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, store.ErrNotFound):
		return newError(http.StatusNotFound, CodeNotFound, "id", "no rule with id %s", r.PathValue("id"))
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads this answer.
		s.log.Debug("request canceled", "method", r.Method, "path", r.URL.Path)
		return newError(http.StatusServiceUnavailable, CodeUnavailable, "", "request canceled")
	}
	s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	return errInternal()
}

// addRule handles POST /v1/rules. The rule text is parsed (and the whole
// request validated) before anything is stored.
func (s *Server) addRule(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req AddRuleRequest
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
		return 0, nil, ruleTextError(err)
	}
	if !rule.IsValid() {
		return 0, nil, newError(http.StatusBadRequest, CodeInvalidRule, "text", "rule text: incomplete rule")
	}
	var expires time.Time
	if req.TTL != "" {
		d, err := time.ParseDuration(strings.TrimSpace(req.TTL))
		if err != nil {
			return 0, nil, newError(http.StatusBadRequest, CodeInvalidTTL, "ttl",
				`ttl %q is not a duration such as "10m" or "1h30m"`, req.TTL)
		}
		if d <= 0 {
			return 0, nil, newError(http.StatusBadRequest, CodeInvalidTTL, "ttl", "ttl must be positive, got %q", req.TTL)
		}
		expires = s.opts.now().Add(d)
	}
	if err := checkSites(req.Sites); err != nil {
		return 0, nil, err
	}
	stored, created, err := s.rules.Upsert(r.Context(), store.Input{
		Rule:      rule,
		ExpiresAt: expires,
		Reason:    req.Reason,
		Actor:     socketActor,
		Sites:     req.Sites,
	})
	if err != nil {
		return 0, nil, err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", fmt.Sprintf("/v1/rules/%d", stored.ID))
	}
	s.log.Info("rule stored", "rule", stored.ID, "created", created, "text", stored.Text, "actor", socketActor)
	return status, ruleFromStore(stored), nil
}

func checkSites(sites []string) error {
	for i, site := range sites {
		if strings.TrimSpace(site) != site || site == "" {
			return newError(http.StatusBadRequest, CodeInvalidSites, "sites", "site %q is not a site name", site)
		}
		if slices.Contains(sites[:i], site) {
			return newError(http.StatusBadRequest, CodeInvalidSites, "sites", "site %q is listed twice", site)
		}
	}
	return nil
}

// listRules handles GET /v1/rules?state=S.
func (s *Server) listRules(w http.ResponseWriter, r *http.Request) (int, any, error) {
	state := r.URL.Query().Get("state")
	var filter store.State
	switch state {
	case "":
	case string(store.Active), string(store.Withdrawn), string(store.Expired):
		filter = store.State(state)
	case StateWithdrawing:
		filter = store.Active
	default:
		return 0, nil, newError(http.StatusBadRequest, CodeInvalidState, "state",
			"state %q is not one of active, withdrawing, withdrawn, expired", state)
	}
	rules, err := s.rules.List(r.Context(), filter)
	if err != nil {
		return 0, nil, err
	}
	out := ruleList{Rules: make([]Rule, 0, len(rules))}
	for _, sr := range rules {
		rule := ruleFromStore(sr)
		if state != "" && rule.State != state {
			continue
		}
		out.Rules = append(out.Rules, rule)
	}
	return http.StatusOK, out, nil
}

// getRule handles GET /v1/rules/{id}.
func (s *Server) getRule(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := ruleID(r)
	if err != nil {
		return 0, nil, err
	}
	sr, err := s.rules.Get(r.Context(), id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, ruleFromStore(sr), nil
}

// withdrawRule handles DELETE /v1/rules/{id}. The rule stays visible (state
// withdrawing) until the reconciler has seen its path leave the RIB.
func (s *Server) withdrawRule(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := ruleID(r)
	if err != nil {
		return 0, nil, err
	}
	sr, err := s.rules.Withdraw(r.Context(), id, socketActor)
	if err != nil {
		return 0, nil, err
	}
	s.log.Info("rule withdrawal requested", "rule", id, "actor", socketActor)
	return http.StatusAccepted, ruleFromStore(sr), nil
}

// getRIB handles GET /v1/rib: actual state, sorted by family then match.
func (s *Server) getRIB(w http.ResponseWriter, r *http.Request) (int, any, error) {
	out := pathList{Paths: []Path{}}
	ok := s.rib.Paths(func(m flowspec.Match, a flowspec.Action) {
		out.Paths = append(out.Paths, pathFromRIB(m, a))
	})
	if !ok {
		return 0, nil, newError(http.StatusServiceUnavailable, CodeUnavailable, "",
			"the RIB mirror is not ready yet (the BGP speaker is starting); retry")
	}
	slices.SortFunc(out.Paths, func(a, b Path) int {
		return cmp.Or(cmp.Compare(a.Family, b.Family), cmp.Compare(a.Match, b.Match))
	})
	return http.StatusOK, out, nil
}

// getPeers handles GET /v1/peers.
func (s *Server) getPeers(w http.ResponseWriter, r *http.Request) (int, any, error) {
	peers, err := s.rib.Peers(r.Context())
	if err != nil {
		if r.Context().Err() != nil {
			return 0, nil, err
		}
		return 0, nil, newError(http.StatusServiceUnavailable, CodeUnavailable, "",
			"BGP speaker: %s", oneLine(err.Error()))
	}
	out := peerList{Peers: make([]Peer, 0, len(peers))}
	for _, p := range peers {
		out.Peers = append(out.Peers, peerFromBGP(p))
	}
	return http.StatusOK, out, nil
}

func ruleID(r *http.Request) (int64, error) {
	s := r.PathValue("id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, newError(http.StatusBadRequest, CodeInvalidID, "id", "rule id %q is not a positive integer", s)
	}
	return id, nil
}

// decodeJSON decodes exactly one JSON object with only known fields.
func decodeJSON(r *http.Request, v any, limit int64) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// Anything after the object is a mistake, not something to ignore.
		if err = dec.Decode(&struct{}{}); err == io.EOF {
			return nil
		}
		if err == nil {
			err = errors.New("data after the JSON object")
		}
	}
	var (
		tooLarge *http.MaxBytesError
		syntax   *json.SyntaxError
		typ      *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooLarge):
		return errBodyTooLarge(limit)
	case errors.Is(err, io.EOF):
		return newError(http.StatusBadRequest, CodeInvalidBody, "", "request body is empty; expected a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return newError(http.StatusBadRequest, CodeInvalidBody, "", "request body is truncated JSON")
	case errors.As(err, &syntax):
		return newError(http.StatusBadRequest, CodeInvalidBody, "", "request body is not valid JSON (byte %d): %s", syntax.Offset, syntax.Error())
	case errors.As(err, &typ):
		if typ.Field == "" {
			return newError(http.StatusBadRequest, CodeInvalidBody, "", "request body must be a JSON object, not %s", typ.Value)
		}
		return newError(http.StatusBadRequest, CodeInvalidBody, typ.Field, "field %q must be %s, not %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		f = strings.Trim(f, `"`)
		return newError(http.StatusBadRequest, CodeInvalidBody, f, "unknown field %q", f)
	}
	return newError(http.StatusBadRequest, CodeInvalidBody, "", "request body: %s", oneLine(msg))
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "true or false"
	default:
		return "a number"
	}
}
