package guard

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/store"
)

// Actor is the actor of the changes the guardrails make.
const Actor = "guardrail"

// Enforcer is what Enforce needs of the store (implemented by
// *store.Store).
type Enforcer interface {
	// ActiveRules returns the active rules, brief (no reason or sites).
	ActiveRules(ctx context.Context) ([]store.Rule, error)
	Get(ctx context.Context, id int64) (store.Rule, error)
	// WithdrawMany withdraws rules with new reasons in one transaction.
	WithdrawMany(ctx context.Context, items []store.WithdrawItem, actor string) ([]store.Rule, error)
}

// Withdrawal is a rule Enforce withdrew and the guardrail it broke.
type Withdrawal struct {
	Rule      store.Rule
	Violation *Violation
}

// Enforce withdraws the active rules that break a per-rule guardrail of
// l (CheckActive: all but never_expire) at now, with actor "guardrail", in
// one transaction: after a configuration change either every such rule goes
// or, on error, none. Each rule's reason is extended with the guardrail
// and why, so rule show and rule history say why it went. Static rules
// ([[rule]]) are left alone: the configuration that declares them was
// checked when it loaded (CheckStatic). Rules expiring anyway are left to
// expire, and a rule changed between the check and the withdrawal (e.g.
// given a shorter TTL) is left for the next check.
func Enforce(ctx context.Context, st Enforcer, l *config.Guardrails, now time.Time) ([]Withdrawal, error) {
	rules, err := st.ActiveRules(ctx)
	if err != nil {
		return nil, err
	}
	var (
		items []store.WithdrawItem
		out   []Withdrawal
	)
	for _, r := range rules {
		if r.WithdrawRequested || !r.Rule.IsValid() {
			continue
		}
		var remaining time.Duration
		if !r.ExpiresAt.IsZero() {
			if remaining = r.ExpiresAt.Sub(now); remaining <= 0 {
				continue // expiring anyway
			}
		}
		v := CheckActive(l, r.Rule, remaining)
		if v == nil {
			continue
		}
		// ActiveRules is brief: the reason and origin come from the
		// full rule.
		full, err := st.Get(ctx, r.ID)
		if err != nil {
			return nil, fmt.Errorf("read rule %d: %w", r.ID, err)
		}
		if full.Origin != "" {
			continue
		}
		items = append(items, store.WithdrawItem{ID: full.ID, Reason: withdrawReason(full.Reason, v), UpdatedAt: full.UpdatedAt})
		out = append(out, Withdrawal{Rule: full, Violation: v})
	}
	if len(items) == 0 {
		return nil, nil
	}
	done, err := st.WithdrawMany(ctx, items, Actor)
	if err != nil {
		return nil, fmt.Errorf("withdraw %d rules that break the guardrails: %w", len(items), err)
	}
	// A rule withdrawn meanwhile by someone else is not reported.
	got := make(map[int64]store.Rule, len(done))
	for _, r := range done {
		got[r.ID] = r
	}
	kept := out[:0]
	for _, w := range out {
		if r, ok := got[w.Rule.ID]; ok {
			w.Rule = r
			kept = append(kept, w)
		}
	}
	return kept, nil
}

// withdrawReason is reason with why the guardrail withdrew the rule
// appended, within the store's limit.
func withdrawReason(reason string, v *Violation) string {
	why := fmt.Sprintf("withdrawn by guardrail %s: %s", v.Guardrail, v.Msg)
	out := why
	if reason != "" && len(reason)+len(why)+3 <= store.MaxReasonBytes {
		out = reason + " [" + why + "]"
	}
	return strings.ToValidUTF8(out[:min(len(out), store.MaxReasonBytes)], "")
}
