package admit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/guard"
	"github.com/ribkeeper/ribkeeper/store"
)

// Declarative sets. ApplySet makes the active rules of a named set exactly
// the list it is given, writing only the difference:
//
//   - Inside a set a rule is identified by its match, as everywhere: a
//     line whose match is in the set with another action, reason or
//     sites is an update, a rule of the set whose match no line has is
//     withdrawn, a line whose match is not in the set is added.
//   - A set owns the rules that carry its name, and only them. A line
//     whose match is active outside any set joins the set (its writer
//     must be allowed to change that rule); one whose match belongs to
//     another set refuses the whole set (KindSetConflict): a rule belongs
//     to one set. A single write of a set's rule (rule add) changes it and
//     leaves it in its set; the next apply of the set puts back what the
//     set says. A static rule ([[rule]]) is never taken (KindDeclared).
//   - TTL: a line's TTL (given, or [guardrails] default_ttl) counts from
//     when the rule was written. An apply rewrites a rule only when less
//     than half of that TTL is left (or a given TTL got shorter), so that
//     a feed re-applied every few minutes keeps its rules without writing
//     them each time; a line without a TTL never shortens an expiry.
//   - An unchanged apply writes nothing: no store write, no history, no
//     announcement.
//   - Everything is checked before anything is written: bounds, parse,
//     scope (on every line, and on the set's rules it would change or
//     withdraw: a set is owned by its writer, a scoped token acts on its
//     own sets only), guardrails (on the rules that change, as a batch
//     would be checked, and on the unchanged ones as rules already
//     active are). A refusal names the first line at fault (its index in
//     the request) and nothing changes. Where a quota or a rate limit
//     counts the set's new rules, the rules that change are checked as
//     one batch; otherwise every guardrail concerns one rule, and they are
//     checked a chunk at a time (again as each chunk is written), so that
//     a million lines are held once, in SetLines' compact form.
//   - The writes go in chunks of Config.SetChunk rules (10,000: bounded
//     transactions).
//     Applies of sets take turns; single writes go between the chunks of
//     an apply (a mitigation does not wait for a million-line feed), and
//     the set's later chunks put back what the set says should one of
//     them touch its rules. Where a quota applies ([guardrails]
//     max_active_rules or max_rules_per_destination, a token's
//     max_active_rules) the gate's lock is held for the whole apply, so
//     that the quotas hold. Should the store fail part way, the chunks
//     before the failure stay written: applying the set again completes
//     it.

// defaultSetChunk bounds the rules of one transaction of a set's apply
// (Config.SetChunk).
const defaultSetChunk = 10000

func (g *Gate) setChunk() int {
	if g.cfg.SetChunk > 0 {
		return g.cfg.SetChunk
	}
	return defaultSetChunk
}

// SetResult is what an apply or a deletion of a set did.
type SetResult struct {
	Set string
	// Rules is the rules the set holds now (the lines given, duplicates
	// once).
	Rules     int
	Created   int // new rules
	Updated   int // rules changed, or taken into the set
	Unchanged int
	Withdrawn int
}

// Written reports whether the apply wrote anything.
func (r SetResult) Written() bool { return r.Created+r.Updated+r.Withdrawn > 0 }

// SetLines is a set's rules as given, parsed and checked one line at a
// time (Add) so that a request of a million lines is held once, in
// compact form, between the body and the store.
type SetLines struct {
	a     Actor
	l     Limits
	g     *Gate
	lines []setLine
	index map[flowspec.Match]int32
	// dups counts lines dropped as exact repeats of an earlier one.
	dups int
}

// setLine is one parsed line.
type setLine struct {
	rule   flowspec.Rule
	ttl    time.Duration
	flags  uint8
	at     int32 // the line's index in the request
	reason *string
	sites  *[]string
}

const (
	lineTTLGiven uint8 = 1 << iota
	lineNever
	lineAllowUnknownSites
)

// NewSetLines starts the lines of a set that a is to apply.
func (g *Gate) NewSetLines(a Actor) *SetLines {
	return &SetLines{a: a, l: g.Limits(), g: g, index: map[flowspec.Match]int32{}}
}

// Len is the number of lines added so far.
func (s *SetLines) Len() int { return len(s.lines) + s.dups }

