package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/store"
)

// Declarative sets: PUT /v1/sets/{name} takes the body of POST
// /v1/rules/batch and makes the rules of set name exactly that list
// (admit.Gate.ApplySetLines says how), GET /v1/sets/{name} lists them,
// GET /v1/sets counts every set, DELETE /v1/sets/{name} withdraws them.

// SetResult is the answer of PUT and DELETE /v1/sets/{name}: what the
// apply did.
type SetResult struct {
	Set string `json:"set"`
	// Rules is the rules the set holds after the apply.
	Rules     int `json:"rules"`
	Created   int `json:"created"`
	Updated   int `json:"updated"`
	Unchanged int `json:"unchanged"`
	Withdrawn int `json:"withdrawn"`
}

// SetSummary is one set in GET /v1/sets.
type SetSummary struct {
	Name string `json:"name"`
	// Active counts its active rules (withdrawals in progress not
	// counted); Actors names who last wrote them.
	Active int      `json:"active"`
	Actors []string `json:"actors"`
}

// SetList is the answer of GET /v1/sets.
type SetList struct {
	Sets []SetSummary `json:"sets"`
}

// CodeSetConflict is the code of a 409: a line's rule belongs to another
// set.
const CodeSetConflict = "set_conflict"

// setLongRequest bounds the read and the answer of one set's apply: a
// million lines take longer than the server's usual deadlines.
const setLongRequest = 30 * time.Minute

func (s *Server) setRoutes(mux *http.ServeMux) {
	mux.Handle("PUT /v1/sets/{name}", s.handle(s.applySet))
	mux.Handle("GET /v1/sets", s.handle(s.listSets))
	mux.Handle("GET /v1/sets/{name}", s.handle(s.getSet))
	mux.Handle("DELETE /v1/sets/{name}", s.handle(s.deleteSet))
}

// isSetPut reports whether r applies a set, whose body has its own bound.
func isSetPut(r *http.Request) bool {
	return r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/sets/")
}

func (s *Server) setBodyLimit() int64 { return int64(s.gate.Limits().MaxSetBodyBytes) }

func errSetBodyTooLarge(limit int64) *Error {
	return newError(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "",
		"request body is larger than %d bytes, the most a set may send ([limits] max_set_body_bytes): split the feed into several sets, or raise max_set_body_bytes", limit)
}

// applySet handles PUT /v1/sets/{name}. The body is decoded one rule at a
// time into the gate's compact lines, never held whole.
func (s *Server) applySet(w http.ResponseWriter, r *http.Request) (int, any, error) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(setLongRequest))
	rc.SetWriteDeadline(time.Now().Add(setLongRequest))
	a := writer(r)
	lines := s.gate.NewSetLines(a)
	if err := decodeSetBody(r.Body, func(req ruleRequest) error { return lines.Add(req.admit()) }, s.setBodyLimit()); err != nil {
		return 0, nil, err
	}
	if lines.Len() == 0 {
		return 0, nil, newError(http.StatusBadRequest, CodeInvalidBody, "rules",
			"rules is empty: to withdraw every rule of the set, DELETE /v1/sets/%s", r.PathValue("name"))
	}
	res, err := s.gate.ApplySetLines(r.Context(), a, r.PathValue("name"), lines)
	if err != nil {
		return 0, nil, err
	}
	s.log.Info("set applied", "set", res.Set, "rules", res.Rules, "created", res.Created, "updated", res.Updated,
		"withdrawn", res.Withdrawn, "unchanged", res.Unchanged, "actor", a.Name)
	return http.StatusOK, setResult(res), nil
}

// decodeSetBody reads {"rules": [...]} and calls add for each rule, in
// order, as it is decoded.
func decodeSetBody(body io.Reader, add func(ruleRequest) error, limit int64) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	fail := func(err error) error { return jsonError(err, errSetBodyTooLarge(limit)) }
	delim := func(want json.Delim) error {
		tok, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		if d, ok := tok.(json.Delim); !ok || d != want {
			return newError(http.StatusBadRequest, CodeInvalidBody, "", "request body must be a JSON object {\"rules\": [...]}, found %v where %q belongs", tok, want)
		}
		return nil
	}
	if err := delim('{'); err != nil {
		return err
	}
	seen := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		if key, _ := tok.(string); key != "rules" || seen {
			return newError(http.StatusBadRequest, CodeInvalidBody, fmt.Sprint(tok), "unknown or repeated field %q: the body is {\"rules\": [...]}", tok)
		}
		seen = true
		if err := delim('['); err != nil {
			return err
		}
		for dec.More() {
			var req ruleRequest
			if err := dec.Decode(&req); err != nil {
				return fail(err)
			}
			if err := add(req); err != nil {
				return err
			}
		}
		if err := delim(']'); err != nil {
			return err
		}
	}
	if err := delim('}'); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = errors.New("data after the JSON object")
		}
		return fail(err)
	}
	return nil
}

// deleteSet handles DELETE /v1/sets/{name}: every rule of the set is
// withdrawn.
func (s *Server) deleteSet(w http.ResponseWriter, r *http.Request) (int, any, error) {
	a := writer(r)
	res, err := s.gate.WithdrawSet(r.Context(), a, r.PathValue("name"))
	if err != nil {
		return 0, nil, err
	}
	s.log.Info("set withdrawn", "set", res.Set, "withdrawn", res.Withdrawn, "actor", a.Name)
	return http.StatusOK, setResult(res), nil
}

// getSet handles GET /v1/sets/{name}: its active rules, newest first, a
// page at a time (limit, after) as GET /v1/rules.
func (s *Server) getSet(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if err := store.CheckSetName(r.PathValue("name")); err != nil {
		return 0, nil, newError(http.StatusBadRequest, CodeInvalidInput, "set", "%v", err)
	}
	return s.listPage(r, string(store.Active), OrderID)
}

// listSets handles GET /v1/sets. A scoped token sees the sets it wrote.
func (s *Server) listSets(w http.ResponseWriter, r *http.Request) (int, any, error) {
	counts, err := s.rules.SetCounts(r.Context())
	if err != nil {
		return 0, nil, err
	}
	id := scopeOf(r.Context())
	me := actor(r)
	out := SetList{Sets: []SetSummary{}}
	for _, c := range counts {
		if id.scoped() && c.Actor != me {
			continue
		}
		if n := len(out.Sets); n > 0 && out.Sets[n-1].Name == c.Name {
			out.Sets[n-1].Active += c.Active
			out.Sets[n-1].Actors = append(out.Sets[n-1].Actors, c.Actor)
			continue
		}
		out.Sets = append(out.Sets, SetSummary{Name: c.Name, Active: c.Active, Actors: []string{c.Actor}})
	}
	return http.StatusOK, out, nil
}

func setResult(r admit.SetResult) SetResult {
	return SetResult{Set: r.Set, Rules: r.Rules, Created: r.Created, Updated: r.Updated, Unchanged: r.Unchanged, Withdrawn: r.Withdrawn}
}
