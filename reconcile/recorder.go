package reconcile

import (
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Recorder is told about events the loop cannot expose as state (a metrics
// sink, e.g. *metrics.Metrics). State such as LastPass and Drift is read by
// polling instead. Methods are called from the pass goroutine (Announced
// and Withdrawn also from the goroutine of an early announcement or
// withdrawal, see AnnounceEarly) and must be quick and safe for concurrent
// use; they must not call back into the Reconciler.
type Recorder interface {
	// PassDone is called once per pass with its result.
	PassDone(PassResult)
	// Announced is called for each path the speaker accepted: op is add,
	// update, readd or replace.
	Announced(f flowspec.Family, op string)
	// Withdrawn is called for each withdrawal the speaker accepted: op is
	// retire (a withdrawn or expired rule) or orphan.
	Withdrawn(f flowspec.Family, op string)
	// ExpiryLateness is called when an expired rule finishes, with the time
	// from its expires_at until the pass that saw its path gone.
	ExpiryLateness(d time.Duration)
}

type nopRecorder struct{}

func (nopRecorder) PassDone(PassResult)               {}
func (nopRecorder) Announced(flowspec.Family, string) {}
func (nopRecorder) Withdrawn(flowspec.Family, string) {}
func (nopRecorder) ExpiryLateness(time.Duration)      {}

// recorder returns Config.Recorder, or one that does nothing.
func (r *Reconciler) recorder() Recorder {
	if r.cfg.Recorder == nil {
		return nopRecorder{}
	}
	return r.cfg.Recorder
}

// recordExpired reports the lateness of the expired rule id, which the
// current pass just finished.
func (r *Reconciler) recordExpired(id int64) {
	if r.cfg.Recorder == nil {
		return
	}
	if row := r.src.byID.get(id); row != nil && row.expires != 0 {
		r.cfg.Recorder.ExpiryLateness(max(r.now().Sub(row.expiresAt()), 0))
	}
}

// Outcome names the result of a pass for status and metrics: "error" when
// something failed (see Err and Errors), else "dry-run" or "ok".
func (p PassResult) Outcome() string {
	switch {
	case p.Errors > 0 || p.Err != "":
		return "error"
	case p.DryRun:
		return "dry-run"
	}
	return "ok"
}
