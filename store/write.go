package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// insertRuleSQL inserts a rule; where its Match is already active it
// inserts nothing. Each engine words it so that an update takes no id from
// the sequence (engine.insertRule): ids go to new rules only.
const insertRuleSQL = `INSERT INTO rules
	(family, nlri, communities, text, reason, actor, sites, created_at, updated_at, expires_at, origin, destination, set_name, state, withdraw_requested)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', FALSE)
	ON CONFLICT (family, nlri) WHERE state = 'active' DO NOTHING`

const updateRuleSQL = `UPDATE rules SET communities = ?, text = ?, reason = ?, actor = ?, sites = ?,
	expires_at = ?, origin = ?, set_name = ?, withdraw_requested = FALSE, updated_at = ? WHERE id = ?`

// write runs fn in one transaction bounded by the call timeout (scaled by
// n), commits, and signals the change feed if fn reports a change. It
// returns only after the commit, so an acknowledged write survives a crash.
//
// On SQLite the write goes through the group committer (see the package
// doc): fn may run in a transaction with other callers' writes, inside its
// own savepoint, and must not commit or roll back.
func (s *Store) write(ctx context.Context, op string, n int, fn func(ctx context.Context, w *wtx) (changed bool, err error)) error {
	return s.writeAs(ctx, op, n, false, fn)
}

// writeAs is write; a background write (SetStatus) waits on SQLite while
// other writes are queued.
func (s *Store) writeAs(ctx context.Context, op string, n int, background bool, fn func(ctx context.Context, w *wtx) (changed bool, err error)) error {
	if err := s.refused(); err != nil {
		return err // lost, corrupt or held (identity.go, integrity.go, record.go)
	}
	if s.group != nil {
		return s.wrap(ctx, op, s.group.enqueue(ctx, op, n, background, fn))
	}
	cctx, cancel := s.call(ctx, n)
	defer cancel()
	f := s.health.begin(s.clock.Now(), n)
	changed, err := s.transact(cctx, fn)
	if err != nil && ctx.Err() != nil {
		s.health.abandon(f) // the caller gave up: not the database's doing
	} else {
		s.health.end(f, err)
	}
	if err != nil {
		return s.wrap(ctx, op, err)
	}
	if changed {
		s.signal()
	}
	return nil
}

// transact runs fn in one transaction of its own and commits it.
func (s *Store) transact(ctx context.Context, fn func(ctx context.Context, w *wtx) (bool, error)) (changed bool, err error) {
	t, err := s.eng.begin(ctx)
	if err != nil {
		return false, err
	}
	defer t.rollback(context.WithoutCancel(ctx))
	w := &wtx{tx: t}
	changed, err = fn(ctx, w)
	if err == nil {
		err = s.flushEvents(ctx, w)
	}
	if err != nil {
		return false, err
	}
	if err := s.commit(ctx, t); err != nil {
		return false, fmt.Errorf("commit: %w", err)
	}
	return changed, nil
}

// commit commits t, unless a test's beforeCommit fails it first.
func (s *Store) commit(ctx context.Context, t tx) error {
	if s.beforeCommit != nil {
		if err := s.beforeCommit(ctx); err != nil {
			return err // the caller rolls t back
		}
	}
	return t.commit(ctx)
}

// Upsert stores in; an active rule with the same Match is updated in place
// (created=false): its action, expiry, reason, sites and actor are replaced
// and a pending withdraw request is cancelled. A Match whose earlier rows
// are all withdrawn or expired gets a new row (created=true). Storing exactly
// what is already stored changes nothing and records no history. Upsert
// returns after the commit.
func (s *Store) Upsert(ctx context.Context, in Input) (r Rule, created bool, err error) {
	now := s.now()
	e, err := encode(in, -1, now)
	if err != nil {
		return Rule{}, false, err
	}
	if err := s.checkSites(ctx, []encoded{e}, false); err != nil {
		return Rule{}, false, err
	}
	err = s.write(ctx, "upsert rule", 1, func(ctx context.Context, t *wtx) (bool, error) {
		// The time of the transaction, not of the call: a relative TTL
		// counts from when the rule is stored.
		now := s.now()
		e.at(now)
		var changed bool
		r, created, changed, err = s.upsertTx(ctx, t, &e, now)
		if err == nil && in.Announced && r.State == Active && (len(r.Sites) == 0 || slices.Contains(r.Sites, s.site)) &&
			(!r.Announced || r.LastError != "") {
			if err = s.announcedTx(ctx, t, r.ID, created, now); err == nil {
				r.Announced, r.LastError = true, ""
			}
		}
		return changed, err
	})
	if err != nil {
		return Rule{}, false, err
	}
	s.noteSpecial(ctx, r)
	return r, created, nil
}