// Add checks and parses the next line: its bounds, its text, the
// actor's scope. A refusal carries the line's index.
func (s *SetLines) Add(req Request) error {
	i := s.Len()
	if i >= s.l.MaxSetRules {
		return refuse(KindTooLarge, -1, "rules",
			"more than %d rules in one set ([limits] max_set_rules): split the feed into several sets, or raise max_set_rules", s.l.MaxSetRules)
	}
	p, ref := s.g.parse(req, i, s.l, s.a.Name)
	if ref != nil {
		return ref
	}
	if ref := scopeRefusal(s.a, p.in.Rule, i); ref != nil {
		return ref
	}
	ln := setLine{rule: p.in.Rule, ttl: p.ttl, at: int32(i)}
	if p.ttlGiven {
		ln.flags |= lineTTLGiven
	}
	if p.never {
		ln.flags |= lineNever
	}
	if req.AllowUnknownSites {
		ln.flags |= lineAllowUnknownSites
	}
	if p.in.Keep&store.KeepReason == 0 {
		ln.reason = &p.in.Reason
	}
	if p.in.Keep&store.KeepSites == 0 {
		sites := normSites(p.in.Sites)
		ln.sites = &sites
	}
	if j, ok := s.index[ln.rule.Match]; ok {
		if sameLine(s.lines[j], ln) {
			s.dups++
			return nil
		}
		return refuse(KindInvalidInput, i, "text",
			"rules[%d] and rules[%d] have the same match, %s: a set holds one rule per match; keep one of them",
			s.lines[j].at, i, ln.rule.Match)
	}
	s.index[ln.rule.Match] = int32(len(s.lines))
	s.lines = append(s.lines, ln)
	return nil
}

// sameLine reports whether two lines ask for the same rule.
func sameLine(a, b setLine) bool {
	eqp := func(x, y *string) bool { return x == nil && y == nil || x != nil && y != nil && *x == *y }
	eqs := func(x, y *[]string) bool { return x == nil && y == nil || x != nil && y != nil && slices.Equal(*x, *y) }
	return a.rule == b.rule && a.ttl == b.ttl && a.flags == b.flags && eqp(a.reason, b.reason) && eqs(a.sites, b.sites)
}

// parsed is the line as the batch checks take it.
func (ln *setLine) parsed(actor, set string) parsed {
	p := parsed{in: store.Input{Rule: ln.rule, Actor: actor, Set: set, AllowUnknownSites: ln.flags&lineAllowUnknownSites != 0},
		ttl: ln.ttl, ttlGiven: ln.flags&lineTTLGiven != 0, never: ln.flags&lineNever != 0}
	if !p.ttlGiven {
		p.in.Keep |= store.KeepExpiry
	}
	if ln.reason == nil {
		p.in.Keep |= store.KeepReason
	} else {
		p.in.Reason = *ln.reason
	}
	if ln.sites == nil {
		p.in.Keep |= store.KeepSites
	} else {
		p.in.Sites = *ln.sites
	}
	return p
}

// ApplySet is ApplySetLines over reqs: what a caller that holds the
// requests anyway (tests, small sets) calls.
func (g *Gate) ApplySet(ctx context.Context, a Actor, name string, reqs []Request) (SetResult, error) {
	if ref := writable(a); ref != nil {
		return SetResult{}, ref
	}
	lines := g.NewSetLines(a)
	for _, req := range reqs {
		if err := lines.Add(req); err != nil {
			return SetResult{}, err
		}
	}
	return g.ApplySetLines(ctx, a, name, lines)
}

// What an apply does with one line, decided against the set's rules.
const (
	lineNotInSet uint8 = iota // added, or taken into the set
	lineUnchanged
	lineChanged // rewritten, keeping its expiry
	lineRenewed // rewritten with a fresh expiry
	lineNew     // not active anywhere: created
)

