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

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// handlerFunc returns the status and body of a successful response, or an
// error; errors become JSON errors (see Server.toError).
type handlerFunc func(w http.ResponseWriter, r *http.Request) (status int, body any, err error)

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/rules", s.handle(s.addRule))
	mux.Handle("GET /v1/rules", s.handle(s.listRules))
	mux.Handle("POST /v1/rules/batch", s.handle(s.addRules))
	mux.Handle("POST /v1/rules/withdraw", s.handle(s.withdrawMatch))
	mux.Handle("POST /v1/rules/withdraw/batch", s.handle(s.withdrawMatches))
	mux.Handle("GET /v1/rules/{id}", s.handle(s.getRule))
	mux.Handle("GET /v1/rules/{id}/history", s.handle(s.getHistory))
	mux.Handle("DELETE /v1/rules/{id}", s.handle(s.withdrawRule))
	mux.Handle("GET /v1/rib", s.handle(s.getRIB))
	mux.Handle("GET /v1/peers", s.handle(s.getPeers))
	mux.Handle("GET /v1/status", s.handle(s.getStatus))
	mux.Handle("GET /v1/diff", s.handle(s.getDiff))
	mux.Handle("GET /v1/whoami", s.handle(s.getWhoami))
	mux.HandleFunc("GET /v1/openapi.json", serveOpenAPI)
	mux.Handle("GET /v1/incidents", s.handle(s.listIncidents))
	mux.Handle("GET /v1/incidents/{id}", s.handle(s.getIncident))
	s.setRoutes(mux)
	s.consoleRoutes(mux)
	s.signalRoutes(mux)
	if s.opts.metrics != nil {
		mux.Handle("GET /metrics", s.opts.metrics)
	}
	return mux
}

func (s *Server) handle(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, body, err := h(w, r)
		if err != nil {
			writeError(w, s.withBatchHint(s.toError(r, err)))
			return
		}
		writeJSON(w, status, body)
	})
}

// toError classifies err into the API's error vocabulary. Unclassified
// errors are logged and reported as internal without their text.
func (s *Server) toError(r *http.Request, err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if ref, ok := admit.As(err); ok {
		if ref.Kind == admit.KindUnavailable {
			s.log.Warn("store unavailable", "method", r.Method, "path", r.URL.Path, "error", ref.Err)
		}
		return refusalError(ref)
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return newError(http.StatusNotFound, CodeNotFound, "id", "no rule with id %s", r.PathValue("id"))
	case errors.Is(err, store.ErrInvalidInput):
		return newError(http.StatusBadRequest, CodeInvalidInput, "", "%s", OneLine(strings.TrimPrefix(err.Error(), "store: ")))
	case errors.Is(err, store.ErrUnavailable):
		s.log.Warn("store unavailable", "method", r.Method, "path", r.URL.Path, "error", err)
		return newError(http.StatusServiceUnavailable, CodeUnavailable, "", "%s", OneLine(err.Error()))
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads this answer.
		s.log.Debug("request canceled", "method", r.Method, "path", r.URL.Path)
		return newError(http.StatusServiceUnavailable, CodeUnavailable, "", "request canceled")
	}
	s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	return errInternal()
}

// ruleRequest turns the body of one rule into the gate's request.
func (req ruleRequest) admit() admit.Request {
	return admit.Request{Text: req.Text, TTL: req.TTL, Reason: req.Reason, Sites: req.Sites,
		AllowUnknownSites: req.AllowUnknownSites}
}

// addRule handles POST /v1/rules: the gate checks the request in full
// before anything is stored.
func (s *Server) addRule(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req ruleRequest
	if err := decodeJSON(r, &req, s.opts.maxBodyBytes); err != nil {
		return 0, nil, err
	}
	a := writer(r)
	stored, created, err := s.gate.Add(r.Context(), a, req.admit())
	if err != nil {
		return 0, nil, err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", fmt.Sprintf("/v1/rules/%d", stored.ID))
	}
	s.logChange(stored, created, a.Name)
	return status, ruleFromStore(stored), nil
}

