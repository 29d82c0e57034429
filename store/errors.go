package store

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotFound is returned for an unknown rule id.
var ErrNotFound = errors.New("rule not found")

// ErrUnavailable classifies errors caused by the database being unreachable,
// overloaded or out of resources rather than by the request. Callers test it
// with errors.Is: the API answers 503 (retry later), the reconciler keeps its
// cached desired state instead of treating "unknown" as "empty".
var ErrUnavailable = errors.New("store unavailable")

// ErrInvalidInput classifies errors caused by bad input (the message names
// the field). Nothing stored was changed. The API answers 400.
var ErrInvalidInput = errors.New("invalid input")

// unavailableError wraps an engine error that means the database cannot be
// used right now, and tells the operator what to check.
type unavailableError struct {
	op   string
	err  error
	hint string
}

func (e *unavailableError) Error() string {
	return fmt.Sprintf("store: %s: database unavailable: %v: %s", e.op, e.err, e.hint)
}

func (e *unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.err} }

// InputError is an input the store refused; nothing stored changed. It
// matches ErrInvalidInput. Callers map Field to their own names with
// errors.As instead of parsing the message.
type InputError struct {
	// Index is the input's position in an UpsertMany batch, -1 otherwise.
	Index int
	// Field is the Input field at fault: "rule", "reason", "actor",
	// "sites", "expires_at"; or a setting or argument: "state", "site",
	// "driver", "dsn", "path".
	Field string
	// Msg says what is wrong and what to do; it does not repeat Field.
	Msg string
}

func (e *InputError) Error() string {
	if e.Index >= 0 {
		return fmt.Sprintf("store: inputs[%d].%s: %s: %v", e.Index, e.Field, e.Msg, ErrInvalidInput)
	}
	return fmt.Sprintf("store: %s: %s: %v", e.Field, e.Msg, ErrInvalidInput)
}

// Is makes an InputError match ErrInvalidInput.
func (e *InputError) Is(target error) bool { return target == ErrInvalidInput }

// invalid returns an InputError naming field.
func invalid(field, format string, args ...any) error {
	return &InputError{Index: -1, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ErrDeclared classifies a refused change to a static rule: its Origin
// (a site's configuration) is the only place that may change it. The API
// answers 409.
var ErrDeclared = errors.New("rule declared in a configuration")

// DeclaredError is a change refused because rule ID is declared by Origin.
type DeclaredError struct {
	ID     int64
	Origin string
}

func (e *DeclaredError) Error() string {
	where := e.Origin
	if site, ok := strings.CutPrefix(e.Origin, "config:"); ok {
		where = fmt.Sprintf("the configuration of site %s ([[rule]])", site)
	}
	return fmt.Sprintf("rule %d comes from %s: change or remove it there and reload (SIGHUP)", e.ID, where)
}

// Is makes a DeclaredError match ErrDeclared.
func (e *DeclaredError) Is(target error) bool { return target == ErrDeclared }

// ErrSetConflict classifies a set's write refused because the rule with
// that match belongs to another set: a rule belongs to at most one set.
var ErrSetConflict = errors.New("rule belongs to another set")

// SetConflictError is a write of set Want refused because active rule ID
// belongs to set Set. It matches ErrSetConflict.
type SetConflictError struct {
	ID   int64
	Set  string
	Want string
}

func (e *SetConflictError) Error() string {
	return fmt.Sprintf("rule %d belongs to set %q, so set %q cannot take it: a rule belongs to one set; drop the line from one of them, or delete set %q first",
		e.ID, e.Set, e.Want, e.Set)
}

// Is makes a SetConflictError match ErrSetConflict.
func (e *SetConflictError) Is(target error) bool { return target == ErrSetConflict }
