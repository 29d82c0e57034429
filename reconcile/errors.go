package reconcile

import (
	"errors"
	"fmt"
)

// terminal is implemented by errors that report bad data: retrying the same
// request can never succeed. The store, the speaker and flowspec declare
// their own error types; the reconciler only asks this question of them.
type terminal interface {
	Terminal() bool
}

// IsTerminal reports whether err (or an error it wraps) is bad data that must
// be recorded and not retried. Any other error is transient.
func IsTerminal(err error) bool {
	var t terminal
	return errors.As(err, &t) && t.Terminal()
}

// InvalidRuleError is the terminal error recorded for a stored rule that
// fails validation before anything is sent to the speaker.
type InvalidRuleError struct {
	ID     int64
	Reason string
}

func (e *InvalidRuleError) Error() string {
	return fmt.Sprintf("invalid rule %d: %s", e.ID, e.Reason)
}

// Terminal reports true: a stored rule does not become valid by retrying.
func (e *InvalidRuleError) Terminal() bool { return true }

// ErrMirrorNotReady is returned by Preview while the speaker's mirror of the
// RIB is not initialised: actual state is unknown, not empty.
var ErrMirrorNotReady = errors.New("reconcile: RIB mirror not initialised")