// addRules handles POST /v1/rules/batch: the gate checks every rule
// before any is stored, and the store applies them all or none.
func (s *Server) addRules(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req rulesRequest
	if err := decodeRules(r, &req, s.opts.maxBodyBytes); err != nil {
		return 0, nil, err
	}
	if len(req.Rules) == 0 {
		return 0, nil, newError(http.StatusBadRequest, CodeInvalidBody, "rules", "rules is empty")
	}
	reqs := make([]admit.Request, len(req.Rules))
	for i, rr := range req.Rules {
		reqs[i] = rr.admit()
	}
	a := writer(r)
	stored, err := s.gate.AddMany(r.Context(), a, reqs)
	if err != nil {
		return 0, nil, err
	}
	if prefersMinimal(r.Header) {
		w.Header().Set("Preference-Applied", "return=minimal")
		ids := StoredIDs{IDs: make([]int64, len(stored))}
		for i, sr := range stored {
			ids.IDs[i] = sr.ID
		}
		s.logBatch(stored, a.Name)
		return http.StatusOK, ids, nil
	}
	out := RuleList{Rules: make([]Rule, 0, len(stored))}
	for _, sr := range stored {
		out.Rules = append(out.Rules, ruleFromStore(sr))
	}
	s.logBatch(stored, a.Name)
	return http.StatusOK, out, nil
}

// prefersMinimal reports whether h asks for a minimal answer: a Prefer
// header (RFC 7240) with the preference return=minimal, among others or
// in several headers; names are case-insensitive, the value may be quoted.
func prefersMinimal(h http.Header) bool {
	for _, v := range h.Values("Prefer") {
		for _, pref := range strings.Split(v, ",") {
			pref, _, _ = strings.Cut(pref, ";") // parameters of the preference
			name, val, ok := strings.Cut(strings.TrimSpace(pref), "=")
			if ok && strings.EqualFold(strings.TrimSpace(name), "return") &&
				strings.EqualFold(strings.Trim(strings.TrimSpace(val), `"`), "minimal") {
				return true
			}
		}
	}
	return false
}

// logBatch logs the changes of one batch: each rule once, as what it
// became (its last occurrence), the first maxBatchInfoLogs at Info.
func (s *Server) logBatch(stored []store.Rule, actor string) {
	last := make(map[int64]int, len(stored))
	for i, sr := range stored {
		last[sr.ID] = i
	}
	logged := 0
	for i, sr := range stored {
		if last[sr.ID] != i {
			continue
		}
		lvl := hclog.Info
		if logged >= maxBatchInfoLogs {
			lvl = hclog.Debug
		}
		s.logChangeAt(lvl, sr, sr.CreatedAt.Equal(sr.UpdatedAt), actor)
		logged++
	}
	if logged > maxBatchInfoLogs {
		s.log.Info("and more rule changes in this batch (logged at debug level)", "count", logged-maxBatchInfoLogs, "actor", actor)
	}
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
	order := r.URL.Query().Get("order")
	switch order {
	case "":
		order = OrderID
	case OrderID, OrderPrecedence, OrderExpires:
	default:
		return 0, nil, newError(http.StatusBadRequest, CodeInvalidBody, "order",
			"order %q is not one of id (newest first), precedence (the order routers apply rules in), expires (soonest expiry first)", order)
	}
	q := r.URL.Query()
	if q.Has("limit") || q.Has("after") {
		return s.listPage(r, state, order)
	}
	id := scopeOf(r.Context())
	var (
		rules []store.Rule
		ord   *ordered
		err   error
	)
	if order == OrderPrecedence && !id.scoped() {
		// Every unscoped reader shares one ordering per store revision
		// (precedence.go): many readers cost one sort, not one each.
		ord, err = s.order.get(r.Context(), s.rules)
		if ord != nil {
			rules = ord.rules
		}
	} else {
		rules, err = s.rules.List(r.Context(), filter)
	}
	if err != nil {
		return 0, nil, err
	}
	keep := func(sr store.Rule) bool {
		// A scoped token sees only the rules inside its prefixes.
		return (filter == "" || sr.State == filter) && (state == "" || ruleFromStore(sr).State == state) && id.sees(sr.Rule.Match)
	}
	switch {
	case ord != nil:
	case order == OrderPrecedence:
		rules = slices.DeleteFunc(rules, func(sr store.Rule) bool { return !keep(sr) })
		ord = byPrecedence(rules)
	case order == OrderExpires:
		byExpiry(rules)
	}
	out := RuleList{Order: order, Rules: make([]Rule, 0, len(rules))}
	for _, sr := range rules {
		if !keep(sr) {
			continue
		}
		rule := ruleFromStore(sr)
		if ord != nil {
			ord.annotate(&rule)
		}
		s.withDelivery(&rule, sr)
		out.Rules = append(out.Rules, rule)
	}
	return http.StatusOK, out, nil
}

// DefaultPage is the page size of GET /v1/rules?after=ID without limit.
const DefaultPage = 1000

