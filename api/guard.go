package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
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
// by g first: every guardrail (protected addresses, prefix lengths, the
// safelist, TTL rules, quotas, the rate of new rules) and the quota of
// the scoped token making the request (Token.MaxActiveRules); each rule
// is stored with the expiry the guardrails decided (guard.Decision).
// POST /v1/validate asks the same guardrails, recording nothing. Writes
// through the result are serialized so
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

// GuardedEarly is Guarded, and a single rule that passed the guardrails
// is handed to e while the store commits it: the UPDATE leaves before the
// acknowledgement, which still waits for the durable commit. Once the
// commit is done (or failed) the reconciler decides from the store as
// usual (Settle): a failed write is withdrawn, an update of a rule that
// targets other sites only leaves this one. Rules naming sites are not
// announced early: the store may refuse a site name it does not know, and
// a refused rule must not reach a router even for a moment.
func GuardedEarly(rules GuardedRules, g *guard.Guard, e EarlyAnnouncer, site string) Rules {
	return &guardedRules{Rules: rules, c: rules, g: g, early: e, site: site}
}

type guardedRules struct {
	Rules
	c     guard.Counter
	g     *guard.Guard
	mu    sync.Mutex
	early EarlyAnnouncer // nil: none
	site  string
}

func (g *guardedRules) Upsert(ctx context.Context, in store.Input) (store.Rule, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ds, err := g.check(ctx, []store.Input{in}, false)
	if err != nil {
		return store.Rule{}, false, err
	}
	ds[0].Apply(&in)
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
	ds, err := g.check(ctx, ins, true)
	if err != nil {
		return nil, err
	}
	ins = slices.Clone(ins)
	for i := range ins {
		ds[i].Apply(&ins[i])
	}
	return g.Rules.UpsertMany(ctx, ins)
}

// check applies the guardrails, and the quota of the request's scoped
// token, to ins; batch selects the field names of POST /v1/rules/batch.
// It returns the expiry of each input to store.
func (g *guardedRules) check(ctx context.Context, ins []store.Input, batch bool) ([]guard.Decision, error) {
	ds, v, err := g.g.Check(ctx, g.c, guardInputs(ins), scopeQuota(ctx))
	if err != nil {
		return nil, err
	}
	if v != nil {
		return nil, violationError(v, batch)
	}
	return ds, nil
}

// preview is check for POST /v1/validate: nothing is recorded, and a
// violation is returned, not an error.
func (g *guardedRules) preview(ctx context.Context, in store.Input) (guard.Decision, *guard.Violation, error) {
	ds, v, err := g.g.Preview(ctx, g.c, guardInputs([]store.Input{in}), scopeQuota(ctx))
	if err != nil || v != nil {
		return guard.Decision{}, v, err
	}
	return ds[0], nil, nil
}

// guardInputs are ins as the guardrails see them. No writer has the
// permission to store rules that never expire yet: only the
// configuration ([[rule]]) and [guardrails] allow_never_expire give it.
func guardInputs(ins []store.Input) []guard.Input {
	gins := make([]guard.Input, len(ins))
	for i, in := range ins {
		gins[i] = guard.Input{Rule: in.Rule, ExpiresAt: in.ExpiresAt, KeepExpiry: in.Keep&store.KeepExpiry != 0}
	}
	return gins
}

// scopeQuota is the quota of the request's scoped token.
func scopeQuota(ctx context.Context) guard.Quota {
	if sc := scopeOf(ctx); sc != nil && sc.maxActive > 0 {
		return guard.Quota{Actor: sc.name, Max: sc.maxActive}
	}
	return guard.Quota{}
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