// announcedTx records this site's status of rule id as announced inside
// t (Input.Announced). A rule created by t has no status yet: its row is
// written without looking for one first (the lookup of statusTx, sized
// for a million statuses, cost six times the rule's own insert).
func (s *Store) announcedTx(ctx context.Context, t *wtx, id int64, created bool, now time.Time) error {
	if !created {
		return s.statusTx(ctx, t, []int64{id}, true, "", now)
	}
	if _, err := t.exec(ctx, setStatusSQL(1), id, s.site, true, "", s.eng.timeArg(now)); err != nil {
		return err
	}
	t.eventJSON(id, now, EventStatus, "reconciler", s.site, statusFields(false, ""), statusFields(true, ""))
	return nil
}

// UpsertMany upserts every input, in order, in one transaction: all or
// nothing. A later input with the same Match as an earlier one updates it.
// The returned rules are in input order.
func (s *Store) UpsertMany(ctx context.Context, ins []Input) ([]Rule, error) {
	if len(ins) == 0 {
		return nil, nil
	}
	now := s.now()
	es := make([]encoded, len(ins))
	for i := range ins {
		var prev *Input
		if i > 0 {
			prev = &ins[i-1]
		}
		var err error
		if es[i], err = encodeNext(ins[i], i, now, prev); err != nil {
			return nil, err
		}
	}
	if err := s.checkSites(ctx, es, true); err != nil {
		return nil, err
	}
	out := make([]Rule, len(ins))
	err := s.write(ctx, "upsert rules", len(ins), func(ctx context.Context, t *wtx) (bool, error) {
		// The time of the transaction, not of the call (see Upsert).
		now := s.now()
		if _, lite := t.tx.(*sqliteTx); !lite {
			t.events = slices.Grow(t.events, len(es)) // one history entry a rule, mostly
		}
		for i := range es {
			es[i].at(now)
		}
		// Insert every rule at once (pipelined on PostgreSQL); the ones
		// whose Match is already active, in the database or earlier in
		// this batch, then update in input order, so the last input for a
		// Match wins as if they had been stored one by one. Where the
		// engine looks up first (SQLite), only the first input of each
		// Match not active yet is inserted.
		var skip map[string]bool
		if s.eng.lookupFirst() {
			var err error
			if skip, err = s.activeKeys(ctx, t, es); err != nil {
				return false, fmt.Errorf("look up active rules: %w", err)
			}
		}
		var (
			idx   []int // indexes into es of the inserts
			args  = make([][]any, 0, len(es))
			boxes argBoxes
			// Every row's arguments in one array, each row a slice of it.
			flat = make([]any, 0, insertRuleCols*len(es))
		)
		for i := range es {
			if skip != nil {
				k := matchKey(es[i].family, es[i].nlri)
				if skip[k] {
					continue
				}
				skip[k] = true // a later input with this Match updates it
			}
			idx = append(idx, i)
			n := len(flat)
			flat = s.appendInsertArgs(flat, &boxes, &es[i], now)
			args = append(args, flat[n:len(flat):len(flat)])
		}
		ids, inserted, err := t.insertIDs(ctx, s.eng.insertRule(), args)
		if err != nil {
			return false, fmt.Errorf("insert rules: %w", err)
		}
		done := make([]bool, len(es))
		changed := false
		// On SQLite the rows inserted are all those from the first id
		// to the last (the write lock is held; ids ascend in input
		// order): one range stands for their created entries.
		_, lite := t.tx.(*sqliteTx)
		var lo, hi int64
		for j, i := range idx {
			if !inserted[j] {
				continue
			}
			if lite {
				out[i] = s.createdRule(ids[j], &es[i], now)
				if lo == 0 {
					lo = ids[j]
				}
				hi = ids[j]
			} else {
				out[i] = s.created(t, ids[j], &es[i], now)
			}
			changed, done[i] = true, true
		}
		if lo != 0 {
			t.createdRange(lo, hi)
		}
		for i := range es {
			if done[i] {
				continue
			}
			var c bool
			if out[i], _, c, err = s.upsertTx(ctx, t, &es[i], now); err != nil {
				return false, fmt.Errorf("inputs[%d] (%s): %w", i, es[i].text, err)
			}
			changed = changed || c
		}
		return changed, nil
	})
	if err != nil {
		return nil, err
	}
	s.noteSpecial(ctx, out...)
	return out, nil
}

