package admit

import (
	"context"
	"errors"
	"strings"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// Withdraw asks for the active rule id to be withdrawn for a. A rule
// outside a's prefixes is KindNotFound, exactly as an unknown id; a rule
// a may not change (its action, another actor's) is KindForbidden; a
// static rule is KindDeclared. Withdrawing a rule already on its way out
// answers it as it is.
func (g *Gate) Withdraw(ctx context.Context, a Actor, id int64) (store.Rule, error) {
	if ref := writable(a); ref != nil {
		return store.Rule{}, ref
	}
	ctx, cancel := g.deadline(ctx, 1)
	defer cancel()
	if err := g.mu.lockBy(ctx, g.cfg.WriteTimeout); err != nil {
		return store.Rule{}, err
	}
	defer g.mu.Unlock()
	if seen, ok := g.seen.take(id, g.now()); ok {
		again := func() ([]store.Rule, error) {
			r, err := g.withdrawChanged(ctx, a, id)
			return []store.Rule{r}, err
		}
		if rs, err, done := g.withdrawSeen(ctx, a, seen, again); done {
			if err != nil {
				return store.Rule{}, err
			}
			return rs[0], nil
		}
	}
	// The brief read: the withdrawal leaves as soon as the checks are
	// done (time to withdraw), and the answer is the rule as withdrawn.
	cur, err := g.cfg.Store.GetBrief(ctx, id)
	if err != nil {
		return store.Rule{}, fromStore(err, id)
	}
	if ref := g.mayWithdraw(a, cur, id); ref != nil {
		return store.Rule{}, ref
	}
	r, err := g.withdraw(ctx, a, cur)
	if err != nil {
		return store.Rule{}, fromStore(err, id)
	}
	return r, nil
}

// mayWithdraw checks a's withdrawal of rule id, cur as stored.
func (g *Gate) mayWithdraw(a Actor, cur store.Rule, id int64) *Refusal {
	if !a.Scope.Sees(cur.Rule.Match) {
		return refuse(KindNotFound, -1, "id", "%s", notFoundMsg(id))
	}
	if cur.State == store.Active && !cur.WithdrawRequested {
		e := store.Existing{ID: cur.ID, Match: cur.Rule.Match, Actor: cur.Actor, Action: cur.Rule.Action, Origin: cur.Origin}
		if ref := mayChange(a, e, -1, "withdraw"); ref != nil {
			ref.Field = "id"
			return ref
		}
		if cur.Origin != "" {
			de := &store.DeclaredError{ID: cur.ID, Origin: cur.Origin}
			return &Refusal{Kind: KindDeclared, Index: -1, Field: "text", Msg: de.Error(), Err: de}
		}
	}
	return nil
}

// withdrawSeen withdraws the rule seen, as a single Add of this gate
// stored it (seen.go), without reading it first: when every check passes
// on seen and the withdrawal may leave ahead of its commit, its path
// leaves at once and the store withdraws the rule only if it is still as
// seen (WithdrawSeen). A rule that changed since is read and decided on
// as stored (again: the caller's withdrawal as if nothing had been
// kept), its path still off while the gate decides: a refusal then
// announces it again at once. done is false when nothing was done (a
// check failed on seen, or the withdrawal may not leave early): the
// caller then reads the rule and withdraws it as any other.
func (g *Gate) withdrawSeen(ctx context.Context, a Actor, seen store.Rule, again func() ([]store.Rule, error)) (rs []store.Rule, err error, done bool) {
	id, m := seen.ID, seen.Rule.Match
	if g.cfg.Early == nil || !m.IsValid() || g.mayWithdraw(a, seen, id) != nil || !g.earlyWithdrawReady(seen) {
		return nil, nil, false
	}
	gone := g.cfg.Early.WithdrawEarly(m)
	ctx, cancel := keepDeadline(ctx)
	defer cancel()
	var r store.Rule
	if gone {
		r, err = g.cfg.Store.WithdrawGone(ctx, id, a.Name, &seen)
	} else {
		r, err = g.cfg.Store.WithdrawSeen(ctx, id, a.Name, seen)
	}
	rs = []store.Rule{r}
	if errors.Is(err, store.ErrChanged) {
		rs, err = again()
	}
	g.cfg.Early.Settle(m, err == nil && rs[0].State == store.Withdrawn)
	if err != nil {
		var ref *Refusal
		if !errors.As(err, &ref) {
			g.cfg.Log.Warn("withdrawal not stored after its path left ahead of the commit; the rule is announced again", "rule", id, "error", err)
			err = fromStore(err, id)
		}
		return nil, err, true
	}
	g.changed()
	return rs, nil, true
}

// withdrawChanged withdraws rule id, which changed since the gate kept
// it, on its checks as read now; a Refusal if they fail.
func (g *Gate) withdrawChanged(ctx context.Context, a Actor, id int64) (store.Rule, error) {
	cur, err := g.cfg.Store.GetBrief(ctx, id)
	if err != nil {
		return store.Rule{}, err
	}
	if ref := g.mayWithdraw(a, cur, id); ref != nil {
		return store.Rule{}, ref
	}
	return g.cfg.Store.Withdraw(ctx, id, a.Name)
}

// WithdrawMatch withdraws the active rule with the match of text (its
// action is ignored, so a detector can send the same text to ban and to
// unban). No active rule with that match is not an error: the answer is
// then empty.
func (g *Gate) WithdrawMatch(ctx context.Context, a Actor, text string) ([]store.Rule, error) {
	if ref := writable(a); ref != nil {
		return nil, ref
	}
	text = strings.TrimSpace(text)
	l := g.Limits()
	switch {
	case text == "":
		return nil, refuse(KindInvalidRule, -1, "text", `text is required, e.g. "match destination 203.0.113.7/32 then discard"`)
	case len(text) > l.MaxTextBytes:
		return nil, refuse(KindInvalidRule, -1, "text", "rule text is %d bytes, longer than the %d allowed ([limits] max_text_bytes)", len(text), l.MaxTextBytes)
	}
	rule, err := flowspec.Parse(text)
	if err != nil {
		return nil, &Refusal{Kind: KindInvalidRule, Index: -1, Field: "text", Msg: ruleTextMsg(err), Err: err}
	}
	if !a.Scope.Sees(rule.Match) {
		// The caller's own text: naming its destination leaks nothing.
		return nil, scopeRefusal(a, rule, -1)
	}
	ctx, cancel := g.deadline(ctx, 1)
	defer cancel()
	if err := g.mu.lockBy(ctx, g.cfg.WriteTimeout); err != nil {
		return nil, err
	}
	defer g.mu.Unlock()
	if seen, ok := g.seen.takeMatch(rule.Match, g.now()); ok {
		again := func() ([]store.Rule, error) { return g.withdrawMatch(ctx, a, rule.Match) }
		if rs, err, done := g.withdrawSeen(ctx, a, seen, again); done {
			return rs, err
		}
	}
	return g.withdrawMatch(ctx, a, rule.Match)
}

// withdrawMatch is WithdrawMatch of m once checked and locked.
func (g *Gate) withdrawMatch(ctx context.Context, a Actor, m flowspec.Match) ([]store.Rule, error) {
	active, err := g.cfg.Store.ActiveMatches(ctx, []flowspec.Match{m})
	if err != nil {
		return nil, fromStore(err, 0)
	}
	e, ok := active[m]
	if !ok {
		return []store.Rule{}, nil
	}
	if ref := mayChange(a, e, -1, "withdraw"); ref != nil {
		return nil, ref
	}
	if e.Origin != "" {
		return nil, fromStore(&store.DeclaredError{ID: e.ID, Origin: e.Origin}, e.ID)
	}
	g.seen.forget(e.Match)
	cur := store.Rule{ID: e.ID, Rule: flowspec.Rule{Match: e.Match, Action: e.Action}, State: store.Active}
	if g.cfg.Early != nil {
		// Whether it may leave early depends on its sites.
		if cur, err = g.cfg.Store.GetBrief(ctx, e.ID); err != nil {
			return nil, fromStore(err, e.ID)
		}
	}
	r, err := g.withdraw(ctx, a, cur)
	if err != nil {
		return nil, fromStore(err, e.ID)
	}
	return []store.Rule{r}, nil
}

// withdraw stores the withdrawal of rule cur (as just read) for a; the
// caller holds g.mu and made every check. When cur is active here and
// the store expects the commit to succeed (Config.EarlyWithdrawReady),
// its path leaves the speaker while the commit runs, under the contract
// of the early announcement: from then on the commit is not abandoned
// with the client, and a commit that fails settles at once, so that the
// reconciler announces the rule, still active, again and the caller gets
// the store's error.
func (g *Gate) withdraw(ctx context.Context, a Actor, cur store.Rule) (store.Rule, error) {
	id, m := cur.ID, cur.Rule.Match
	early := g.cfg.Early != nil && m.IsValid() && g.earlyWithdrawReady(cur)
	gone := false
	if early {
		gone = g.cfg.Early.WithdrawEarly(m)
		var cancel context.CancelFunc
		ctx, cancel = keepDeadline(ctx)
		defer cancel()
	}
	var (
		r   store.Rule
		err error
	)
	if gone {
		r, err = g.cfg.Store.WithdrawGone(ctx, id, a.Name, nil)
	} else {
		r, err = g.cfg.Store.Withdraw(ctx, id, a.Name)
	}
	if early {
		g.cfg.Early.Settle(m, err == nil && r.State == store.Withdrawn)
	}
	if err != nil {
		if early {
			g.cfg.Log.Warn("withdrawal not stored after its path left ahead of the commit; the rule is announced again", "rule", id, "error", err)
		}
		return store.Rule{}, err
	}
	g.changed()
	return r, nil
}

// earlyWithdrawReady asks the store whether withdrawing cur is expected
// to commit now and to take a path of this site off.
func (g *Gate) earlyWithdrawReady(cur store.Rule) bool {
	if cur.State != store.Active || cur.WithdrawRequested {
		return false
	}
	if g.cfg.EarlyWithdrawReady == nil {
		return true
	}
	err := g.cfg.EarlyWithdrawReady(cur)
	if err != nil {
		g.cfg.Log.Debug("no early withdrawal: the store may refuse the write; withdrawing after the commit", "rule", cur.ID, "error", err)
	}
	return err == nil
}
