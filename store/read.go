package store

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Get returns one rule with this site's status.
func (s *Store) Get(ctx context.Context, id int64) (Rule, error) {
	cctx, cancel := s.call(ctx, 1)
	defer cancel()
	r, err := s.get(cctx, s.eng.reader(), id)
	return r, s.wrap(ctx, "get rule", err)
}

func (s *Store) get(ctx context.Context, q querier, id int64) (Rule, error) {
	r, err := scanRule(q.queryRow(ctx, "SELECT "+ruleCols+ruleFrom+" WHERE r.id = ?", s.site, id))
	if errors.Is(err, errNoRows) {
		return Rule{}, fmt.Errorf("rule %d: %w", id, ErrNotFound)
	}
	return r, err
}

// GetBrief returns rule id as a write checks it: its rule, actor,
// origin, sites, expiry, state and withdraw request, without its text,
// reason, times and status (a fifth of Get's cost: one table, no join).
// It is for the checks ahead of a withdrawal, which leaves before its
// commit when it can (EarlyWithdrawOK).
func (s *Store) GetBrief(ctx context.Context, id int64) (Rule, error) {
	cctx, cancel := s.call(ctx, 1)
	defer cancel()
	r, err := s.brief(cctx, s.eng.reader(), id)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Rule{}, s.wrap(ctx, "get rule", err)
	}
	return r, err
}

