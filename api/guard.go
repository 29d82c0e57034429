package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/guard"
	"github.com/ribkeeper/ribkeeper/store"
)

// CodeGuardrailViolation is the code of a 422 answer: the rule is valid
// but a guardrail ([guardrails] in the configuration) refuses it. The
// message names the rule and the guardrail; field is "text" or "ttl"
// ("rules[i].text" in a batch).
const CodeGuardrailViolation = "guardrail_violation"

// GuardedRules is the store behind Guarded: the desired state, and the
// counts the quotas need (implemented by *store.Store).
type GuardedRules interface {
	Rules
	guard.Counter
}

// Guarded returns rules with every write (Upsert, UpsertMany) checked
// by g first: the safelist, prefix lengths, TTL rules, quotas, the rate
// of new rules, and the quota of the scoped token making the request
// (Token.MaxActiveRules). Writes through the result are serialized so
// that quotas hold for this process; instances sharing one PostgreSQL
// store enforce quotas each on their own view.
func Guarded(rules GuardedRules, g *guard.Guard) Rules {
	return &guardedRules{Rules: rules, c: rules, g: g}
}

// EarlyAnnouncer announces a rule ahead of the commit of the write that
// declares it (implemented by *reconcile.Reconciler; see its AnnounceEarly).
type EarlyAnnouncer interface {
	AnnounceEarly(flowspec.Rule)
	Settle(flowspec.Match)
}

// EarlyRules is the store behind GuardedEarly: GuardedRules, and the
// store's preflight of a write (implemented by *store.Store; see its
// EarlyOK).
type EarlyRules interface {
	GuardedRules
	EarlyOK(ctx context.Context, in store.Input) error
}

// GuardedEarly is Guarded, and a single rule that passed the guardrails
// and the store's preflight (EarlyOK: the write is expected to commit and
// to target this site) is handed to e while the store commits it: the
// UPDATE leaves before the acknowledgement, which still waits for the
// durable commit. A write the store may refuse (full or read-only disk,
// failed or hung commits, unknown sites, a rule declared in a
// configuration) is announced only after its commit, as usual: a refused
// write never reaches a router. Once announced, the write's commit runs to
// its end even if the client goes away, so that a rule on the routers is
// not withdrawn for a hang-up; then the reconciler decides from the store
// (Settle): a write that failed anyway is withdrawn at once, and its
// error returned.
func GuardedEarly(rules EarlyRules, g *guard.Guard, e EarlyAnnouncer, site string) Rules {
	return &guardedRules{Rules: rules, c: rules, g: g, early: e, pre: rules, site: site}
}

type guardedRules struct {
	Rules
	c     guard.Counter
	g     *guard.Guard
	mu    sync.Mutex
	early EarlyAnnouncer // nil: none
	pre   EarlyRules     // with early: the store's preflight
	site  string
}

func (g *guardedRules) Upsert(ctx context.Context, in store.Input) (store.Rule, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(ctx, []store.Input{in}, false); err != nil {
		return store.Rule{}, false, err
	}
	if g.early == nil || g.pre.EarlyOK(ctx, in) != nil {
		return g.Rules.Upsert(ctx, in)
	}
	g.early.AnnounceEarly(in.Rule)
	defer g.early.Settle(in.Rule.Match)
	return g.Rules.Upsert(context.WithoutCancel(ctx), in)
}

func (g *guardedRules) UpsertMany(ctx context.Context, ins []store.Input) ([]store.Rule, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(ctx, ins, true); err != nil {
		return nil, err
	}
	return g.Rules.UpsertMany(ctx, ins)
}

// check applies the guardrails, and the quota of the request's scoped
// token, to ins; batch selects the field names of POST /v1/rules/batch.
func (g *guardedRules) check(ctx context.Context, ins []store.Input, batch bool) error {
	gins := make([]guard.Input, len(ins))
	for i, in := range ins {
		gins[i] = guard.Input{Rule: in.Rule, ExpiresAt: in.ExpiresAt, KeepExpiry: in.Keep&store.KeepExpiry != 0}
	}
	var q guard.Quota
	if sc := scopeOf(ctx); sc != nil && sc.maxActive > 0 {
		q = guard.Quota{Actor: sc.name, Max: sc.maxActive}
	}
	v, err := g.g.Check(ctx, g.c, gins, q)
	if err != nil {
		return err
	}
	if v != nil {
		return violationError(v, batch)
	}
	return nil
}

// violationError is the answer for v: 422 guardrail_violation, or 403
// out_of_scope for the quota of a scoped token.
func violationError(v *guard.Violation, batch bool) *Error {
	field := v.Field
	if batch {
		field = fmt.Sprintf("rules[%d].%s", v.Index, v.Field)
	}
	if v.Guardrail == guard.TokenMaxActive {
		return newError(http.StatusForbidden, CodeOutOfScope, field, "%s", OneLine(v.Error()))
	}
	return newError(http.StatusUnprocessableEntity, CodeGuardrailViolation, field, "%s", OneLine(v.Error()))
}

// IsGuardrailViolation reports whether err is a guardrail's refusal.
func IsGuardrailViolation(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeGuardrailViolation
}
