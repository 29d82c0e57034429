package admit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/guard"
	"github.com/ribkeeper/ribkeeper/store"
)

// admit checks ps for a and, when everything passed, records the new
// rules against the rate limits and gives each input the expiry the
// guardrails decided. The caller holds g.mu.
func (g *Gate) admit(ctx context.Context, a Actor, ps []parsed, batch bool) error {
	_, err := g.check(ctx, a, ps, batch, false)
	return g.inTime(ctx, err)
}

// inTime turns a read of the checks that the write's own deadline cut
// short (ctx from Gate.deadline) into the 503 it is: the store did not
// answer in time, nothing was stored. The client's own cancellation and
// every other error pass unchanged.
func (g *Gate) inTime(ctx context.Context, err error) error {
	var ref *Refusal
	if err == nil || errors.As(err, &ref) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	return &Refusal{Kind: KindUnavailable, Index: -1, Err: err,
		Msg: fmt.Sprintf("nothing was stored: the store did not answer this write's checks within %v ([store] write_timeout); the database's disk may be hung or overloaded, or (PostgreSQL) the server away: check it, then retry", g.cfg.WriteTimeout)}
}

// check applies, in order, the actor's scope to each rule as sent, the
// checks of an update against the stored rule, the actor's own rate of
// new rules and the guardrails (quotas included), and sets each input's
// expiry as the guardrails decided (guard.Decision.Apply). A dry check
// (Validate) records nothing.
func (g *Gate) check(ctx context.Context, a Actor, ps []parsed, batch, dry bool) ([]guard.Decision, error) {
	at := func(i int) int {
		if batch {
			return i
		}
		return -1
	}
	for i := range ps {
		if ref := scopeRefusal(a, ps[i].in.Rule, at(i)); ref != nil {
			return nil, ref
		}
	}
	now := g.now()
	var existing map[flowspec.Match]store.Existing
	if a.Scope.Scoped() {
		var err error
		if existing, err = g.lookup(ctx, ps); err != nil {
			return nil, err
		}
		for i := range ps {
			e, ok := existing[ps[i].in.Rule.Match]
			if !ok {
				continue
			}
			if ref := mayChange(a, e, at(i), "update"); ref != nil {
				return nil, ref
			}
		}
	}
	// The actor's own rate is checked before the guardrails, whose global
	// rate limit records the new rules when everything passed.
	rate, created := g.actorRate(a), 0
	if rate > 0 {
		created = countNew(ps, existing)
		if ok, retry := g.rates.peek(a.Name, now, created, rate); !ok {
			last := len(ps) - 1
			return nil, &Refusal{Kind: KindRateLimited, Index: at(last), Field: "text", RetryAfter: retry,
				Msg: fmt.Sprintf("%s may create at most %d new rules a minute ([[api.token]] or [[source]] max_new_rules_per_minute, or [limits] scoped_new_rules_per_minute for every scoped one); retry in %s",
					a.who(), rate, retry.Round(time.Second))}
		}
	}
	gins := make([]guard.Input, len(ps))
	mayNever := a.Scope.NeverExpires || a.Source == SourceConfig
	for i, p := range ps {
		gins[i] = guard.Input{Rule: p.in.Rule, KeepExpiry: !p.ttlGiven, MayNeverExpire: mayNever}
		if p.ttlGiven && !p.never {
			gins[i].ExpiresAt = now.Add(p.ttl)
		}
	}
	var q guard.Quota
	if a.Scope.MaxActive > 0 {
		q = guard.Quota{Actor: a.Name, Max: a.Scope.MaxActive}
	}
	check := g.guard.Check
	if dry {
		check = g.guard.Preview
	}
	ds, v, err := check(ctx, g.cfg.Store, gins, q)
	if err != nil {
		return nil, fromStore(err, 0)
	}
	if v != nil {
		return nil, violation(v, at(v.Index))
	}
	for i := range ps {
		ds[i].Apply(&ps[i].in)
		// A TTL stays relative until the commit: the store counts it from
		// when it stores the rule (store.Input.TTL), so a write that waits
		// behind a large commit keeps its whole TTL instead of being
		// refused as "not in the future". ExpiresAt stays the estimate
		// the guardrails checked.
		switch {
		case ps[i].ttlGiven && !ps[i].never:
			ps[i].in.TTL = ps[i].ttl
		case ds[i].DefaultTTL:
			ps[i].in.TTL = ds[i].ExpiresAt.Sub(now)
		}
	}
	if rate > 0 && !dry {
		g.rates.record(a.Name, now, created)
	}
	return ds, nil
}

