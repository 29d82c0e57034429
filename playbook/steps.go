package playbook

import (
	"context"
	"fmt"
	"time"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/signals"
	"github.com/ribkeeper/ribkeeper/store"
)

// retryEvery is how often rules the store could not take are tried
// again, on a signal.
const retryEvery = 5 * time.Second

// values are what inc's templates are filled with.
func (inc *incident) values() config.Values {
	v := inc.inc.Vector
	return config.Values{Target: inc.inc.Target, Protocol: v.Protocol, DstPorts: v.DstPorts, SrcPorts: v.SrcPorts, TCPFlags: v.TCPFlags}
}

// reason is the reason of a rule inc writes for step: it lands in the
// rule's history, so the rule says which signal, source, playbook and
// step it comes from.
func (inc *incident) reason(s signals.Signal) string {
	in := &inc.inc
	s.Target, s.Vector = in.Target, in.Vector // also for the timer's writes
	r := fmt.Sprintf("incident %d: playbook %s step %d/%d, source %s, signal %s", in.ID, inc.pb.Name, in.Step+1, in.Steps, in.Source, describe(s))
	if in.AttackID != "" {
		r += ", attack " + in.AttackID
	}
	return printable(r, store.MaxReasonBytes)
}

// applyStep writes (or, in shadow mode, checks) the rules of inc's step
// and then withdraws the earlier steps' rules it does not store again:
// make-before-break. The caller holds inc.mu.
func (e *Engine) applyStep(ctx context.Context, inc *incident, now time.Time, s signals.Signal) {
	in := &inc.inc
	st := inc.pb.Steps[in.Step]
	ttl := st.TTL.String()
	reason := inc.reason(s)
	kept := map[int64]bool{}
	first := len(in.Rules)
	for _, t := range st.Rules {
		text, _, err := t.Render(inc.values())
		if err != nil {
			in.Rules = append(in.Rules, Rule{Text: text, Step: in.Step, State: RuleFailed, Error: err.Error()})
			inc.note(now, "rule", "template %q not rendered: %v", t.Text, err)
			continue
		}
		req := admit.Request{Text: text, TTL: &ttl, Reason: &reason}
		r := Rule{Text: text, Step: in.Step}
		if inc.pb.Shadow {
			v, err := e.cfg.Gate.Validate(ctx, inc.actor, req)
			switch {
			case err != nil:
				r.State, r.Error = RuleFailed, err.Error()
			case v.Refusal != nil:
				r.State, r.Error = RuleRefused, v.Refusal.Error()
			default:
				r.Text, r.State, r.ExpiresAt = v.Rule.String(), RuleShadow, v.ExpiresAt
			}
			inc.note(now, "rule", "shadow: %s: %s%s", r.State, text, errSuffix(r.Error))
			in.Rules = append(in.Rules, r)
			continue
		}
		e.add(ctx, inc, &r, req, now)
		if r.ID != 0 {
			kept[r.ID] = true
		}
		in.Rules = append(in.Rules, r)
	}
	if len(kept) == 0 && first > 0 && !inc.pb.Shadow {
		// Nothing of the new step stands: keep the earlier rules rather
		// than leave the target unprotected; a signal tries again.
		inc.note(now, "note", "no rule of step %d was stored: the earlier steps' rules stay", in.Step+1)
		return
	}
	for i := range in.Rules[:first] {
		r := &in.Rules[i]
		if r.State != RuleActive {
			continue
		}
		if kept[r.ID] {
			r.State = RuleReplaced // the same match, stored again by this step
			e.writeMu.Lock()
			e.ref(r.ID, -1)
			e.writeMu.Unlock()
			continue
		}
		e.withdraw(ctx, inc, r, now, fmt.Sprintf("replaced by step %d", in.Step+1))
	}
}

// add stores r through the gate; the caller holds inc.mu.
func (e *Engine) add(ctx context.Context, inc *incident, r *Rule, req admit.Request, now time.Time) {
	e.writeMu.Lock()
	sr, _, err := e.cfg.Gate.Add(ctx, inc.actor, req)
	if err == nil {
		e.ref(sr.ID, +1)
	}
	e.writeMu.Unlock()
	if err != nil {
		r.State, r.Error = RuleFailed, err.Error()
		ref, ok := admit.As(err)
		switch {
		case ok && ref.Kind == admit.KindRateLimited:
			// The source's rate of new rules ([[source]]
			// max_new_rules_per_minute): the rule waits its turn.
			r.Retry, inc.retryAt = true, now.Add(max(retryEvery, ref.RetryAfter))
		case ok && ref.Kind != admit.KindUnavailable:
			r.State = RuleRefused
		default:
			r.Retry, inc.retryAt = true, now.Add(retryEvery)
		}
		inc.note(now, "rule", "%s: %s: %s", r.State, req.Text, r.Error)
		e.cfg.Log.Warn("incident rule not stored", "incident", inc.inc.ID, "text", req.Text, "error", err)
		return
	}
	r.ID, r.Text, r.State, r.ExpiresAt, r.Error, r.Retry = sr.ID, sr.Text, RuleActive, sr.ExpiresAt, "", false
	inc.note(now, "rule", "stored rule %d: %s (expires %s)", sr.ID, sr.Text, expiry(sr.ExpiresAt))
}

