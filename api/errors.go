package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ribkeeper/ribkeeper/admit"
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
	// MaxBatchRules and MaxBodyBytes, on a 413 (too_many_rules,
	// body_too_large), say how much one request may hold: at most
	// MaxBatchRules rules ([limits] max_batch_rules) in at most
	// MaxBodyBytes bytes. A client splits its batch by them.
	MaxBatchRules int   `json:"max_batch_rules,omitempty"`
	MaxBodyBytes  int64 `json:"max_body_bytes,omitempty"`
	// RetryAfter, for rate_limited, is sent as the Retry-After header.
	RetryAfter time.Duration `json:"-"`
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
	e := newError(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "",
		"request body is larger than %d bytes, the most one request may send: split it into smaller requests", limit)
	e.MaxBodyBytes = limit
	return e
}

// withBatchHint adds to a 413 how much one request may hold, so that a
// client can split its batch: the rules [limits] max_batch_rules allows
// and the body limit. Other errors pass unchanged.
func (s *Server) withBatchHint(e *Error) *Error {
	if e.Code != CodeBodyTooLarge && e.Code != CodeTooManyRules {
		return e
	}
	e.MaxBatchRules = s.gate.Limits().MaxBatchRules
	e.MaxBodyBytes = s.opts.maxBodyBytes
	if e.Code == CodeBodyTooLarge {
		e.Message = fmt.Sprintf("request body is larger than %d bytes, the most one request may send: split the batch into requests of at most %d rules ([limits] max_batch_rules) and %d bytes ('ribkeeper rule add --file' splits for you)",
			e.MaxBodyBytes, e.MaxBatchRules, e.MaxBodyBytes)
	}
	return e
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

// DefaultMaxBatchRules is how many rules one batch may hold unless
// [limits] max_batch_rules says otherwise.
const DefaultMaxBatchRules = admit.DefaultMaxBatchRules

// More error codes of writes, each from a kind of the gate's refusal.
const (
	CodeGuardrailViolation = "guardrail_violation" // a guardrail ([guardrails]) refuses the rule (422); the message names it
	CodeTooManyRules       = "too_many_rules"      // more rules in one request than [limits] max_batch_rules (413)
	CodeRateLimited        = "rate_limited"        // too many new rules for now (429, with Retry-After)
)

// refusalError maps the gate's refusal to the API's error: its kind to a
// status and code, its index and field to the request field ("text",
// "rules[3].ttl").
func refusalError(ref *admit.Refusal) *Error {
	field := ref.Field
	if ref.Index >= 0 && field != "" {
		field = fmt.Sprintf("rules[%d].%s", ref.Index, field)
	}
	msg := OneLine(ref.Msg)
	e := &Error{Field: field, Message: msg}
	switch ref.Kind {
	case admit.KindInvalidRule:
		if ref.Err != nil {
			return ruleTextError(field, ref.Err)
		}
		e.Status, e.Code = http.StatusBadRequest, CodeInvalidRule
	case admit.KindInvalidTTL:
		e.Status, e.Code = http.StatusBadRequest, CodeInvalidTTL
	case admit.KindInvalidInput:
		e.Status, e.Code = http.StatusBadRequest, CodeInvalidInput
		if field != "" && !strings.HasPrefix(msg, field) {
			e.Message = field + ": " + msg
		}
	case admit.KindUnsendable:
		e.Status, e.Code = http.StatusUnprocessableEntity, CodeUnsendable
	case admit.KindTooLarge:
		e.Status, e.Code = http.StatusRequestEntityTooLarge, CodeTooManyRules
	case admit.KindForbidden:
		e.Status, e.Code = http.StatusForbidden, CodeOutOfScope
	case admit.KindNotFound:
		e.Status, e.Code = http.StatusNotFound, CodeNotFound
	case admit.KindGuardrail:
		e.Status, e.Code = http.StatusUnprocessableEntity, CodeGuardrailViolation
	case admit.KindRateLimited:
		e.Status, e.Code = http.StatusTooManyRequests, CodeRateLimited
		e.RetryAfter = ref.RetryAfter
	case admit.KindDeclared:
		e.Status, e.Code = http.StatusConflict, CodeDeclared
	case admit.KindUnavailable:
		e.Status, e.Code = http.StatusServiceUnavailable, CodeUnavailable
	case admit.KindSetConflict:
		e.Status, e.Code = http.StatusConflict, CodeSetConflict
	default:
		e.Status, e.Code = http.StatusInternalServerError, CodeInternal
	}
	return e
}

// IsGuardrailViolation reports whether err is a guardrail's refusal.
func IsGuardrailViolation(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeGuardrailViolation
}
