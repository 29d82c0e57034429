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
	if err != nil || len(ws) == 0 {
		return nil, fromStore(err, 0)
	}
	items := make([]store.WithdrawItem, len(ws))
	for i, w := range ws {
		items[i] = w.Item
	}
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