// withdraw takes r off through the gate; the caller holds inc.mu.
func (e *Engine) withdraw(ctx context.Context, inc *incident, r *Rule, now time.Time, why string) {
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	if e.ref(r.ID, 0) > 1 {
		// Another open incident stored the same rule: it stays for it.
		e.ref(r.ID, -1)
		r.State = RuleWithdrawn
		inc.note(now, "rule", "let rule %d go (%s); another open incident still uses it", r.ID, why)
		return
	}
	_, err := e.cfg.Gate.Withdraw(ctx, inc.actor, r.ID)
	if ref, ok := admit.As(err); err != nil && (!ok || ref.Kind != admit.KindNotFound) {
		r.Error = err.Error()
		inc.note(now, "rule", "rule %d not withdrawn (%s): %v", r.ID, why, err)
		e.cfg.Log.Warn("incident rule not withdrawn", "incident", inc.inc.ID, "rule", r.ID, "error", err)
		return
	}
	r.State = RuleWithdrawn
	e.ref(r.ID, -1)
	inc.note(now, "rule", "withdrew rule %d (%s)", r.ID, why)
}

// extend stores active rule r again with the TTL ttl, so that it lives
// on; a rule withdrawn meanwhile by someone else (an operator) stays
// withdrawn, and the incident lets it go. It reports whether r's state
// changed. The caller holds inc.mu.
func (e *Engine) extend(ctx context.Context, inc *incident, r *Rule, ttl, reason string, now time.Time) bool {
	if e.cfg.Rules != nil {
		cur, err := e.cfg.Rules.GetBrief(ctx, r.ID)
		if err == nil && (cur.WithdrawRequested || cur.State == store.Withdrawn) {
			e.writeMu.Lock()
			e.ref(r.ID, -1)
			e.writeMu.Unlock()
			r.State, r.Error = RuleWithdrawn, "withdrawn outside the incident (the rule's history says by whom): not extended"
			inc.note(now, "rule", "rule %d was withdrawn outside the incident; it stays withdrawn", r.ID)
			return true
		}
	}
	e.writeMu.Lock()
	sr, _, err := e.cfg.Gate.Add(ctx, inc.actor, admit.Request{Text: r.Text, TTL: &ttl, Reason: &reason})
	if err == nil && sr.ID != r.ID {
		// It had expired: stored anew.
		e.ref(r.ID, -1)
		e.ref(sr.ID, +1)
	}
	e.writeMu.Unlock()
	if err != nil {
		r.Error = err.Error()
		inc.refreshAfter = now.Add(retryEvery)
		inc.note(now, "rule", "ttl of rule %d not extended: %v", r.ID, err)
		return false
	}
	changed := sr.ID != r.ID
	r.ID, r.ExpiresAt, r.Error = sr.ID, sr.ExpiresAt, ""
	inc.inc.Extended++
	return changed
}

// refresh, on a signal while the attack goes on (or on the timer, see
// incident.deadlines), extends the TTL of the step's rules that have less
// than half of it left and tries again the rules the store could not
// take when their time has come. It reports whether a rule changed state.
// The caller holds inc.mu.
func (e *Engine) refresh(ctx context.Context, inc *incident, now time.Time, s signals.Signal) bool {
	if inc.pb.Shadow {
		return false
	}
	in := &inc.inc
	st := inc.pb.Steps[in.Step]
	half := st.TTL / 2
	retry := !inc.retryAt.IsZero() && !now.Before(inc.retryAt)
	if retry {
		inc.retryAt = time.Time{}
	}
	ttl := st.TTL.String()
	var reason string
	stored, changed := false, false
	for i := range in.Rules {
		r := &in.Rules[i]
		if r.Step != in.Step {
			continue
		}
		switch {
		case r.State == RuleActive && !r.ExpiresAt.IsZero() && r.ExpiresAt.Sub(now) <= half:
			if reason == "" {
				reason = inc.reason(s)
			}
			if e.extend(ctx, inc, r, ttl, reason, now) {
				changed = true
			}
		case r.State == RuleFailed && r.Retry && retry:
			if reason == "" {
				reason = inc.reason(s)
			}
			e.add(ctx, inc, r, admit.Request{Text: r.Text, TTL: &ttl, Reason: &reason}, now)
			stored = stored || r.State == RuleActive
		}
	}
	if !stored {
		return changed
	}
	// The step stands now: the earlier steps' rules go (make-before-break),
	// but not one this step stored again.
	current := map[int64]bool{}
	for _, r := range in.Rules {
		if r.Step == in.Step && r.State == RuleActive {
			current[r.ID] = true
		}
	}
	for i := range in.Rules {
		if r := &in.Rules[i]; r.Step < in.Step && r.State == RuleActive {
			if current[r.ID] {
				r.State = RuleReplaced
				e.writeMu.Lock()
				e.ref(r.ID, -1)
				e.writeMu.Unlock()
				continue
			}
			e.withdraw(ctx, inc, r, now, fmt.Sprintf("replaced by step %d", in.Step+1))
		}
	}
	return true
}

func errSuffix(msg string) string {
	if msg == "" {
		return ""
	}
	return " (" + msg + ")"
}

func expiry(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format(time.RFC3339)
}
