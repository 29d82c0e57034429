package admit

import (
	"context"
	"errors"
	"fmt"

	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/guard"
	"github.com/ribkeeper/ribkeeper/store"
)

// Actors of the changes the gate makes on its own behalf.
const (
	ConfigActor    = "config"    // static [[rule]] entries
	GuardrailActor = "guardrail" // the guardrails' enforcement
)

// StaticOrigin marks the rules a site's configuration declares.
func StaticOrigin(site string) string { return "config:" + site }

// CheckStatic applies to a configuration's static rules the guardrails
// that concern them: a file breaking them is refused whole, at start as on
// reload, before anything of it is applied. The i-th violation's Index is
// the rule's position in cfg.Rules.
func CheckStatic(cfg *config.Config) []*guard.Violation {
	return guard.CheckStatic(&cfg.Guardrails, cfg.Rules)
}

// SyncStatic makes the store's static rules of this site equal to rules
// (the configuration's [[rule]] entries), as actor "config": each declared
// rule is stored without expiry, and an active static rule of this site
// that is no longer declared is withdrawn. The reconciler announces and
// withdraws them like any other rule. Every entry is tried; the errors
// are joined. Static rules are permanent by design, so the TTL rules and
// quotas do not apply to them; the guardrails that do were checked when
// the file loaded (CheckConfig).
func (g *Gate) SyncStatic(ctx context.Context, rules []config.StaticRule) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seen.clear() // a static rule may take over a kept rule's match
	origin := StaticOrigin(g.cfg.Store.Site())
	declared := make(map[flowspec.Match]bool, len(rules))
	var errs []error
	for _, sr := range rules {
		declared[sr.Rule.Match] = true
		reason := sr.Reason
		if reason == "" {
			reason = "static rule ([[rule]] in the configuration)"
		}
		r, created, err := g.cfg.Store.Upsert(ctx, store.Input{Rule: sr.Rule, Reason: reason, Actor: ConfigActor,
			Sites: sr.Sites, Origin: origin, AllowUnknownSites: true})
		if err != nil {
			errs = append(errs, fmt.Errorf("static rule %q: %w", sr.Text, err))
			continue
		}
		if created {
			g.cfg.Log.Info("static rule declared", "rule", r.ID, "text", r.Text)
		}
	}
	active, err := g.cfg.Store.ActiveFrom(ctx, origin)
	if err != nil {
		return errors.Join(append(errs, fromStore(err, 0))...)
	}
	for _, r := range active {
		if r.WithdrawRequested || declared[r.Rule.Match] {
			continue
		}
		if _, err := g.cfg.Store.Withdraw(ctx, r.ID, ConfigActor); err != nil {
			errs = append(errs, fmt.Errorf("withdraw static rule %d: %w", r.ID, err))
			continue
		}
		g.cfg.Log.Info("static rule no longer declared: withdrawn", "rule", r.ID, "text", r.Text)
	}
	g.changed()
	return errors.Join(errs...)
}