func (s *Store) insertArgs(e *encoded, now time.Time) []any {
	var b argBoxes
	return s.appendInsertArgs(make([]any, 0, insertRuleCols), &b, e, now)
}

// appendInsertArgs appends insertArgs to dst, for one of many rules of
// a batch: b reuses what the rules before it share (actor, reason,
// sites, the transaction's time, the expiry), since turning a value into
// an argument allocates.
func (s *Store) appendInsertArgs(dst []any, b *argBoxes, e *encoded, now time.Time) []any {
	t := b.now.get(s.eng, now)
	return append(dst, e.family, e.nlri, e.comms, e.text, b.reason.get(e.in.Reason), b.actor.get(e.in.Actor),
		b.sites.get(e.sitesJS), t, t, b.expires.get(s.eng, e.expires), e.in.Origin, e.dest, b.set.get(e.in.Set))
}

// argBoxes keeps the last value of each shared argument as a query
// argument (an any), handing out the same one while the value repeats.
type argBoxes struct {
	reason, actor, sites, set boxedString
	now, expires              boxedTime
}

type boxedString struct {
	s  string
	v  any
	ok bool
}

func (b *boxedString) get(s string) any {
	if !b.ok || b.s != s {
		b.s, b.v, b.ok = s, s, true
	}
	return b.v
}

type boxedTime struct {
	t  time.Time
	v  any
	ok bool
}

func (b *boxedTime) get(eng engine, t time.Time) any {
	if !b.ok || !b.t.Equal(t) {
		b.t, b.v, b.ok = t, eng.timeArg(t), true
	}
	return b.v
}

// created returns the rule e just inserted as id and records its history:
// a created entry without its fields, which the rule's row holds
// (History rebuilds them), so that a bulk load writes each rule's data
// once.
func (s *Store) created(t *wtx, id int64, e *encoded, now time.Time) Rule {
	t.eventJSON(id, now, EventCreated, e.in.Actor, "", nil, nil)
	return s.createdRule(id, e, now)
}

// createdRule is the rule e just inserted as id, at now.
func (s *Store) createdRule(id int64, e *encoded, now time.Time) Rule {
	return Rule{
		ID: id, Rule: e.in.Rule, Text: e.text, Reason: e.in.Reason, Actor: e.in.Actor,
		Sites: e.sites, CreatedAt: now, UpdatedAt: now, ExpiresAt: e.expires, State: Active, Origin: e.in.Origin, Set: e.in.Set,
	}
}