// listPage answers GET /v1/rules?limit=N&after=ID: one page of the rules
// newest first, and the cursor of the next page ("next", absent after the
// last page). Paging needs order=id: the other orders sort the whole set.
func (s *Server) listPage(r *http.Request, state, order string) (int, any, error) {
	q := r.URL.Query()
	if order != OrderID {
		return 0, nil, newError(http.StatusBadRequest, CodeInvalidBody, "order",
			"paging (limit, after) lists by id only; order %q sorts every rule: drop limit and after, or use order=id", order)
	}
	// GET /v1/sets/{name} lists the rules of one set.
	p := store.Page{Limit: DefaultPage, Set: r.PathValue("name")}
	if v := q.Get("limit"); q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxPage {
			return 0, nil, newError(http.StatusBadRequest, CodeInvalidBody, "limit", "limit %q is not a number from 1 to %d", v, store.MaxPage)
		}
		p.Limit = n
	}
	if v := q.Get("after"); q.Has("after") {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id < 0 {
			return 0, nil, newError(http.StatusBadRequest, CodeInvalidID, "after", "after %q is not a rule id", v)
		}
		p.After = id
	}
	switch state {
	case "":
	case StateWithdrawing, string(store.Active):
		p.State = store.Active
		w := state == StateWithdrawing
		p.WithdrawRequested = &w
	default:
		p.State = store.State(state)
	}
	out := RuleList{Order: OrderID, Rules: []Rule{}}
	id := scopeOf(r.Context())
	for {
		rules, err := s.rules.ListPage(r.Context(), p)
		if err != nil {
			return 0, nil, err
		}
		for _, sr := range rules {
			// A scoped token sees only the rules inside its prefixes:
			// its page is filled from the following ones.
			if !id.sees(sr.Rule.Match) {
				continue
			}
			rule := ruleFromStore(sr)
			s.withDelivery(&rule, sr)
			out.Rules = append(out.Rules, rule)
			if len(out.Rules) == p.Limit {
				out.Next = sr.ID
				return http.StatusOK, out, nil
			}
		}
		if len(rules) < p.Limit {
			return http.StatusOK, out, nil // no more rules
		}
		p.After = rules[len(rules)-1].ID
	}
}

// The orders of GET /v1/rules (?order=).
const (
	OrderID         = "id"         // newest first (the default)
	OrderPrecedence = "precedence" // the order routers apply rules in
	OrderExpires    = "expires"    // soonest expiry first, rules that never expire last
)

// OrderText says an order in words, as rule list prints it.
func OrderText(order string) string {
	switch order {
	case OrderPrecedence:
		return "in precedence order: active FlowSpec rules as routers apply them (RFC 8955 §5.1), IPv4 then IPv6; then active routes, newest first; then the rest, newest first"
	case OrderExpires:
		return "by expiry: soonest first, rules that never expire last"
	}
	return "by id: newest first"
}

// byExpiry sorts rules soonest expiry first, those that never expire
// last, newest first among equals.
func byExpiry(rules []store.Rule) {
	slices.SortStableFunc(rules, func(a, b store.Rule) int {
		switch {
		case a.ExpiresAt.IsZero() != b.ExpiresAt.IsZero():
			if a.ExpiresAt.IsZero() {
				return 1
			}
			return -1
		case !a.ExpiresAt.Equal(b.ExpiresAt):
			return a.ExpiresAt.Compare(b.ExpiresAt)
		}
		return cmp.Compare(b.ID, a.ID)
	})
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
	// Another scope's rule does not exist for this token: the same 404.
	if !scopeOf(r.Context()).sees(sr.Rule.Match) {
		return 0, nil, store.ErrNotFound
	}
	out := ruleFromStore(sr)
	s.withDelivery(&out, sr)
	if !scopeOf(r.Context()).scoped() && out.State == string(store.Active) {
		// Its place in the routers' order, and what shadows it, as the
		// list shows them; the rule is shown without them if the order
		// cannot be read now.
		if ord, err := s.order.get(r.Context(), s.rules); err == nil {
			ord.annotate(&out)
		}
	}
	return http.StatusOK, out, nil
}

// withdrawRule handles DELETE /v1/rules/{id}. The rule stays visible (state
// withdrawing) until the reconciler has seen its path leave the RIB.
func (s *Server) withdrawRule(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := ruleID(r)
	if err != nil {
		return 0, nil, err
	}
	a := writer(r)
	sr, err := s.gate.Withdraw(r.Context(), a, id)
	if err != nil {
		return 0, nil, err
	}
	s.log.Info("rule changed", "rule", id, "op", "withdraw", "family", sr.Rule.Match.Family(),
		"actor", a.Name, "text", sr.Text)
	return http.StatusAccepted, ruleFromStore(sr), nil
}

