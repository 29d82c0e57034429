package reconcile

import (
	"fmt"

	"github.com/hashicorp/go-hclog"
)

// passLog throttles the per-rule log lines of one pass: a bulk load or a
// dead speaker must not write a line per rule.
type passLog struct {
	// failed counts the rule failures of the pass; changed the rule
	// changes by kind.
	failed  int
	changed [3]int
	// reannounced counts the announcements after a speaker restart
	// among changed (a compaction should need none: the summary says).
	reannounced int
	// bulk is set for a pass that plans more than maxChangeLogs changes
	// (the load at start, a bulk add): its lines per rule go to Debug and
	// one summary line to Info.
	bulk bool
}

// maxFailLogs bounds the per-rule failure lines of one pass: when the
// speaker is down every rule fails, and one line per rule per retry would
// bury everything else.
const maxFailLogs = 20

// maxChangeLogs is the most rule changes a pass logs one by one at Info
// ("rule announced", "rule withdrawn", "rule finished"): an operator's
// own changes are seen, and a start with 100 rules, or a bulk load of
// 100,000, writes one summary line instead.
const maxChangeLogs = 10

// Kinds of rule change logged (index into passLog.changed).
const (
	changeAnnounced = iota
	changeWithdrawn
	changeFinished
)

// begin starts a pass's counts.
func (l *passLog) begin() { *l = passLog{} }

// expect says how many rule changes the pass plans.
func (l *passLog) expect(n int) { l.bulk = n > maxChangeLogs }

// change counts one rule change and returns the level its line is
// written at: Info in a pass of a few changes, Debug in a bulk one, or
// hclog.NoLevel when it is not written at all. The caller builds the
// line's arguments only when there is one: boxing them cost a bulk load
// 128 bytes a rule for lines nobody wrote.
func (l *passLog) change(log hclog.Logger, kind int) hclog.Level {
	l.changed[kind]++
	switch {
	case !l.bulk && l.changed[0]+l.changed[1]+l.changed[2] <= maxChangeLogs:
		return hclog.Info
	case log.IsDebug():
		return hclog.Debug
	}
	return hclog.NoLevel
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
	c := l.changed
	n := c[0] + c[1] + c[2]
	if n == 0 || (!l.bulk && n <= maxChangeLogs) {
		return
	}
	args := []any{"announced", c[changeAnnounced], "withdrawn", c[changeWithdrawn], "finished", c[changeFinished]}
	if l.reannounced > 0 {
		args = append(args, "reannounced", l.reannounced)
	}
	log.Info(fmt.Sprintf("%d rule changes (one line per rule at debug level)", n), args...)
}