// ApplySetLines makes the rules of set name exactly lines (see the top
// of this file) for a, and says what it did.
func (g *Gate) ApplySetLines(ctx context.Context, a Actor, name string, set *SetLines) (SetResult, error) {
	if ref := writable(a); ref != nil {
		return SetResult{}, ref
	}
	if err := store.CheckSetName(name); err != nil {
		return SetResult{}, refuse(KindInvalidInput, -1, "set", "%v", err)
	}
	if set.a.Name != a.Name {
		return SetResult{}, refuse(KindForbidden, -1, "", "the lines of a set were checked for another actor: this is a bug in the caller")
	}
	res := SetResult{Set: name, Rules: len(set.lines)}
	g.setMu.Lock()
	defer g.setMu.Unlock()
	lk := &gateLock{g: g}
	lk.lock()
	defer lk.unlock()
	now := g.now()
	gl := g.guard.Limits()
	defTTL := gl.TTLDefault()
	states := make([]uint8, len(set.lines))
	var withdraw []store.WithdrawItem
	err := g.cfg.Store.EachSetRule(ctx, name, func(m store.SetMember) error {
		if ref := g.ownsMember(a, name, m); ref != nil {
			return ref
		}
		i, ok := set.index[m.Rule.Match]
		switch {
		case !ok && m.WithdrawRequested:
		case !ok:
			withdraw = append(withdraw, store.WithdrawItem{ID: m.ID})
		case m.WithdrawRequested:
			states[i] = lineRenewed
		default:
			ln := &set.lines[i]
			if states[i] = compareLine(ln, m, now, defTTL); states[i] == lineUnchanged {
				var left time.Duration
				if !m.ExpiresAt.IsZero() {
					left = max(m.ExpiresAt.Sub(now), time.Second)
				}
				if v := guard.CheckActive(gl, ln.rule, left); v != nil {
					return violation(v, int(ln.at))
				}
			}
		}
		return nil
	})
	if err != nil {
		if ref, ok := As(err); ok {
			return SetResult{}, ref
		}
		return SetResult{}, fromStore(err, 0)
	}
	// The lines not in the set: new rules, or rules of no set it takes.
	var outside []flowspec.Match
	for i, st := range states {
		if st == lineNotInSet {
			outside = append(outside, set.lines[i].rule.Match)
		}
	}
	var active map[flowspec.Match]store.Existing
	if len(outside) > 0 {
		if active, err = g.cfg.Store.ActiveMatches(ctx, outside); err != nil {
			return SetResult{}, fromStore(err, 0)
		}
		outside = nil
	}
	// The rules that change go through the batch checks; the others were
	// checked as rules already active.
	var todo []int32 // the lines to write, in order
	for i := range set.lines {
		ln := &set.lines[i]
		switch states[i] {
		case lineUnchanged:
			res.Unchanged++
			continue
		case lineNotInSet:
			e, ok := active[ln.rule.Match]
			switch {
			case !ok:
				states[i] = lineNew
				res.Created++
			case e.Origin != "":
				ref := fromStore(&store.DeclaredError{ID: e.ID, Origin: e.Origin}, e.ID).(*Refusal)
				ref.Index = int(ln.at)
				return SetResult{}, ref
			case e.Set != "" && e.Set != name:
				return SetResult{}, &Refusal{Kind: KindSetConflict, Index: int(ln.at), Field: "text",
					Msg: (&store.SetConflictError{ID: e.ID, Set: e.Set, Want: name}).Error()}
			default:
				res.Updated++
			}
		default:
			res.Updated++
		}
		todo = append(todo, int32(i))
	}
	active = nil
	// What the batch checks take, for the lines todo[lo:hi].
	build := func(lo, hi int) []parsed {
		ps := make([]parsed, 0, hi-lo)
		for _, i := range todo[lo:hi] {
			ln := &set.lines[i]
			p := ln.parsed(a.Name, name)
			switch st := states[i]; {
			case st == lineNew && !p.ttlGiven && defTTL > 0 && !gl.RequireTTL:
				// A new rule without a TTL gets the default one, as the
				// guardrails would decide, without their lookup of
				// every line's match a second time.
				fallthrough
			case st == lineRenewed && !p.ttlGiven && defTTL > 0:
				p.ttl, p.ttlGiven = defTTL, true
				p.in.Keep &^= store.KeepExpiry
			}
			ps = append(ps, p)
		}
		return ps
	}
	check := func(lo int, ps []parsed, dry bool) error {
		_, err := g.check(ctx, a, ps, true, dry)
		if ref, ok := As(err); ok && ref.Index >= 0 && ref.Index < len(ps) {
			ref.Index = int(set.lines[todo[lo+ref.Index]].at)
		}
		return err
	}
	setChunk := g.setChunk()
	// Where a quota or a rate limit counts the set's new rules, the set
	// is checked whole, as a batch. Otherwise every guardrail concerns
	// one rule: the set is checked a chunk at a time, now (recording
	// nothing) and again as each chunk is written, so that a million
	// lines are never held as a million inputs.
	var whole []parsed
	if quotas(gl, a) || gl.MaxNewRulesPerMinute > 0 || g.actorRate(a) > 0 {
		whole = build(0, len(todo))
		if err := check(0, whole, false); err != nil {
			return SetResult{}, err
		}
	} else {
		for lo := 0; lo < len(todo); lo += setChunk {
			if err := check(lo, build(lo, min(lo+setChunk, len(todo))), true); err != nil {
				return SetResult{}, err
			}
		}
	}
	if len(todo) == 0 && len(withdraw) == 0 {
		return res, nil // an unchanged apply writes nothing
	}
	defer g.changed()
	lk.chunked = !quotas(gl, a)
	// Make before break: the rules the set keeps or gains first.
	for lo := 0; lo < len(todo); lo += setChunk {
		hi := min(lo+setChunk, len(todo))
		var chunk []parsed
		if whole != nil {
			chunk = whole[lo:hi]
		}
		err := lk.write(ctx, func() error {
			if whole == nil {
				// Checked again, as written: the expiries the
				// guardrails decide are set on the inputs.
				chunk = build(lo, hi)
				if err := check(lo, chunk, false); err != nil {
					return err
				}
			}
			ins := make([]store.Input, len(chunk))
			for i := range chunk {
				ins[i] = chunk[i].in
			}
			g.seen.clear() // the set may change rules kept there
			_, err := g.cfg.Store.UpsertMany(ctx, ins)
			return err
		})
		if err != nil {
			return res, partial(fromStore(err, 0), name, lo)
		}
	}
	for lo := 0; lo < len(withdraw); lo += setChunk {
		chunk := withdraw[lo:min(lo+setChunk, len(withdraw))]
		var out []store.Rule
		err := lk.write(ctx, func() (err error) {
			g.seen.clear()
			out, err = g.cfg.Store.WithdrawMany(ctx, chunk, a.Name)
			return err
		})
		if err != nil {
			return res, partial(fromStore(err, 0), name, len(todo)+lo)
		}
		res.Withdrawn += len(out)
	}
	return res, nil
}