// getHistory handles GET /v1/rules/{id}/history: the rule's audit
// trail, oldest first.
func (s *Server) getHistory(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := ruleID(r)
	if err != nil {
		return 0, nil, err
	}
	if sc := scopeOf(r.Context()); sc != nil && len(sc.prefixes) > 0 {
		sr, err := s.rules.Get(r.Context(), id)
		if err != nil {
			return 0, nil, err
		}
		if !sc.sees(sr.Rule.Match) {
			return 0, nil, store.ErrNotFound // as for an unknown id
		}
	}
	evs, err := s.rules.History(r.Context(), id)
	if err != nil {
		return 0, nil, err
	}
	out := EventList{Events: make([]Event, 0, len(evs))}
	for _, e := range evs {
		out.Events = append(out.Events, eventFromStore(e))
	}
	return http.StatusOK, out, nil
}

// getRIB handles GET /v1/rib: actual state, sorted by family then match,
// each path with the rule that asks for it, when it was announced and
// which peers hold it.
func (s *Server) getRIB(w http.ResponseWriter, r *http.Request) (int, any, error) {
	out := PathList{Paths: []Path{}}
	id := scopeOf(r.Context())
	var ms []flowspec.Match
	ok := s.rib.Paths(func(m flowspec.Match, a flowspec.Action) {
		if !id.sees(m) {
			return // a scoped token sees only its prefixes
		}
		out.Paths = append(out.Paths, pathFromRIB(m, a))
		ms = append(ms, m)
	})
	if !ok {
		return 0, nil, newError(http.StatusServiceUnavailable, CodeUnavailable, "",
			"the RIB mirror is not ready yet (the BGP speaker is starting); retry")
	}
	// What is known of each path; a part that cannot be read now is left
	// out rather than failing the whole answer.
	ages, _ := s.rib.PathAges(r.Context())
	rules := map[flowspec.Match]int64{}
	if ord, err := s.order.get(r.Context(), s.rules); err == nil {
		for i := range ord.rules {
			if sr := &ord.rules[i]; sr.State == store.Active && !sr.WithdrawRequested {
				rules[sr.Rule.Match] = sr.ID
			}
		}
	}
	for i, m := range ms {
		p := &out.Paths[i]
		p.RuleID = rules[m]
		if t, ok := ages[m]; ok {
			t = t.UTC()
			p.Since = &t
		}
		peers, total := s.rib.Delivery(m)
		p.Peers = NonNil(peers)
		p.AnnouncedTo = fmt.Sprintf("%d/%d", len(peers), total)
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
			"BGP speaker: %s", OneLine(err.Error()))
	}
	out := PeerList{Peers: make([]Peer, 0, len(peers))}
	scoped := scopeOf(r.Context()).scoped()
	for _, p := range peers {
		peer := peerFromBGP(p)
		if scoped {
			peer = scopedPeer(peer) // no appliance-wide path counts
		}
		out.Peers = append(out.Peers, peer)
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
	return decodeJSONFrom(r.Body, v, limit)
}

var errUnexpectedData = errors.New("data after the JSON object")

// jsonError is the API's error for a body that did not decode: tooLarge
// when it ran past its limit.
func jsonError(err error, tooLarge *Error) error {
	var (
		maxBytes *http.MaxBytesError
		syntax   *json.SyntaxError
		typ      *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &maxBytes):
		return tooLarge
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
	return newError(http.StatusBadRequest, CodeInvalidBody, "", "request body: %s", OneLine(msg))
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

// logChange writes the one log line of a stored rule change, with the keys
// every rule change uses: rule, op, family, actor, text (and expires).
func (s *Server) logChange(r store.Rule, created bool, actor string) {
	s.logChangeAt(hclog.Info, r, created, actor)
}

// logChangeAt logs one rule change at lvl; nothing is formatted when lvl is
// not enabled.
func (s *Server) logChangeAt(lvl hclog.Level, r store.Rule, created bool, actor string) {
	// IsInfo/IsDebug, not GetLevel: a logger that writes nothing (the
	// null logger) reports no level, which compares below every level.
	if on := lvl == hclog.Info && s.log.IsInfo() || lvl == hclog.Debug && s.log.IsDebug(); !on {
		return
	}
	op := "update"
	if created {
		op = "create"
	}
	expires := "never"
	if !r.ExpiresAt.IsZero() {
		expires = r.ExpiresAt.UTC().Format(time.RFC3339)
	}
	s.log.Log(lvl, "rule changed", "rule", r.ID, "op", op, "family", r.Rule.Match.Family(),
		"actor", actor, "text", r.Text, "expires", expires)
}

// maxBatchInfoLogs is how many rule changes of one batch request are logged
// one by one at Info; the rest go to Debug, with one Info summary, so a bulk
// load of 100,000 rules does not write 100,000 lines.
const maxBatchInfoLogs = 100
