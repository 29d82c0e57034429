package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Error codes. They are part of the API and do not change; messages may.
const (
	CodeInvalidBody      = "invalid_body"    // the body is not the JSON object the route expects
	CodeInvalidRule      = "invalid_rule"    // the rule text does not parse
	CodeInvalidTTL       = "invalid_ttl"     // ttl is not a positive Go duration
	CodeInvalidInput     = "invalid_input"   // the store refused a value (e.g. a site name); see field and message
	CodeUnsendable       = "unsendable_rule" // valid, but the BGP speaker cannot carry it (422); the message says why
	CodeInvalidState     = "invalid_state"   // unknown ?state= value
	CodeInvalidID        = "invalid_id"      // the rule id is not a positive integer
	CodeNotFound         = "not_found"       // no such rule, or no such route
	CodeMethodNotAllowed = "method_not_allowed"
	CodeBodyTooLarge     = "body_too_large"
	CodeUnauthorized     = "unauthorized" // TCP listener: no bearer token, or an unknown one (401)
	CodeForbidden        = "forbidden"    // TCP listener: the token's role does not allow the request (403)
	CodeUnavailable      = "unavailable"  // a dependency (RIB, speaker, database) cannot answer now; retry
	CodeDeclared         = "declared"     // the rule is a static rule of a configuration ([[rule]]); change it there (409)
	CodeInternal         = "internal"     // a bug or an unclassified failure; see the daemon log
)

// Error is the error every route returns, and what Client methods return
// when the daemon answered with an error.
type Error struct {
	Status  int    `json:"-"` // HTTP status
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`  // the request field at fault, if one is
	Column  int    `json:"column,omitempty"` // 1-based column in the rule text, for invalid_rule
}

func (e *Error) Error() string { return e.Message }

// ErrorBody is the JSON body of every error answer: {"error": {...}}.
type ErrorBody struct {
	Error *Error `json:"error"`
}

func newError(status int, code, field, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

func errInternal() *Error {
	return newError(http.StatusInternalServerError, CodeInternal, "", "internal error (see the daemon log)")
}

func errBodyTooLarge(limit int64) *Error {
	return newError(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "",
		"request body is larger than %d bytes", limit)
}

// ruleTextError turns a flowspec parse error into a 400 that points at the
// offending word, e.g.
//
//	rule text: "foo" (column 12): unknown match component
func ruleTextError(field string, err error) *Error {
	e := &Error{Status: http.StatusBadRequest, Code: CodeInvalidRule, Field: field}
	var se *flowspec.SyntaxError
	if !errors.As(err, &se) {
		e.Message = "rule text: " + err.Error()
		return e
	}
	off := min(max(se.Offset, 0), len(se.Input))
	e.Column = utf8.RuneCountInString(se.Input[:off]) + 1
	where := "at the end"
	if se.Word != "" {
		where = fmt.Sprintf("%q", se.Word)
	}
	e.Message = fmt.Sprintf("rule text: %s (column %d): %s", where, e.Column, OneLine(se.Msg))
	return e
}

// OneLine keeps messages on one line so the CLI prints one line per error.
func OneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n\t") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}
