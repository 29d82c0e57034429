package admit

import (
	"context"
	"strings"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// WithdrawMatches withdraws for a, in one transaction (all or none), the
// active rule of each text's match; the action of a text is ignored, as in
// WithdrawMatch. Every text is checked first (bounds, syntax, scope,
// whether a may withdraw the rule, static rules), and a refusal carries
// the index of the text at fault. A text whose match has no active rule
// is skipped. It returns the rules it withdrew. The paths leave the
// routers with the next reconcile pass (there is no early withdrawal of a
// batch).
func (g *Gate) WithdrawMatches(ctx context.Context, a Actor, texts []string) ([]store.Rule, error) {
	if ref := writable(a); ref != nil {
		return nil, ref
	}
	l := g.Limits()
	switch {
	case len(texts) == 0:
		return nil, refuse(KindInvalidInput, -1, "rules", "rules is empty: send at least one rule text")
	case len(texts) > l.MaxBatchRules:
		return nil, refuse(KindTooLarge, -1, "rules",
			"%d rules in one request, more than the %d allowed ([limits] max_batch_rules): split it into requests of at most %d",
			len(texts), l.MaxBatchRules, l.MaxBatchRules)
	}
	matches := make([]flowspec.Match, len(texts))
	for i, text := range texts {
		text = strings.TrimSpace(text)
		switch {
		case text == "":
			return nil, refuse(KindInvalidRule, i, "text", `text is required, e.g. "match destination 203.0.113.7/32 then discard"`)
		case len(text) > l.MaxTextBytes:
			return nil, refuse(KindInvalidRule, i, "text", "rule text is %d bytes, longer than the %d allowed ([limits] max_text_bytes)", len(text), l.MaxTextBytes)
		}
		rule, err := flowspec.Parse(text)
		if err != nil {
			return nil, &Refusal{Kind: KindInvalidRule, Index: i, Field: "text", Msg: ruleTextMsg(err), Err: err}
		}
		if !a.Scope.Sees(rule.Match) {
			return nil, scopeRefusal(a, rule, i)
		}
		matches[i] = rule.Match
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	active, err := g.cfg.Store.ActiveMatches(ctx, matches)
	if err != nil {
		return nil, fromStore(err, 0)
	}
	var items []store.WithdrawItem
	seen := make(map[int64]bool, len(active))
	for i, m := range matches {
		e, ok := active[m]
		if !ok || seen[e.ID] {
			continue
		}
		seen[e.ID] = true
		if ref := mayChange(a, e, i, "withdraw"); ref != nil {
			return nil, ref
		}
		if e.Origin != "" {
			de := &store.DeclaredError{ID: e.ID, Origin: e.Origin}
			return nil, &Refusal{Kind: KindDeclared, Index: i, Field: "text", Msg: de.Error(), Err: de}
		}
		items = append(items, store.WithdrawItem{ID: e.ID})
	}
	if len(items) == 0 {
		return []store.Rule{}, nil
	}
	g.seen.clear()
	done, err := g.cfg.Store.WithdrawMany(ctx, items, a.Name)
	if err != nil {
		return nil, fromStore(err, 0)
	}
	g.changed()
	return done, nil
}
