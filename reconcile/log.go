package reconcile

import (
	"fmt"

	"github.com/hashicorp/go-hclog"
)

// passLog throttles the per-rule log lines of one pass: a bulk load or a
// dead speaker must not write a line per rule.
type passLog struct {
	// failed counts the rule failures of the pass; changed the rule
	// changes by kind, and info those of them written at Info.
	failed        int
	changed, info [3]int
}

// maxFailLogs bounds the per-rule failure lines of one pass: when the
// speaker is down every rule fails, and one line per rule per retry would
// bury everything else.
const maxFailLogs = 20

// maxChangeLogs bounds the per-rule Info lines of one pass ("rule
// announced", "rule withdrawn", "rule finished"): a bulk load of 100,000
// rules logs the first ones, then the rest at Debug and one summary line.
const maxChangeLogs = 100

// Kinds of rule change logged (index into passLog.changed).
const (
	changeAnnounced = iota
	changeWithdrawn
	changeFinished
)

// begin starts a pass's counts.
func (l *passLog) begin() { *l = passLog{} }

// change logs one rule change: at Info for the first maxChangeLogs
// changes of the pass, at Debug after that (the arguments are formatted
// only if the line is written).
func (l *passLog) change(log hclog.Logger, kind int, msg string, args ...any) {
	l.changed[kind]++
	if l.changed[0]+l.changed[1]+l.changed[2] <= maxChangeLogs {
		l.info[kind]++
		log.Info(msg, args...)
	} else if log.IsDebug() {
		log.Debug(msg, args...)
	}
}

// failure reports whether this pass may log one more rule failure.
func (l *passLog) failure() bool {
	l.failed++
	return l.failed <= maxFailLogs
}

// end writes the summary lines of what was not logged one by one.
func (l *passLog) end(log hclog.Logger) {
	if n := l.failed - maxFailLogs; n > 0 {
		log.Warn("more rules failed; not logged one by one", "count", n)
	}
	c, in := l.changed, l.info
	more := c[0] + c[1] + c[2] - in[0] - in[1] - in[2]
	if more <= 0 {
		return
	}
	log.Info(fmt.Sprintf("and %d more rule changes (logged at debug level)", more),
		"announced", c[changeAnnounced]-in[changeAnnounced],
		"withdrawn", c[changeWithdrawn]-in[changeWithdrawn],
		"finished", c[changeFinished]-in[changeFinished])
}