// WithdrawSet withdraws every rule of set name for a. A set with no
// active rule is not an error: nothing is withdrawn.
func (g *Gate) WithdrawSet(ctx context.Context, a Actor, name string) (SetResult, error) {
	if ref := writable(a); ref != nil {
		return SetResult{}, ref
	}
	if err := store.CheckSetName(name); err != nil {
		return SetResult{}, refuse(KindInvalidInput, -1, "set", "%v", err)
	}
	res := SetResult{Set: name}
	g.setMu.Lock()
	defer g.setMu.Unlock()
	lk := &gateLock{g: g}
	lk.lock()
	defer lk.unlock()
	var withdraw []store.WithdrawItem
	err := g.cfg.Store.EachSetRule(ctx, name, func(m store.SetMember) error {
		if ref := g.ownsMember(a, name, m); ref != nil {
			return ref
		}
		if !m.WithdrawRequested {
			withdraw = append(withdraw, store.WithdrawItem{ID: m.ID})
		}
		return nil
	})
	if err != nil {
		if ref, ok := As(err); ok {
			return SetResult{}, ref
		}
		return SetResult{}, fromStore(err, 0)
	}
	if len(withdraw) == 0 {
		return res, nil
	}
	defer g.changed()
	lk.chunked = true // withdrawals count against no quota
	setChunk := g.setChunk()
	for lo := 0; lo < len(withdraw); lo += setChunk {
		var out []store.Rule
		err := lk.write(ctx, func() (err error) {
			g.seen.clear()
			out, err = g.cfg.Store.WithdrawMany(ctx, withdraw[lo:min(lo+setChunk, len(withdraw))], a.Name)
			return err
		})
		if err != nil {
			return res, partial(fromStore(err, 0), name, lo)
		}
		res.Withdrawn += len(out)
	}
	return res, nil
}

