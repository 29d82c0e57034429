package store

import (
	"context"
	"fmt"
	"sync"
)

// special is what lets EarlyOK skip its read of the stored row on SQLite,
// where this process is the database's only writer (the daemon holds the
// store's lock): the Matches whose active rule may make a write refused
// or keep it from this site — declared by a configuration (origin) or
// limited to sites. A write with no sites and no origin whose Match is not
// in the set can only create a rule for every site or update one for
// every site, so the read would find nothing to object to.
//
// The set is loaded when the store opens and grows with every committed
// upsert that stores such a rule. Rules leaving the active state stay in
// it, which only sends EarlyOK back to its read; past a bound the set is
// loaded again. On PostgreSQL, shared by several instances whose writes
// this process does not see, there is no set and EarlyOK always reads.
type special struct {
	mu    sync.Mutex
	m     map[string]struct{} // matchKey of family and NLRI
	limit int                 // reload from the store beyond this many
}

// specialFloor is the least limit of the set before a reload.
const specialFloor = 4096

// loadSpecial reads the active rules that are declared or limited to sites.
func (s *Store) loadSpecial(ctx context.Context) (*special, error) {
	rs, err := s.eng.reader().query(ctx, `SELECT family, nlri FROM rules
		WHERE state = 'active' AND (origin <> '' OR (sites <> '' AND sites <> '[]'))`)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	sp := &special{m: map[string]struct{}{}}
	for rs.Next() {
		var (
			fam  int64
			nlri []byte
		)
		if err := rs.Scan(&fam, &nlri); err != nil {
			return nil, err
		}
		sp.m[matchKey(fam, nlri)] = struct{}{}
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	sp.limit = max(2*len(sp.m), specialFloor)
	return sp, nil
}

// plain reports whether e, a write with no sites and no origin, may skip
// EarlyOK's read: its Match has no active rule that is declared or
// limited to sites.
func (sp *special) plain(e *encoded) bool {
	if sp == nil || len(e.sites) > 0 || e.in.Origin != "" {
		return false
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	_, found := sp.m[matchKey(e.family, e.nlri)]
	return !found
}

// note records the rules a committed upsert stored; it reloads the set
// when it has grown past its bound.
func (s *Store) noteSpecial(ctx context.Context, rules ...Rule) {
	sp := s.spec
	if sp == nil {
		return
	}
	sp.mu.Lock()
	for _, r := range rules {
		if r.Origin != "" || len(r.Sites) > 0 {
			sp.m[matchKey(int64(r.Rule.Match.Family()), r.Rule.Match.AppendTo(nil))] = struct{}{}
		}
	}
	over := len(sp.m) > sp.limit
	sp.mu.Unlock()
	if !over {
		return
	}
	fresh, err := s.loadSpecial(ctx)
	if err != nil {
		// Keep the grown set: it is still complete, only larger.
		s.log.Warn("reloading the declared and sited rules for early announcement failed; keeping the set as it is", "error", fmt.Sprint(err))
		return
	}
	sp.mu.Lock()
	// Rules noted meanwhile were committed before their writers returned,
	// so the fresh read has them; nothing noted is lost.
	sp.m, sp.limit = fresh.m, fresh.limit
	sp.mu.Unlock()
}
