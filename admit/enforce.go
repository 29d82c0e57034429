package admit

import (
	"context"
	"fmt"

	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/guard"
	"github.com/ribkeeper/ribkeeper/store"
)

// SetGuardrails replaces the guardrails in force (on reload); Enforce
// then applies them to the active rules.
func (g *Gate) SetGuardrails(gr config.Guardrails) { g.guard.Set(gr) }

// Enforce withdraws, as actor "guardrail" and in one transaction, the
// active rules that break a per-rule guardrail in force (safelist,
// prefix lengths, TTL; guard.Breaking says which and why): after a
// configuration change either every such rule goes or, on error, none.
// It returns the rules it withdrew; one withdrawn meanwhile by someone
// else, or changed since it was checked, is left out.
func (g *Gate) Enforce(ctx context.Context) ([]guard.Withdrawal, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ws, err := guard.Breaking(ctx, g.cfg.Store, g.guard.Limits(), g.now())
	if err != nil {
		return nil, fromStore(err, 0)
	}
	return g.enforce(ctx, ws)
}

// EnforceAmong is Enforce over rules, a reading of the store's active
// rules (EachActive) the caller already made: the daemon's start reads
// them once for this and for the reconciler's first pass (which then
// catches up with what changed since, these withdrawals included). A rule
// changed after that reading is left for the next check, as in Enforce.
func (g *Gate) EnforceAmong(ctx context.Context, rules []store.Rule) ([]guard.Withdrawal, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ws, err := guard.BreakingAmong(ctx, g.cfg.Store, rules, g.guard.Limits(), g.now())
	if err != nil {
		return nil, fromStore(err, 0)
	}
	return g.enforce(ctx, ws)
}

// enforce withdraws ws (with g.mu held).
func (g *Gate) enforce(ctx context.Context, ws []guard.Withdrawal) ([]guard.Withdrawal, error) {
	if len(ws) == 0 {
		return nil, nil
	}
	items := make([]store.WithdrawItem, len(ws))
	for i, w := range ws {
		items[i] = w.Item
	}
	g.seen.clear()
	done, err := g.cfg.Store.WithdrawMany(ctx, items, GuardrailActor)
	if err != nil {
		return nil, fmt.Errorf("withdraw %d rules that break the guardrails: %w", len(items), fromStore(err, 0))
	}
	got := make(map[int64]store.Rule, len(done))
	for _, r := range done {
		got[r.ID] = r
	}
	kept := ws[:0]
	for _, w := range ws {
		if r, ok := got[w.Rule.ID]; ok {
			w.Rule = r
			kept = append(kept, w)
		}
	}
	if len(kept) > 0 {
		g.changed()
	}
	return kept, nil
}