// upsertTx inserts e, or updates the active row with the same Match. On
// PostgreSQL the insert comes first: it is the common case, and its
// wording draws no id when the Match is active. SQLite, whose writer holds
// the database's write lock, looks the Match up first, in process.
func (s *Store) upsertTx(ctx context.Context, t *wtx, e *encoded, now time.Time) (r Rule, created, changed bool, err error) {
	// Another instance can insert or finish the same Match between our
	// statements (PostgreSQL, read committed); each retry sees its result.
	active := func() (Rule, error) {
		return scanRule(t.queryRow(ctx, "SELECT "+ruleCols+ruleFrom+
			" WHERE r.family = ? AND r.nlri = ? AND r.state = 'active'"+s.eng.forUpdate(),
			s.site, e.family, e.nlri))
	}
	for range 5 {
		old, err := Rule{}, errNoRows
		if s.eng.lookupFirst() {
			// The covering index answers "is it active?"; the full
			// row is read only for an update.
			var one int64
			if err = t.queryRow(ctx, `SELECT 1 FROM rules WHERE family = ? AND nlri = ? AND state = 'active'`,
				e.family, e.nlri).Scan(&one); err == nil {
				old, err = active()
			}
		}
		if errors.Is(err, errNoRows) {
			id, inserted, ierr := t.insertID(ctx, s.eng.insertRule(), s.insertArgs(e, now)...)
			if ierr != nil {
				return Rule{}, false, false, fmt.Errorf("insert rule: %w", ierr)
			}
			if inserted {
				return s.created(t, id, e, now), true, true, nil
			}
			old, err = active()
		}
		if errors.Is(err, errNoRows) {
			continue
		}
		if err != nil {
			return Rule{}, false, false, fmt.Errorf("read active rule: %w", err)
		}
		if old.Origin != "" && old.Origin != e.in.Origin {
			return Rule{}, false, false, &DeclaredError{ID: old.ID, Origin: old.Origin}
		}
		if e.in.Set != "" && old.Set != "" && old.Set != e.in.Set {
			return Rule{}, false, false, &SetConflictError{ID: old.ID, Set: old.Set, Want: e.in.Set}
		}
		r = merged(old, e)
		was, is := diffFields(ruleFields(old), ruleFields(r))
		if len(is) == 0 {
			return old, false, false, nil
		}
		r.UpdatedAt = now
		if _, err := t.exec(ctx, updateRuleSQL, e.comms, e.text, r.Reason, r.Actor, encodeSites(r.Sites),
			s.eng.timeArg(r.ExpiresAt), r.Origin, r.Set, s.eng.timeArg(now), old.ID); err != nil {
			return Rule{}, false, false, fmt.Errorf("update rule %d: %w", old.ID, err)
		}
		t.event(old.ID, now, EventUpdated, e.in.Actor, "", was, is)
		return r, false, true, nil
	}
	return Rule{}, false, false, fmt.Errorf("rule %s keeps changing under concurrent writers: retry", e.text)
}

// merged is old updated with e: the rule, its text and the actor always,
// the reason, expiry and sites unless e keeps them, the set when e names
// one (a write outside any set leaves a set's rule in its set); a pending
// withdraw request is cancelled.
func merged(old Rule, e *encoded) Rule {
	r := old
	r.Rule, r.Text, r.Actor, r.WithdrawRequested, r.Origin = e.in.Rule, e.text, e.in.Actor, false, e.in.Origin
	if e.in.Keep&KeepReason == 0 {
		r.Reason = e.in.Reason
	}
	if e.in.Keep&KeepExpiry == 0 {
		r.ExpiresAt = e.expires
	}
	if e.in.Keep&KeepSites == 0 {
		r.Sites = e.sites
	}
	if e.in.Set != "" {
		r.Set = e.in.Set
	}
	return r
}

// Withdraw asks for an active rule to be withdrawn (sets WithdrawRequested)
// and returns it. The rule stays Active, and is still returned by
// ActiveRules, until the reconciler saw its path gone and calls Finish.
// Withdrawing a rule that is already withdrawn, expired or pending
// withdrawal changes nothing.
func (s *Store) Withdraw(ctx context.Context, id int64, actor string) (Rule, error) {
	var r Rule
	err := s.write(ctx, "withdraw rule", 1, func(ctx context.Context, t *wtx) (changed bool, err error) {
		r, changed, err = s.withdrawTx(ctx, t, id, actor)
		return changed, err
	})
	return r, err
}