// lookup returns the active rules with the matches of ps.
func (g *Gate) lookup(ctx context.Context, ps []parsed) (map[flowspec.Match]store.Existing, error) {
	ms := make([]flowspec.Match, len(ps))
	for i, p := range ps {
		ms[i] = p.in.Rule.Match
	}
	existing, err := g.cfg.Store.ActiveMatches(ctx, ms)
	if err != nil {
		return nil, fromStore(err, 0)
	}
	return existing, nil
}

// countNew counts the distinct matches of ps that are not active yet.
func countNew(ps []parsed, existing map[flowspec.Match]store.Existing) int {
	seen := make(map[flowspec.Match]bool, len(ps))
	n := 0
	for _, p := range ps {
		m := p.in.Rule.Match
		if _, ok := existing[m]; ok || seen[m] {
			continue
		}
		seen[m] = true
		n++
	}
	return n
}

// actorRate is the rate of new rules a may create per minute; 0: no cap.
func (g *Gate) actorRate(a Actor) int {
	switch {
	case a.Scope.MaxNewPerMinute > 0:
		return a.Scope.MaxNewPerMinute
	case a.Scope.MaxNewPerMinute < 0 || !a.Scope.Scoped():
		return 0
	}
	return g.Limits().ScopedNewRulesPerMinute
}

// scopeRefusal checks a rule a is to store against a's prefixes and
// actions. The rule is the actor's own request, so the refusal may name
// its destination.
func scopeRefusal(a Actor, r flowspec.Rule, index int) *Refusal {
	s := a.Scope
	if !s.Sees(r.Match) {
		name := a.who()
		d, ok := r.Match.Destination()
		if !ok {
			return refuse(KindForbidden, index, "text",
				"%s may act only on destinations inside %s; the rule has no destination prefix, so it matches traffic to every address: add \"destination PREFIX\" inside one of them",
				name, s.prefixList())
		}
		return refuse(KindForbidden, index, "text",
			"%s may act only on destinations inside %s; the rule has destination %s, outside them: use a destination inside them, or a token whose prefixes cover %s",
			name, s.prefixList(), d, d)
	}
	if act := s.forbiddenAction(r); act != "" {
		name, hint := a.who(), ""
		if act == flowspec.RouteActionName {
			hint = ` ("rtbh" allows "route PREFIX then blackhole" exactly; communities or a next hop of its own need action "route")`
		}
		return refuse(KindForbidden, index, "text",
			"%s may not use action %s; it may use %s: change the rule's action, or ask for a token whose actions include %s%s",
			name, act, strings.Join(s.Actions, ", "), act, hint)
	}
	return nil
}

// mayChange checks that a scoped a may change (op "update") or withdraw
// (op "withdraw") the active rule e: its current action is one a may use,
// and a wrote it or may act on others' rules. The rule lies inside a's
// prefixes (the caller checked), so naming it leaks nothing.
func mayChange(a Actor, e store.Existing, index int, op string) *Refusal {
	s := a.Scope
	if !s.Scoped() {
		return nil
	}
	if len(s.Actions) > 0 && e.Action.IsValid() {
		for _, act := range usedActions(e) {
			if !slices.Contains(s.Actions, act) {
				return refuse(KindForbidden, index, "text",
					"rule %d uses action %s, which %s may not use, so it may not %s it: ask someone whose token allows %s",
					e.ID, act, a.who(), op, act)
			}
		}
	}
	if e.Actor != a.Name && !s.OthersRules {
		return refuse(KindForbidden, index, "text",
			"rule %d was written by %q; %s may %s only its own rules: ask %q or an operator, or grant others_rules to this [[api.token]]",
			e.ID, e.Actor, a.who(), op, e.Actor)
	}
	return nil
}

func usedActions(e store.Existing) []string {
	return flowspec.UsedActionNames(flowspec.Rule{Match: e.Match, Action: e.Action})
}

// violation is the refusal for a guardrail's violation: a scoped token's
// quota is a matter of its scope (KindForbidden), the rest guardrails.
func violation(v *guard.Violation, index int) *Refusal {
	k := KindGuardrail
	if v.Guardrail == guard.TokenMaxActive {
		k = KindForbidden
	}
	return &Refusal{Kind: k, Index: index, Field: v.Field, Guardrail: v.Guardrail, Msg: oneLine(v.Error()), Detail: v.Msg, Err: v}
}
