package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// configActor is the actor of the static rules' changes.
const configActor = "config"

// staticOrigin marks the rules a site's configuration declares.
func staticOrigin(site string) string { return "config:" + site }

// syncStatic makes the store's static rules of this site equal to the
// configuration's [[rule]] entries: each declared rule is stored (actor
// "config", no expiry), and an active static rule of this site that is no
// longer declared is withdrawn. The reconciler announces and withdraws
// them like any other rule. Every entry is tried; the errors are joined.
// The guardrails that apply to static rules (guard.CheckStatic) were
// checked when the file loaded (loadChecked): a file breaking them is
// refused whole, at start as on reload.
func syncStatic(ctx context.Context, log hclog.Logger, st *store.Store, rules []config.StaticRule) error {
	origin := staticOrigin(st.Site())
	declared := make(map[flowspec.Match]bool, len(rules))
	var errs []error
	for _, sr := range rules {
		declared[sr.Rule.Match] = true
		reason := sr.Reason
		if reason == "" {
			reason = "static rule ([[rule]] in the configuration)"
		}
		r, created, err := st.Upsert(ctx, store.Input{Rule: sr.Rule, Reason: reason, Actor: configActor,
			Sites: sr.Sites, Origin: origin, AllowUnknownSites: true})
		if err != nil {
			errs = append(errs, fmt.Errorf("static rule %q: %w", sr.Text, err))
			continue
		}
		if created {
			log.Info("static rule declared", "rule", r.ID, "text", r.Text)
		}
	}
	active, err := st.List(ctx, store.Active)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, r := range active {
		if r.Origin != origin || r.WithdrawRequested || declared[r.Rule.Match] {
			continue
		}
		if _, err := st.Withdraw(ctx, r.ID, configActor); err != nil {
			errs = append(errs, fmt.Errorf("withdraw static rule %d: %w", r.ID, err))
			continue
		}
		log.Info("static rule no longer declared: withdrawn", "rule", r.ID, "text", r.Text)
	}
	return errors.Join(errs...)
}