// ownsMember checks that a may change or withdraw m, a rule of its set
// name: a scoped actor acts on its own sets only. A rule of the set
// outside a's prefixes is not named (another scope's rule does not exist
// for a).
func (g *Gate) ownsMember(a Actor, name string, m store.SetMember) *Refusal {
	if !a.Scope.Scoped() {
		return nil
	}
	if !a.Scope.Sees(m.Rule.Match) {
		return refuse(KindForbidden, -1, "set",
			"set %q holds rules outside the prefixes of %s: it belongs to another writer; use a set name of your own", name, a.who())
	}
	e := store.Existing{ID: m.ID, Match: m.Rule.Match, Actor: m.Actor, Action: m.Rule.Action}
	if ref := mayChange(a, e, -1, "change"); ref != nil {
		ref.Field = "set"
		ref.Msg = fmt.Sprintf("set %q: %s", name, ref.Msg)
		return ref
	}
	return nil
}

// compareLine decides whether a set's rule m already is what line ln asks
// for at now.
func compareLine(ln *setLine, m store.SetMember, now time.Time, defTTL time.Duration) uint8 {
	st := lineUnchanged
	if m.Rule != ln.rule || ln.reason != nil && *ln.reason != m.Reason ||
		ln.sites != nil && !slices.Equal(*ln.sites, m.Sites) {
		st = lineChanged
	}
	left := m.ExpiresAt.Sub(now)
	switch given := ln.flags&lineTTLGiven != 0; {
	case ln.flags&lineNever != 0:
		if !m.ExpiresAt.IsZero() {
			return lineRenewed
		}
	case given && m.ExpiresAt.IsZero():
		return lineRenewed
	case given:
		// Renewed at half its TTL, or when the TTL got shorter (a minute
		// of slack: the write itself took time).
		if left < ln.ttl/2 || left > ln.ttl+time.Minute {
			return lineRenewed
		}
	case !m.ExpiresAt.IsZero() && defTTL > 0 && left < defTTL/2:
		return lineRenewed
	}
	return st
}

// gateLock is the gate's lock as a set's apply holds it: for its checks,
// then, once chunked, only for each chunk's write, so that single writes
// (a mitigation) go between the chunks of a large apply instead of
// waiting for all of it. Applies of sets take turns on Gate.setMu.
type gateLock struct {
	g       *Gate
	held    bool
	chunked bool
}

func (l *gateLock) lock() {
	if !l.held {
		l.g.mu.Lock()
		l.held = true
	}
}

func (l *gateLock) unlock() {
	if l.held {
		l.g.mu.Unlock()
		l.held = false
	}
}

// write runs one chunk's write (retried) under the gate's lock.
func (l *gateLock) write(ctx context.Context, w func() error) error {
	l.lock()
	err := retried(ctx, w)
	if l.chunked {
		l.unlock()
	}
	return err
}

// quotas reports whether a quota limits what a writes: then a set's apply
// holds the gate's lock until its last chunk, so that single writes
// checked between its chunks cannot take the room its checks counted on.
func quotas(l *config.Guardrails, a Actor) bool {
	return l.MaxActiveRules > 0 || l.MaxRulesPerDestination > 0 || a.Scope.MaxActive > 0
}

// setAttempts is how often one chunk of a set's writes is tried while
// the store is unavailable (a deadline under load): the chunk is an
// upsert or withdrawal by match of the same desired state, so trying it
// again after a write that did land changes nothing.
const setAttempts = 3

// retried runs write until it succeeds, fails otherwise than with
// store.ErrUnavailable, the caller gives up, or setAttempts ran.
func retried(ctx context.Context, write func() error) error {
	var err error
	for range setAttempts {
		if err = write(); err == nil || !errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// partial says that a set was applied in part before err.
func partial(err error, name string, done int) error {
	ref, ok := As(err)
	if !ok {
		return fmt.Errorf("set %q applied in part (%d rules written before the failure; apply it again to complete it): %w", name, done, err)
	}
	ref.Msg = fmt.Sprintf("%s (set %q applied in part: %d rules written before the failure; apply it again to complete it)", ref.Msg, name, done)
	return ref
}

// normSites sorts and deduplicates site names as the store keeps them.
func normSites(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}