// withdrawTx asks for rule id's withdrawal in t (Withdraw) and returns
// the rule as it then is, and whether anything was written.
func (s *Store) withdrawTx(ctx context.Context, t *wtx, id int64, actor string) (Rule, bool, error) {
	now := s.now()
	n, err := t.exec(ctx, `UPDATE rules SET withdraw_requested = TRUE, actor = ?, updated_at = ?
		WHERE id = ? AND state = 'active' AND NOT withdraw_requested`, actor, s.eng.timeArg(now), id)
	if err != nil {
		return Rule{}, false, err
	}
	if n > 0 {
		t.event(id, now, EventWithdrawRequested, actor, "",
			map[string]string{"withdraw_requested": "false"}, map[string]string{"withdraw_requested": "true"})
	}
	r, err := s.get(ctx, t, id)
	return r, n > 0, err
}

// ErrChanged is WithdrawSeen's answer when the rule is no longer as the
// caller saw it: nothing was written; read the rule again and decide on
// it as it is now.
var ErrChanged = errors.New("rule changed since it was read")

// WithdrawSeen is Withdraw for a rule the caller checked as seen (a
// brief rule, as GetBrief returns it, kept from an earlier write or
// read) without reading it again first: in the same transaction it
// withdraws the rule only if it is still as seen (its match, action,
// actor, origin, sites, state and withdraw request), and otherwise
// writes nothing and returns ErrChanged. The withdrawal's checks are then
// those of the stored rule, as with a read right before Withdraw.
func (s *Store) WithdrawSeen(ctx context.Context, id int64, actor string, seen Rule) (Rule, error) {
	return s.withdrawOne(ctx, id, actor, &seen, false)
}

// WithdrawGone is Withdraw, or with seen WithdrawSeen, of a rule whose
// path this site's speaker no longer holds: the caller took it off ahead
// of the commit (an early withdrawal the speaker took). The same
// transaction then also makes the rule Withdrawn and clears this site's
// status, as the reconciler does (Finish) once its mirror shows the path
// gone, so that no second commit follows the write. The history is the
// same two entries. A rule that was not active or already on its way out
// is answered as Withdraw answers it, and not finished here.
func (s *Store) WithdrawGone(ctx context.Context, id int64, actor string, seen *Rule) (Rule, error) {
	return s.withdrawOne(ctx, id, actor, seen, true)
}

// withdrawOne is Withdraw in one write: of the rule as seen (nil: as
// stored), finished at once when gone.
func (s *Store) withdrawOne(ctx context.Context, id int64, actor string, seen *Rule, gone bool) (Rule, error) {
	var r Rule
	err := s.write(ctx, "withdraw rule", 1, func(ctx context.Context, t *wtx) (bool, error) {
		if seen != nil {
			cur, err := s.brief(ctx, t, id)
			if err != nil {
				return false, err
			}
			if !sameBrief(cur, *seen) {
				return false, fmt.Errorf("rule %d: %w", id, ErrChanged)
			}
		}
		var changed bool
		var err error
		r, changed, err = s.withdrawTx(ctx, t, id, actor)
		if err != nil || !changed || !gone {
			return changed, err
		}
		q, err := finishQuery(Withdrawn)
		if err != nil {
			return false, err
		}
		now := s.now()
		finished, err := s.finishTx(ctx, t, id, Withdrawn, q, now)
		if err != nil {
			return false, err
		}
		if finished {
			r.State, r.Announced, r.UpdatedAt = Withdrawn, false, now
		}
		return true, nil
	})
	return r, err
}

// sameBrief reports whether two brief reads of a rule agree on what a
// withdrawal checks.
func sameBrief(a, b Rule) bool {
	return a.ID == b.ID && a.Rule == b.Rule && a.Actor == b.Actor && a.Origin == b.Origin &&
		slices.Equal(a.Sites, b.Sites) && a.State == b.State && a.WithdrawRequested == b.WithdrawRequested
}

