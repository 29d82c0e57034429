package playbook

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/store"
)

// Store keeps incidents across restarts (implemented by *store.Store).
type Store interface {
	SaveIncidents(ctx context.Context, rs []store.IncidentRecord, keepEnded int) error
	LoadIncidents(ctx context.Context, ended int) (open, recent []store.IncidentRecord, maxID int64, err error)
}

// saveEvery is how often an incident that only counts signals is saved:
// after a restart its quiet time counts from at most this long before the
// last signal it had.
const saveEvery = 10 * time.Second

// saveTimeout bounds one save; maxSaveBatch is the most incidents saved
// in one transaction.
const maxSaveBatch = 256

// saveTimeout bounds one save.
const saveTimeout = 30 * time.Second

// saved is an incident as stored: what it is, and what it needs to go on
// after a restart (the playbook it opened with and its source's actor).
type saved struct {
	Incident    Incident
	Playbook    config.Playbook
	Actor       admit.Actor
	MaxTimeline int
}

// save marks inc to be saved by Run's saver (nothing without a Store):
// the signal that changed it does not wait for the commit, and a burst
// of changes to one incident is one write. The caller holds inc.mu.
func (e *Engine) save(inc *incident, now time.Time) {
	if e.cfg.Store == nil {
		return
	}
	inc.savedAt = now
	e.saveMu.Lock()
	e.dirty[inc] = true
	e.saveMu.Unlock()
	select {
	case e.saveWake <- struct{}{}:
	default:
	}
}

// saver writes the incidents marked by save until ctx is done, then
// writes what is left.
func (e *Engine) saver(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			e.flush()
			return
		case <-e.saveWake:
			e.flush()
		}
	}
}

// flush writes every incident marked since the last flush, as it is now,
// in one transaction (at most maxSaveBatch each). A failure is logged:
// the incidents go on from memory and are written at their next change.
func (e *Engine) flush() {
	e.saveMu.Lock()
	dirty := e.dirty
	e.dirty = make(map[*incident]bool)
	e.saveMu.Unlock()
	keep := e.rules.Load().bounds.KeepEnded
	recs := make([]store.IncidentRecord, 0, min(len(dirty), maxSaveBatch))
	write := func() {
		if len(recs) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
		defer cancel()
		if err := e.cfg.Store.SaveIncidents(ctx, recs, keep); err != nil {
			e.cfg.Log.Warn("incidents not saved; a restart now would lose their latest changes", "count", len(recs), "error", err)
		}
		recs = recs[:0]
	}
	for inc := range dirty {
		inc.mu.Lock()
		rec := store.IncidentRecord{ID: inc.inc.ID, State: string(inc.inc.State), OpenedAt: inc.inc.OpenedAt, UpdatedAt: inc.savedAt}
		doc, err := json.Marshal(saved{Incident: inc.inc, Playbook: inc.pb, Actor: inc.actor, MaxTimeline: inc.maxTimeline})
		inc.mu.Unlock()
		if err != nil {
			e.cfg.Log.Warn("incident not saved", "incident", rec.ID, "error", err)
			continue
		}
		rec.Doc = doc
		if recs = append(recs, rec); len(recs) == maxSaveBatch {
			write()
		}
	}
	write()
}

// Load reads the incidents a previous run left: the open ones go on where
// they were (step, escalation and hold-down times, rules), the ended ones
// are kept for reading. Call it once, before Accept and Run.
func (e *Engine) Load(ctx context.Context) error {
	if e.cfg.Store == nil {
		return nil
	}
	rs := e.rules.Load()
	open, recent, maxID, err := e.cfg.Store.LoadIncidents(ctx, rs.bounds.KeepEnded)
	if err != nil {
		return fmt.Errorf("load incidents: %w", err)
	}
	now := e.cfg.Clock.Now()
	var incs []*incident
	e.mu.Lock()
	e.lastID = max(e.lastID, maxID)
	for _, r := range recent {
		var s saved
		if err := json.Unmarshal(r.Doc, &s); err != nil {
			e.cfg.Log.Warn("ended incident not readable; skipped", "incident", r.ID, "error", err)
			continue
		}
		e.ended = append(e.ended, s.Incident)
	}
	for _, r := range open {
		var s saved
		if err := json.Unmarshal(r.Doc, &s); err != nil || len(s.Playbook.Steps) == 0 || s.Incident.Step >= len(s.Playbook.Steps) {
			e.cfg.Log.Warn("open incident not readable; skipped (its rules expire by their TTL)", "incident", r.ID, "error", err)
			continue
		}
		inc := &incident{inc: s.Incident, pb: s.Playbook, actor: s.Actor, maxTimeline: max(s.MaxTimeline, 1), savedAt: now}
		inc.note(now, "note", "restored after a restart")
		e.open[key{target: inc.inc.Target, vector: inc.inc.Vector.Key()}] = inc
		for _, x := range inc.inc.Rules {
			if x.State == RuleActive && x.ID != 0 {
				e.refs[x.ID]++
			}
			if x.State == RuleFailed && x.Retry {
				inc.retryAt = now
			}
		}
		incs = append(incs, inc)
	}
	e.mu.Unlock()
	for _, inc := range incs {
		inc.mu.Lock()
		e.schedule(inc)
		inc.mu.Unlock()
	}
	if len(incs) > 0 {
		e.cfg.Log.Info("incidents restored", "open", len(incs), "ended", len(e.ended))
	}
	return nil
}
