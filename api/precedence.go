package api

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// Precedence order (GET /v1/rules?order=precedence, and a rule's place in
// it on GET /v1/rules/{id}) sorts every rule and checks the active FlowSpec
// rules of each family pairwise for shadowing: with 2,000 rules, millions of
// comparisons. Computed per request, 16 readers polling it kept both cores
// busy and made writes wait. So it is computed once per change of the
// store (its revision, which every write and status write moves) and shared
// by every unscoped reader; readers that arrive while it is computed wait
// for that one computation instead of starting their own. A scoped token's
// list is computed per request over the rules it sees (a shared one would
// name rules outside its scope as shadowing).

// ordered is every rule in precedence order, with what shadows each active
// rule and each active FlowSpec rule's place in its family's order.
// Immutable once built: readers share it.
type ordered struct {
	rules    []store.Rule
	shadowed map[int64]int64 // rule id → the first rule that shadows it
	position map[int64]int   // rule id → 1-based place in its family's order
}

// annotate sets r's place in the routers' order and what shadows it.
func (o *ordered) annotate(r *Rule) {
	r.ShadowedBy = o.shadowed[r.ID]
	r.Precedence = o.position[r.ID]
}

// orderCache is the ordering of the store at one revision.
type orderCache struct {
	mu     sync.Mutex // held while one reader computes; the others wait
	rev    int64
	cur    *ordered
	builds atomic.Uint64 // orderings computed (tests)
}

// get returns the ordering of the store as of now: the cached one when
// the revision has not moved since it was computed.
func (c *orderCache) get(ctx context.Context, rules Rules) (*ordered, error) {
	rev, err := rules.Revision(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != nil && c.rev == rev {
		return c.cur, nil
	}
	// Read after the revision: a write landing in between makes the next
	// reader compute again, never keeps a stale list.
	all, err := rules.List(ctx, "")
	if err != nil {
		return nil, err
	}
	o := byPrecedence(all)
	c.builds.Add(1)
	c.rev, c.cur = rev, o
	return o, nil
}

// maxShadowCheck bounds the pairwise shadowing check: beyond this many
// active FlowSpec rules of one family the list is still ordered but no
// rule is reported as shadowed.
const maxShadowCheck = 2000

// Ranks of byPrecedence, in the order listed.
const (
	rankFlowSpec4 = iota // active IPv4 FlowSpec rules, as routers apply them
	rankFlowSpec6        // then IPv6
	rankRoute            // active routes (RTBH), newest first
	rankOther            // withdrawing, withdrawn and expired rules, newest first
)

func precedenceRank(r *store.Rule) int {
	switch {
	case r.State != store.Active || r.WithdrawRequested:
		return rankOther
	case !r.Rule.Match.Family().IsFlowSpec():
		return rankRoute
	case r.Rule.Match.Family() == flowspec.IPv4:
		return rankFlowSpec4
	}
	return rankFlowSpec6
}

// byPrecedence sorts rules (in place) by state first: the active FlowSpec
// rules the way routers apply them (RFC 8955 §5.1, RFC 8956), IPv4 then
// IPv6, each family in precedence order; then the active routes, newest
// first (a live blackhole is never pages down under history); then
// everything else, newest first. It returns the ordering, with, for each
// active rule that a higher-precedence active rule fully shadows, the id
// of the first such rule.
func byPrecedence(rules []store.Rule) *ordered {
	slices.SortStableFunc(rules, func(a, b store.Rule) int {
		ra, rb := precedenceRank(&a), precedenceRank(&b)
		switch {
		case ra != rb:
			return cmp.Compare(ra, rb)
		case ra >= rankRoute:
			return cmp.Compare(b.ID, a.ID)
		}
		return flowspec.Compare(a.Rule.Match, b.Rule.Match)
	})
	o := &ordered{rules: rules, shadowed: map[int64]int64{}, position: map[int64]int{}}
	for lo := 0; lo < len(rules); {
		fam := precedenceRank(&rules[lo])
		hi := lo
		for hi < len(rules) && precedenceRank(&rules[hi]) == fam {
			hi++
		}
		if fam <= rankFlowSpec6 {
			for i := lo; i < hi; i++ {
				o.position[rules[i].ID] = i - lo + 1
			}
		}
		if fam <= rankFlowSpec6 && hi-lo <= maxShadowCheck {
			for i := lo + 1; i < hi; i++ {
				for j := lo; j < i; j++ {
					if rules[j].Rule.Shadows(rules[i].Rule) {
						o.shadowed[rules[i].ID] = rules[j].ID
						break
					}
				}
			}
		}
		lo = hi
	}
	return o
}