// Finish moves an active rule to Withdrawn or Expired once the reconciler
// saw its path gone. It is a conditional update, safe from several instances
// at once and idempotent: it does nothing if the rule is no longer active,
// and also nothing if the rule changed since the reconciler read it —
// Withdrawn applies only while a withdraw is requested and Expired only once
// ExpiresAt has passed, so a concurrent Upsert that renewed the rule wins and
// the next pass announces it again.
func (s *Store) Finish(ctx context.Context, id int64, state State) error {
	q, err := finishQuery(state)
	if err != nil {
		return err
	}
	return s.write(ctx, "finish rule", 1, func(ctx context.Context, t *wtx) (bool, error) {
		return s.finishTx(ctx, t, id, state, q, s.now())
	})
}

// FinishItem names a rule for FinishMany and the state it finishes in.
type FinishItem struct {
	ID    int64
	State State
}

// finishChunk bounds the rules FinishMany writes per transaction: one
// commit (one fsync on SQLite) per chunk instead of one per rule, and no
// transaction long enough to hold other writers up for long
// (store.BenchmarkFinishMany/sqlite: 10,000 in 100–175 ms).
const finishChunk = 5000

// FinishMany finishes every item as Finish does, a chunk of them per
// transaction, and returns each item's error in input order (nil, or
// ErrNotFound / ErrInvalidInput for that item). err is set when a chunk
// could not be written at all (store unavailable, context ended); the
// items of that chunk and of later ones then carry it too. An expiry
// burst of 25,000 rules costs 5 commits instead of 25,000.
func (s *Store) FinishMany(ctx context.Context, items []FinishItem) (errs []error, err error) {
	errs = make([]error, len(items))
	for lo := 0; lo < len(items); lo += finishChunk {
		chunk := items[lo:min(lo+finishChunk, len(items))]
		cerrs := errs[lo : lo+len(chunk)]
		werr := s.write(ctx, "finish rules", len(chunk), func(ctx context.Context, t *wtx) (bool, error) {
			now := s.now()
			changed := false
			for i, it := range chunk {
				q, err := finishQuery(it.State)
				if err != nil {
					cerrs[i] = err
					continue
				}
				ch, err := s.finishTx(ctx, t, it.ID, it.State, q, now)
				switch {
				case errors.Is(err, ErrNotFound):
					cerrs[i] = err
				case err != nil:
					return false, err
				}
				changed = changed || ch
			}
			return changed, nil
		})
		if werr != nil {
			for i := lo; i < len(items); i++ {
				errs[i] = werr
			}
			return errs, werr
		}
	}
	return errs, nil
}

// finishQuery is the conditional update that finishes a rule in state.
func finishQuery(state State) (string, error) {
	switch state {
	case Withdrawn:
		return `UPDATE rules SET state = 'withdrawn', updated_at = ? WHERE id = ? AND state = 'active' AND withdraw_requested`, nil
	case Expired:
		return `UPDATE rules SET state = 'expired', updated_at = ? WHERE id = ? AND state = 'active'
			AND expires_at IS NOT NULL AND expires_at <= ?`, nil
	}
	return "", invalid("state", "cannot finish a rule as %q: use %q or %q", state, Withdrawn, Expired)
}

// finishTx runs q (finishQuery's) for one rule inside t and records the
// history event; changed is false when the rule was not active any more
// or changed since it was read. The reconciler calls it once its mirror
// shows the rule's path gone, so this site's status says not announced
// from then on, whether or not another site finished the rule first.
func (s *Store) finishTx(ctx context.Context, t *wtx, id int64, state State, q string, now time.Time) (changed bool, err error) {
	args := []any{s.eng.timeArg(now), id}
	if state == Expired {
		args = append(args, s.eng.timeArg(now))
	}
	n, err := t.exec(ctx, q, args...)
	if err != nil {
		return false, err
	}
	if _, err := t.exec(ctx, `UPDATE rule_status SET announced = FALSE, updated_at = ?
		WHERE rule_id = ? AND site = ? AND announced`, s.eng.timeArg(now), id, s.site); err != nil {
		return false, err
	}
	if n == 0 {
		var one int64
		err := t.queryRow(ctx, `SELECT 1 FROM rules WHERE id = ?`, id).Scan(&one)
		if errors.Is(err, errNoRows) {
			return false, fmt.Errorf("rule %d: %w", id, ErrNotFound)
		}
		return false, err
	}
	kind := EventWithdrawn
	if state == Expired {
		kind = EventExpired
	}
	t.event(id, now, kind, "reconciler", s.site,
		map[string]string{"state": string(Active)}, map[string]string{"state": string(state)})
	return true, nil
}

