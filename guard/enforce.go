package guard

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/store"
)

// Actor is the actor of the changes the guardrails make.
const Actor = "guardrail"

// Reader is what Breaking reads of the store (implemented by
// *store.Store).
type Reader interface {
	// EachActive walks the active rules, brief (no reason or sites), one
	// reused Rule at a time (store.Store.EachActive).
	EachActive(ctx context.Context, fn func(*store.Rule) error) error
	Get(ctx context.Context, id int64) (store.Rule, error)
}

// Withdrawal is an active rule that breaks a guardrail, the guardrail,
// and the item that withdraws it with its reason extended.
type Withdrawal struct {
	Rule      store.Rule
	Violation *Violation
	Item      store.WithdrawItem
}

// Breaking returns the active rules that break a per-rule guardrail of l
// (CheckActive: all but never_expire) at now. It writes nothing: the
// admission gate withdraws them, all in one transaction (admit's
// Enforce). Each item extends the rule's reason with the guardrail and
// why, so rule show and rule history say why it went, and carries the
// rule's UpdatedAt, so a rule changed between this check and the
// withdrawal (e.g. given a shorter TTL) is left for the next check.
// Static rules ([[rule]]) are left alone: the configuration that declares
// them was checked when it loaded (CheckStatic). Rules expiring anyway
// are left to expire.
//
// The store is walked, keeping only the rules that break a guardrail: at
// a million rules, a reading of the whole table is over a gigabyte.
func Breaking(ctx context.Context, st Reader, l *config.Guardrails, now time.Time) ([]Withdrawal, error) {
	var rules []store.Rule
	err := st.EachActive(ctx, func(r *store.Rule) error {
		if Breaks(l, r, now) {
			rules = append(rules, *r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return BreakingAmong(ctx, st, rules, l, now)
}

// BreakingAmong is Breaking over rules, a reading of st's active rules
// made by the caller, or the part of one that Breaks picked out as it
// went (the rest break nothing): at start the same walk of the rules
// (EachActive) also seeds the reconciler, so the rules are read once and
// never held all at once. It reads st only for the rules that break a
// guardrail.
func BreakingAmong(ctx context.Context, st Reader, rules []store.Rule, l *config.Guardrails, now time.Time) ([]Withdrawal, error) {
	var out []Withdrawal
	for i := range rules {
		if breaks(l, &rules[i], now) == nil {
			continue
		}
		// The reading is brief: the reason and origin come from the
		// full rule, which is checked again as it is now (the reading
		// may be older) and withdrawn only as it is now (UpdatedAt).
		full, err := st.Get(ctx, rules[i].ID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read rule %d: %w", rules[i].ID, err)
		}
		v := breaks(l, &full, now)
		if v == nil || full.State != store.Active || full.Origin != "" {
			continue
		}
		out = append(out, Withdrawal{Rule: full, Violation: v,
			Item: store.WithdrawItem{ID: full.ID, Reason: withdrawReason(full.Reason, v), UpdatedAt: full.UpdatedAt}})
	}
	return out, nil
}

// Breaks reports whether r, an active rule as a full read gives it
// (brief), breaks a per-rule guardrail of l at now: a candidate for
// BreakingAmong, which checks it again as it is then.
func Breaks(l *config.Guardrails, r *store.Rule, now time.Time) bool {
	return breaks(l, r, now) != nil
}

// breaks returns the per-rule guardrail r breaks at now, nil if none or if
// r is being withdrawn or expiring anyway.
func breaks(l *config.Guardrails, r *store.Rule, now time.Time) *Violation {
	if r.WithdrawRequested || !r.Rule.IsValid() {
		return nil
	}
	var remaining time.Duration
	if !r.ExpiresAt.IsZero() {
		if remaining = r.ExpiresAt.Sub(now); remaining <= 0 {
			return nil // expiring anyway
		}
	}
	return CheckActive(l, r.Rule, remaining)
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
