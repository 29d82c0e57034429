package store

import (
	"context"
	"fmt"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// A declarative set is the active rules whose Set is its name. The store
// holds the name on each rule (column set_name, indexed for active rules)
// and nothing else: what a set should hold is the gate's to decide
// (admit.Gate.ApplySet), which reads the set with EachSetRule, and writes
// only the difference, through UpsertMany (Input.Set) and WithdrawMany.

// SetMember is an active rule of a set as a set's apply compares it with
// the rule the set asks for: no text, times or status.
type SetMember struct {
	ID        int64
	Rule      flowspec.Rule // the zero Rule if its stored bytes no longer decode
	Reason    string
	Actor     string
	Sites     []string  // empty: every site
	ExpiresAt time.Time // zero: never
	// WithdrawRequested: the rule is on its way out; applying the set
	// with it again cancels that.
	WithdrawRequested bool
}

// setRulesQuery reads the active rules of one set ("?") through the
// partial index of set members (its condition, set_name not empty, repeated,
// since SQLite cannot prove it of a parameter).
func (s *Store) setRulesQuery() string {
	return `SELECT id, family, nlri, communities, reason, actor, sites, expires_at, withdraw_requested
		FROM rules` + s.eng.indexedBy("rules_active_set") + ` WHERE state = 'active' AND set_name <> '' AND set_name = ? ORDER BY id`
}

// EachSetRule calls fn for every active rule of set name, in id order,
// from one read, without holding them all: a set of a million rules is
// compared line by line. An error of fn stops the walk and is returned.
func (s *Store) EachSetRule(ctx context.Context, name string, fn func(SetMember) error) error {
	const op = "read set rules"
	if name == "" {
		return invalid("set", "empty set name")
	}
	// A read of a large set scales its deadline as a write of it does.
	cctx, cancel := s.call(ctx, 100_000)
	defer cancel()
	rs, err := s.eng.reader().query(cctx, s.setRulesQuery(), name)
	if err != nil {
		return s.wrap(ctx, op, err)
	}
	defer rs.Close()
	for rs.Next() {
		var (
			m           SetMember
			fam         int64
			nlri, comms []byte
			sites       dbText
			expires     dbTime
		)
		if err := rs.Scan(&m.ID, &fam, &nlri, &comms, &m.Reason, &m.Actor, &sites, &expires, &m.WithdrawRequested); err != nil {
			return s.wrap(ctx, op, err)
		}
		m.Rule = decodeRule(flowspec.Family(fam), nlri, comms)
		m.Sites, m.ExpiresAt = decodeSites(sites.s), expires.t
		if err := fn(m); err != nil {
			return err
		}
	}
	return s.wrap(ctx, op, rs.Err())
}

// SetCount counts the active rules of one set last written by one actor
// (withdrawals in progress not counted).
type SetCount struct {
	Name   string
	Actor  string
	Active int
}

// SetCounts counts the active rules of every set, per set and last
// writer, ordered by name then actor, in one aggregate read.
func (s *Store) SetCounts(ctx context.Context) ([]SetCount, error) {
	const op = "count set rules"
	cctx, cancel := s.call(ctx, 1)
	defer cancel()
	rs, err := s.eng.reader().query(cctx, `SELECT set_name, actor, COUNT(*) FROM rules
		WHERE state = 'active' AND set_name <> '' AND NOT withdraw_requested
		GROUP BY set_name, actor ORDER BY set_name, actor`)
	if err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	defer rs.Close()
	var out []SetCount
	for rs.Next() {
		var c SetCount
		if err := rs.Scan(&c.Name, &c.Actor, &c.Active); err != nil {
			return nil, s.wrap(ctx, op, err)
		}
		out = append(out, c)
	}
	if err := rs.Err(); err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	return out, nil
}

// CheckSetName checks the name of a set: 1 to MaxSetNameBytes bytes of
// letters, digits, '.', '_' and '-', starting with a letter or digit, so
// that it is a path segment of the API and a word on a command line.
func CheckSetName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("a set needs a name")
	case len(name) > MaxSetNameBytes:
		return fmt.Errorf("set name is %d bytes, longer than the %d allowed: use a shorter name", len(name), MaxSetNameBytes)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if alnum || i > 0 && (c == '.' || c == '_' || c == '-') {
			continue
		}
		return fmt.Errorf("set name %q: use letters, digits, '.', '_' and '-', starting with a letter or digit", name)
	}
	return nil
}

// MaxSetNameBytes bounds a set's name.
const MaxSetNameBytes = 64
