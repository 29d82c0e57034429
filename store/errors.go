package store

import (
	"errors"
	"fmt"
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

// invalid returns an ErrInvalidInput error naming field.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("store: %s: %s: %w", field, fmt.Sprintf(format, args...), ErrInvalidInput)
}
