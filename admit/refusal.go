package admit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ribkeeper/ribkeeper/store"
)

// Kind classifies a refusal; the API maps each to one HTTP status.
type Kind int

// The kinds of refusal.
const (
	KindInvalidRule  Kind = iota + 1 // the rule text does not parse or is incomplete (400)
	KindInvalidTTL                   // the TTL is not a positive duration or "never" (400)
	KindInvalidInput                 // another field is out of bounds or malformed (400)
	KindUnsendable                   // valid, but the speaker cannot carry it (422)
	KindTooLarge                     // more rules in one request than [limits] allows (413)
	KindForbidden                    // outside the actor's scope or role (403)
	KindNotFound                     // no such rule, or another scope's (404)
	KindGuardrail                    // a guardrail refuses it (422)
	KindRateLimited                  // too many new rules for now (429); see RetryAfter
	KindDeclared                     // a static rule of a configuration (409)
	KindUnavailable                  // the store cannot answer now (503): retry
	KindSetConflict                  // the rule belongs to another declarative set (409)
)

func (k Kind) String() string {
	switch k {
	case KindInvalidRule:
		return "invalid rule"
	case KindInvalidTTL:
		return "invalid ttl"
	case KindInvalidInput:
		return "invalid input"
	case KindUnsendable:
		return "unsendable"
	case KindTooLarge:
		return "too large"
	case KindForbidden:
		return "forbidden"
	case KindNotFound:
		return "not found"
	case KindGuardrail:
		return "guardrail"
	case KindRateLimited:
		return "rate limited"
	case KindDeclared:
		return "declared"
	case KindUnavailable:
		return "unavailable"
	case KindSetConflict:
		return "set conflict"
	}
	return "refused"
}

// Refusal is a write the gate refused: nothing was stored or announced
// (for KindUnavailable: nothing was acknowledged; see the store's
// contract). Msg says why and what to do next, naming the limit and the
// setting that changes it where one does.
type Refusal struct {
	Kind Kind
	// Index is the position of the rule in a batch; -1 for a single one.
	Index int
	// Field is the request field at fault ("text", "ttl", "sites",
	// "reason", "id", "rules"), or "".
	Field string
	Msg   string
	// Guardrail names the guardrail for KindGuardrail (guard's names),
	// and Detail says why in the guardrail's own words (Msg names the
	// rule too).
	Guardrail string
	Detail    string
	// RetryAfter is when to try again, for KindRateLimited.
	RetryAfter time.Duration
	// Err is the cause, if any: a *flowspec.SyntaxError for
	// KindInvalidRule, the store's error for KindUnavailable.
	Err error
}

func (r *Refusal) Error() string {
	if r.Index >= 0 {
		return fmt.Sprintf("rules[%d].%s: %s", r.Index, r.Field, r.Msg)
	}
	return r.Msg
}

func (r *Refusal) Unwrap() error { return r.Err }

// As returns err's *Refusal, if it is one.
func As(err error) (*Refusal, bool) {
	var r *Refusal
	ok := errors.As(err, &r)
	return r, ok
}

func refuse(k Kind, index int, field, format string, args ...any) *Refusal {
	return &Refusal{Kind: k, Index: index, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// fromStore classifies an error of the store: its input errors, refusals
// of static rules, unknown ids and outages become Refusals; anything else
// is returned as it is (a bug, or a failure the caller reports as
// internal).
func fromStore(err error, id int64) error {
	if err == nil {
		return nil
	}
	var (
		ie *store.InputError
		de *store.DeclaredError
		se *store.SetConflictError
	)
	switch {
	case errors.As(err, &se):
		return &Refusal{Kind: KindSetConflict, Index: -1, Field: "text", Msg: se.Error(), Err: err}
	case errors.As(err, &de):
		return &Refusal{Kind: KindDeclared, Index: -1, Field: "text", Msg: de.Error(), Err: err}
	case errors.Is(err, store.ErrNotFound):
		return &Refusal{Kind: KindNotFound, Index: -1, Field: "id", Msg: notFoundMsg(id), Err: err}
	case errors.As(err, &ie):
		field := ie.Field
		switch field {
		case "expires_at":
			field = "ttl"
		case "rule":
			field = "text"
		}
		kind := KindInvalidInput
		if field == "ttl" {
			kind = KindInvalidTTL
		}
		return &Refusal{Kind: kind, Index: ie.Index, Field: field, Msg: ie.Msg, Err: err}
	case errors.Is(err, store.ErrInvalidInput):
		return &Refusal{Kind: KindInvalidInput, Index: -1, Msg: err.Error(), Err: err}
	case errors.Is(err, store.ErrUnavailable):
		return &Refusal{Kind: KindUnavailable, Index: -1, Msg: err.Error(), Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		// The write's deadline (the gate's, [store] write_timeout) passed
		// inside the store: on PostgreSQL a commit cut short there may
		// or may not have happened.
		return &Refusal{Kind: KindUnavailable, Index: -1, Err: err,
			Msg: "the store did not answer within this write's deadline ([store] write_timeout); the database may be hung, overloaded or (PostgreSQL) failing over: the write may or may not be stored, so check the rule (GET /v1/rules) before retrying"}
	}
	return err
}

// notFoundMsg is the one message of an unknown rule id, also given for
// another scope's rule, so the two cannot be told apart.
func notFoundMsg(id int64) string {
	return fmt.Sprintf("no rule with id %d", id)
}
