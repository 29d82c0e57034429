package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/ribkeeper/ribkeeper/config"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// CodeGuardrailViolation is the code of a 422 answer: the rule is valid
// but a guardrail ([guardrails] in the configuration) refuses it. The
// message names the rule and the guardrail; field is "text" or "ttl"
// ("rules[i].text" in a batch).
const CodeGuardrailViolation = "guardrail_violation"

// Guarded returns rules with every write (Upsert, UpsertMany) checked
// against the guardrails in h first: the safelist, prefix lengths, TTL
// rules, quotas and the rate of new rules. Writes through the result are
// serialized so that quotas hold for this process; instances sharing one
// PostgreSQL store enforce quotas each on their own view.
func Guarded(rules Rules, h *config.GuardHolder) Rules {
	return &guardedRules{Rules: rules, h: h, now: time.Now}
}

// EarlyAnnouncer announces a rule ahead of the commit of the write that
// declares it (implemented by *reconcile.Reconciler; see its AnnounceEarly).
type EarlyAnnouncer interface {
	AnnounceEarly(flowspec.Rule)
	Settle(flowspec.Match)
}

// GuardedEarly is Guarded, and a single rule that passed the guardrails
// is handed to e while the store commits it: the UPDATE leaves before the
// acknowledgement, which still waits for the durable commit. Once the
// commit is done (or failed) the reconciler decides from the store as
// usual (Settle): a failed write is withdrawn, an update of a rule that
// targets other sites only leaves this one. Rules naming sites are not
// announced early: the store may refuse a site name it does not know, and
// a refused rule must not reach a router even for a moment.
func GuardedEarly(rules Rules, h *config.GuardHolder, e EarlyAnnouncer, site string) Rules {
	return &guardedRules{Rules: rules, h: h, now: time.Now, early: e, site: site}
}

type guardedRules struct {
	Rules
	h     *config.GuardHolder
	now   func() time.Time
	mu    sync.Mutex
	early EarlyAnnouncer // nil: none
	site  string
}

func (g *guardedRules) Upsert(ctx context.Context, in store.Input) (store.Rule, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(ctx, []store.Input{in}, false); err != nil {
		return store.Rule{}, false, err
	}
	early := g.early != nil && len(in.Sites) == 0
	if early {
		g.early.AnnounceEarly(in.Rule)
	}
	r, created, err := g.Rules.Upsert(ctx, in)
	if early {
		g.early.Settle(in.Rule.Match)
	}
	return r, created, err
}

func (g *guardedRules) UpsertMany(ctx context.Context, ins []store.Input) ([]store.Rule, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(ctx, ins, true); err != nil {
		return nil, err
	}
	return g.Rules.UpsertMany(ctx, ins)
}

// check applies the guardrails to ins; batch selects the field names of
// POST /v1/rules/batch.
func (g *guardedRules) check(ctx context.Context, ins []store.Input, batch bool) error {
	cfg := g.h.Guardrails()
	now := g.now()
	gins := make([]config.GuardInput, len(ins))
	for i, in := range ins {
		gins[i] = config.GuardInput{Rule: in.Rule}
		if !in.ExpiresAt.IsZero() {
			// The handler turned the TTL into an expiry a moment ago.
			gins[i].TTL = in.ExpiresAt.Sub(now).Round(time.Second)
		}
	}
	// An update that keeps the stored expiry is checked with the TTL the
	// rule has left.
	keepsExpiry := false
	for _, in := range ins {
		keepsExpiry = keepsExpiry || in.Keep&store.KeepExpiry != 0
	}
	keepsExpiry = keepsExpiry && (cfg.RequireTTL || cfg.MaxTTL > 0)
	var active []flowspec.Match
	if cfg.NeedsActive() || cfg.MaxNewRulesPerMinute > 0 || keepsExpiry {
		rs, err := g.Rules.List(ctx, store.Active)
		if err != nil {
			return err
		}
		active = make([]flowspec.Match, 0, len(rs))
		expiry := make(map[flowspec.Match]time.Time)
		for _, r := range rs {
			// Rules on their way out do not count; storing one again
			// cancels its withdrawal, which makes it new.
			if !r.WithdrawRequested && r.Rule.Match.IsValid() {
				active = append(active, r.Rule.Match)
			}
			if keepsExpiry && r.Rule.Match.IsValid() {
				expiry[r.Rule.Match] = r.ExpiresAt
			}
		}
		for i, in := range ins {
			if exp, ok := expiry[in.Rule.Match]; ok && in.Keep&store.KeepExpiry != 0 {
				gins[i].TTL = 0
				if !exp.IsZero() {
					gins[i].TTL = max(exp.Sub(now).Round(time.Second), time.Second)
				}
			}
		}
	}
	if v := cfg.Check(gins, active); v != nil {
		return violationError(v, batch)
	}
	if n := config.NewRules(gins, active); n > 0 {
		if ok, retry := g.h.RateLimiter.Allow(now, n, cfg.MaxNewRulesPerMinute); !ok {
			return violationError(config.RateViolation(ins[len(ins)-1].Rule, len(ins)-1, cfg.MaxNewRulesPerMinute, retry), batch)
		}
	}
	return nil
}

// violationError is the 422 answer for v.
func violationError(v *config.Violation, batch bool) *Error {
	field := v.Field
	if batch {
		field = fmt.Sprintf("rules[%d].%s", v.Index, v.Field)
	}
	return newError(http.StatusUnprocessableEntity, CodeGuardrailViolation, field, "%s", OneLine(v.Error()))
}

// IsGuardrailViolation reports whether err is a guardrail's refusal.
func IsGuardrailViolation(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeGuardrailViolation
}
