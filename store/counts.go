package store

import (
	"context"
	"net/netip"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Count is how many stored rules share a family, a state, a pending
// withdraw request and this site's announce status.
type Count struct {
	Family            flowspec.Family
	State             State
	WithdrawRequested bool
	Announced         bool
	N                 int
}

// Counts counts every stored rule by family, state, withdraw request and
// this site's announce status, in one aggregate query: what status pages
// and metric scrapes need, without reading every row into memory.
func (s *Store) Counts(ctx context.Context) ([]Count, error) {
	const op = "count rules"
	cctx, cancel := s.call(ctx, 1)
	defer cancel()
	rs, err := s.eng.reader().query(cctx, `SELECT r.family, r.state, r.withdraw_requested,
		COALESCE(s.announced, FALSE), COUNT(*)`+ruleFrom+`
		GROUP BY r.family, r.state, r.withdraw_requested, COALESCE(s.announced, FALSE)`, s.site)
	if err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	defer rs.Close()
	var out []Count
	for rs.Next() {
		var (
			c     Count
			fam   int64
			state string
		)
		if err := rs.Scan(&fam, &state, &c.WithdrawRequested, &c.Announced, &c.N); err != nil {
			return nil, s.wrap(ctx, op, err)
		}
		c.Family, c.State = flowspec.Family(fam), State(state)
		out = append(out, c)
	}
	if err := rs.Err(); err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	return out, nil
}

// DestinationCount is a Count of the rules with one destination prefix.
type DestinationCount struct {
	// Destination is the rules' destination prefix; not valid for rules
	// without one (and for withdrawn or expired rules finished before
	// the store kept destinations).
	Destination netip.Prefix
	Count
}

// DestinationCounts counts every stored rule as Counts does, and by
// destination prefix too, in one aggregate query: what a view limited to
// some prefixes (a scoped token's status) sums, without reading every
// row into memory.
func (s *Store) DestinationCounts(ctx context.Context) ([]DestinationCount, error) {
	const op = "count rules by destination"
	cctx, cancel := s.call(ctx, 1)
	defer cancel()
	rs, err := s.eng.reader().query(cctx, `SELECT r.destination, r.family, r.state, r.withdraw_requested,
		COALESCE(s.announced, FALSE), COUNT(*)`+ruleFrom+`
		GROUP BY r.destination, r.family, r.state, r.withdraw_requested, COALESCE(s.announced, FALSE)`, s.site)
	if err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	defer rs.Close()
	var out []DestinationCount
	for rs.Next() {
		var (
			c     DestinationCount
			dest  string
			fam   int64
			state string
		)
		if err := rs.Scan(&dest, &fam, &state, &c.WithdrawRequested, &c.Announced, &c.N); err != nil {
			return nil, s.wrap(ctx, op, err)
		}
		c.Family, c.State = flowspec.Family(fam), State(state)
		if dest != "" {
			c.Destination, _ = netip.ParsePrefix(dest)
		}
		out = append(out, c)
	}
	if err := rs.Err(); err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	return out, nil
}