// brief is GetBrief's read through q (the reader, or a write's
// transaction).
func (s *Store) brief(ctx context.Context, q querier, id int64) (Rule, error) {
	var (
		r           Rule
		fam         int64
		nlri, comms []byte
		sites       dbText
		expires     dbTime
		state       string
	)
	err := q.queryRow(ctx, `SELECT id, family, nlri, communities, actor, origin, sites, expires_at, state, withdraw_requested
		FROM rules WHERE id = ?`, id).Scan(&r.ID, &fam, &nlri, &comms, &r.Actor, &r.Origin, &sites, &expires, &state, &r.WithdrawRequested)
	if errors.Is(err, errNoRows) {
		return Rule{}, fmt.Errorf("rule %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Rule{}, err
	}
	r.Rule = decodeRule(flowspec.Family(fam), nlri, comms)
	r.Sites, r.ExpiresAt, r.State = decodeSites(sites.s), expires.t, State(state)
	return r, nil
}

// List returns rules with this site's status, newest first; all states when
// state is "".
func (s *Store) List(ctx context.Context, state State) ([]Rule, error) {
	q := "SELECT " + ruleCols + ruleFrom
	args := []any{s.site}
	if state != "" {
		if !state.valid() {
			return nil, invalid("state", "unknown state %q: use %q, %q or %q", state, Active, Withdrawn, Expired)
		}
		q += " WHERE r.state = ?"
		args = append(args, string(state))
	}
	return s.list(ctx, "list rules", q+" ORDER BY r.id DESC", args...)
}

// ActiveFrom returns the active rules that origin declared (the static
// rules of one site's configuration, StaticOrigin), whatever sites they
// target, oldest first.
func (s *Store) ActiveFrom(ctx context.Context, origin string) ([]Rule, error) {
	if origin == "" {
		return nil, invalid("origin", "empty origin: name the configuration that declared the rules")
	}
	return s.list(ctx, "list declared rules", "SELECT "+ruleCols+ruleFrom+
		" WHERE r.state = 'active' AND r.origin = ? ORDER BY r.id", s.site, origin)
}

// ActiveRules returns every rule in state Active that targets this site,
// including those past ExpiresAt or with WithdrawRequested, oldest first.
// An error means desired state is unknown, never empty.
//
// The rules are brief: ID, Rule, ExpiresAt, State, WithdrawRequested and
// this site's Announced and LastError are set; Text, Reason, Actor,
// Sites, CreatedAt and UpdatedAt are not (Get and List have them). It
// holds the whole table at once (about 1 KB a rule): the reconciler and
// the start read with EachActive, which does not.
func (s *Store) ActiveRules(ctx context.Context) ([]Rule, error) {
	var out []Rule
	err := s.EachActive(ctx, func(r *Rule) error {
		out = append(out, *r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EachActive calls fn with every rule ActiveRules returns, in the same
// order and as brief, one at a time as the database sends them: a full
// read costs the memory of one rule, not of the table (at a million
// rules, ActiveRules's slice alone is over a gigabyte). It is the
// reconciler's read, made at every start and resync.
//
// fn is given the same *Rule every time, overwritten by the next row: it
// may keep the values it copies out of it (the Rule, a Match, an Action,
// a string, a time: none of them is reused), never the pointer. An error
// from fn stops the walk and is returned unchanged.
//
// Any other error means desired state is unknown, never empty: the rows
// fn was given are not the whole of it, whatever their number, and the
// caller must not act on the absence of a rule from them. So does a
// store found corrupt or lost while the walk ran (checked again at its
// end).
//
// The read is bounded by its progress, not its total time (progressWatch):
// it fails once the database has sent no row for the store's timeout.
// Time spent in fn is not counted as the database's; the read holds a
// database connection (and, on SQLite, a read snapshot) until it ends,
// so fn should not wait long.
func (s *Store) EachActive(ctx context.Context, fn func(*Rule) error) error {
	const op = "read active rules"
	if err := s.untrusted(); err != nil {
		return err // not the whole desired state (integrity.go)
	}
	cctx, w := s.progressCall(ctx)
	defer w.stop()
	rs, err := s.eng.reader().query(cctx, "SELECT "+briefCols+ruleFrom+
		" WHERE r.state = 'active' AND "+s.eng.siteFilter()+" ORDER BY r.id", s.site, s.site)
	if err != nil {
		return s.wrap(ctx, op, w.why(err))
	}
	defer rs.Close()
	var r Rule
	b := newBriefScan(&r)
	for rs.Next() {
		// A driver may hand over rows it already received after the
		// context ended (pgx does): the walk stops at the next check.
		if w.row() {
			if err := cctx.Err(); err != nil {
				return s.wrap(ctx, op, w.why(err))
			}
		}
		if err := b.scan(rs); err != nil {
			return s.wrap(ctx, op, w.why(err))
		}
		w.handing()
		err := fn(&r)
		w.handed()
		if err != nil {
			return err
		}
	}
	if err := rs.Err(); err != nil {
		return s.wrap(ctx, op, w.why(err))
	}
	if err := cctx.Err(); err != nil {
		return s.wrap(ctx, op, w.why(err))
	}
	return s.untrusted()
}

func (s *Store) list(ctx context.Context, op, q string, args ...any) ([]Rule, error) {
	return s.listWith(ctx, op, scanRule, q, args...)
}

// listWith runs q and scans each row with scan.
func (s *Store) listWith(ctx context.Context, op string, scan func(row) (Rule, error), q string, args ...any) ([]Rule, error) {
	cctx, w := s.progressCall(ctx)
	defer w.stop()
	rs, err := s.eng.reader().query(cctx, q, args...)
	if err != nil {
		return nil, s.wrap(ctx, op, w.why(err))
	}
	defer rs.Close()
	var out []Rule
	for rs.Next() {
		w.row()
		r, err := scan(rs)
		if err != nil {
			return nil, s.wrap(ctx, op, w.why(err))
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return nil, s.wrap(ctx, op, w.why(err))
	}
	return out, nil
}

// A read of every row (the reconciler's full read, the start's) is
// bounded by its progress, not by its total time: it is cancelled once
// the database has sent no row for the store's timeout, the first row
// included, however many rows it reads in all. A table of a million
// rules takes longer to read than one timeout on a busy appliance (a
// fixed deadline failed every full read there, so a restart announced
// nothing), yet a hung database is still noticed within one timeout.

// progressWatch cancels its read when rows stop coming. It runs on the
// store's clock: the read notes its progress (row, handed) and, each time
// the timer fires, the watch looks at how long ago that was; while the
// caller handles a row the time is the caller's, not the database's.
type progressWatch struct {
	d     time.Duration
	clock clock.Clock
	t     clock.Timer
	n     int
	done  chan struct{}
	// last is when the read last made progress (unix ns on clock).
	last atomic.Int64
	// busy is set while the caller handles a row (EachActive's fn).
	busy atomic.Bool
	// stalled is set (before the read is cancelled) when the watch gave up.
	stalled atomic.Bool
}

// handing notes that the caller handles a row from now on.
func (w *progressWatch) handing() { w.busy.Store(true) }

// handed notes that the caller is done with its row: the database gets a
// whole timeout again from now.
func (w *progressWatch) handed() {
	w.progress()
	w.busy.Store(false)
}

func (w *progressWatch) progress() { w.last.Store(w.clock.Now().UnixNano()) }

// progressCall returns a context for a read that progressWatch bounds.
func (s *Store) progressCall(ctx context.Context) (context.Context, *progressWatch) {
	cctx, cancel := context.WithCancel(ctx)
	w := &progressWatch{d: s.timeout, clock: s.clock, t: s.clock.NewTimer(), done: make(chan struct{})}
	w.progress()
	w.t.Reset(w.d)
	go func() {
		defer cancel()
		for {
			select {
			case <-w.done:
				return
			case <-w.t.C():
			}
			idle := w.clock.Now().Sub(time.Unix(0, w.last.Load()))
			switch {
			case w.busy.Load():
				w.t.Reset(w.d) // the caller's time: judge again later
			case idle < w.d:
				w.t.Reset(w.d - idle)
			default:
				w.stalled.Store(true)
				return
			}
		}
	}()
	return cctx, w
}

// row notes progress every 64 rows (a scheduling or collection pause on
// a loaded machine is not a stalled database: 1,024 failed now and then).
// It reports, every 1,024 rows, that it is time to check the read's
// context.
func (w *progressWatch) row() (check bool) {
	w.n++
	if w.n&63 == 0 {
		w.progress()
	}
	return w.n&1023 == 0
}

// stop ends the watch and the read's context.
func (w *progressWatch) stop() {
	w.t.Stop()
	close(w.done)
}

// why names a read the watch cut short as the timeout it is.
func (w *progressWatch) why(err error) error {
	if w.stalled.Load() {
		return fmt.Errorf("no row for %v after %d rows: %w", w.d, w.n, context.DeadlineExceeded)
	}
	return err
}

// Page selects one page of List's order (newest first) for ListPage.
type Page struct {
	// State filters by state ("" for all). WithdrawRequested, if set,
	// also filters by that flag (active rules: withdrawing or not).
	State             State
	WithdrawRequested *bool
	// After is the id of the last rule of the previous page (0 for the
	// first): the page holds the rules with smaller ids.
	After int64
	// Limit bounds the page (1 to MaxPage).
	Limit int
	// Set, if not "", selects the rules of that set.
	Set string
}

// MaxPage is the largest page ListPage returns.
const MaxPage = 10000

// ListPage returns up to p.Limit rules with this site's status, newest
// first, after p.After. Walking pages with After set to the last id of
// each returns every rule that existed when the walk started exactly
// once, whatever is written meanwhile: new rules have larger ids than
// the first page's (they are not in the walk), and updates keep ids.
func (s *Store) ListPage(ctx context.Context, p Page) ([]Rule, error) {
	if p.Limit < 1 || p.Limit > MaxPage {
		return nil, invalid("limit", "%d is not between 1 and %d", p.Limit, MaxPage)
	}
	q := "SELECT " + ruleCols + ruleFrom + " WHERE TRUE"
	args := []any{s.site}
	if p.State != "" {
		if !p.State.valid() {
			return nil, invalid("state", "unknown state %q: use %q, %q or %q", p.State, Active, Withdrawn, Expired)
		}
		q += " AND r.state = ?"
		args = append(args, string(p.State))
	}
	if p.WithdrawRequested != nil {
		q += " AND r.withdraw_requested = ?"
		args = append(args, *p.WithdrawRequested)
	}
	if p.After > 0 {
		q += " AND r.id < ?"
		args = append(args, p.After)
	}
	if p.Set != "" {
		q += " AND r.set_name = ?"
		args = append(args, p.Set)
	}
	return s.list(ctx, "list rules", q+" ORDER BY r.id DESC LIMIT ?", append(args, p.Limit)...)
}