// matchKey is a map key of a Match in stored form.
func matchKey(family int64, nlri []byte) string {
	return string(rune(family)) + string(nlri)
}

// lookupChunk bounds the NLRIs of one lookup query (SQLite allows 32766
// parameters).
const lookupChunk = 500

// matchLookup is the query of cols of the active rules (and the
// condition and, if any) of one family ("?") with any of n NLRIs ("?"
// each), through the index of active Matches: a batch's lookups cost
// what its rules do, whatever the size of the table.
func (s *Store) matchLookup(cols, and string, n int) string {
	if _, pg := s.eng.(*pgEngine); pg {
		// One probe of the index per NLRI, whatever the planner's
		// statistics: a table loaded since its last ANALYZE looks nearly
		// empty to it, and it read every active rule of the family to
		// filter them by the list instead (quadratic in a bulk load).
		// OFFSET 0 keeps the subquery from being merged into the join.
		// The family is the first argument: numbered explicitly.
		key := multiRowKey{"pg lookup " + cols, and, n, ""}
		if q, ok := multiRowTexts.Load(key); ok {
			return q.(string)
		}
		var b strings.Builder
		b.WriteString(`SELECT r.* FROM (VALUES `)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "($%d::bytea)", i+2)
		}
		b.WriteString(`) AS u(nlri) CROSS JOIN LATERAL (SELECT ` + cols + ` FROM rules
			WHERE state = 'active'` + and + ` AND family = $1 AND nlri = u.nlri OFFSET 0) r`)
		q, _ := multiRowTexts.LoadOrStore(key, b.String())
		return q.(string)
	}
	return `SELECT ` + cols + ` FROM rules` + s.eng.indexedBy("rules_active_match") +
		` WHERE state = 'active'` + and + ` AND family = ? AND nlri IN (` + strings.TrimSuffix(strings.Repeat("?,", n), ",") + ")"
}

// activeKeys returns the matchKeys of es that have an active rule: one
// query per lookupChunk inputs of a family, not one per input.
func (s *Store) activeKeys(ctx context.Context, t *wtx, es []encoded) (map[string]bool, error) {
	byFamily := map[int64][]any{}
	for i := range es {
		byFamily[es[i].family] = append(byFamily[es[i].family], es[i].nlri)
	}
	out := make(map[string]bool, len(es))
	lt, lite := t.tx.(*sqliteTx)
	var args []any
	for fam, nlris := range byFamily {
		for lo := 0; lo < len(nlris); lo += lookupChunk {
			chunk := nlris[lo:min(lo+lookupChunk, len(nlris))]
			args = append(append(args[:0], fam), chunk...)
			if lite {
				// On the driver's connection, without database/sql's
				// conversion of each argument (queryEach).
				err := lt.queryEach(ctx, s.matchLookup("nlri", "", len(chunk)), args, 1, func(v []driver.Value) error {
					nlri, ok := v[0].([]byte)
					if !ok {
						return fmt.Errorf("SQLite returned %T for an nlri: this is a bug", v[0])
					}
					out[matchKey(fam, nlri)] = true
					return nil
				})
				if err != nil {
					return nil, err
				}
				continue
			}
			rs, err := t.query(ctx, s.matchLookup("nlri", "", len(chunk)), args...)
			if err != nil {
				return nil, err
			}
			for rs.Next() {
				var nlri []byte
				if err := rs.Scan(&nlri); err != nil {
					rs.Close()
					return nil, err
				}
				out[matchKey(fam, nlri)] = true
			}
			rs.Close()
			if err := rs.Err(); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
