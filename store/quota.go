package store

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// QuotaQuery asks QuotaCounts what the guardrails' quotas need, counted in
// the database instead of read rule by rule. Rules on their way out
// (withdraw requested) count as gone: storing one again cancels its
// withdrawal and makes it new.
type QuotaQuery struct {
	// Total asks for the count of every active rule (the guardrail
	// max_active_rules). It reads an index entry per active rule, so it is
	// asked only when that cap is set.
	Total bool
	// Actor, if set, counts the active rules it created or last changed
	// (the quota of a scoped token).
	Actor string
	// Destinations are counted one by one: active rules whose destination
	// prefix is exactly this one.
	Destinations []netip.Prefix
	// Matches are looked up: which of them is active, by whom, until when.
	Matches []flowspec.Match
}

// QuotaCounts is QuotaCounts' answer.
type QuotaCounts struct {
	Active        int                  // active rules in total (if QuotaQuery.Total)
	ByActor       int                  // of them, last written by QuotaQuery.Actor
	ByDestination map[netip.Prefix]int // per QuotaQuery.Destinations entry
	// Existing holds the QuotaQuery.Matches that are active.
	Existing map[flowspec.Match]Existing
}

// Existing is an active rule as quotas and scopes see it.
type Existing struct {
	ID        int64
	Match     flowspec.Match
	Actor     string
	ExpiresAt time.Time // zero: never
	// Action is the rule's stored action; the zero Action when the
	// stored bytes no longer decode (the reconciler reports those).
	Action flowspec.Action
	Origin string // "config:SITE" for a static rule, "" otherwise
	Set    string // the declarative set it belongs to, "" for none
}

// destinationKey is the stored form of a rule's destination (column
// destination): the prefix, or "" for a rule without one.
func destinationKey(m flowspec.Match) string {
	if d, ok := m.Destination(); ok {
		return d.String()
	}
	return ""
}

// QuotaCounts counts active rules as q asks, in one read: a COUNT per
// question (indexes on actor and destination of active rules answer
// them) and one lookup per chunk of matches.
func (s *Store) QuotaCounts(ctx context.Context, q QuotaQuery) (QuotaCounts, error) {
	const op = "count rules for quotas"
	cctx, cancel := s.call(ctx, 1+len(q.Matches)/lookupChunk)
	defer cancel()
	rd := s.eng.reader()
	out := QuotaCounts{ByDestination: make(map[netip.Prefix]int, len(q.Destinations)), Existing: map[flowspec.Match]Existing{}}
	const live = ` FROM rules WHERE state = 'active' AND NOT withdraw_requested`
	if q.Total {
		if err := rd.queryRow(cctx, `SELECT COUNT(*)`+live).Scan(&out.Active); err != nil {
			return QuotaCounts{}, s.wrap(ctx, op, err)
		}
	}
	if q.Actor != "" {
		if err := rd.queryRow(cctx, `SELECT COUNT(*)`+live+` AND actor = ?`, q.Actor).Scan(&out.ByActor); err != nil {
			return QuotaCounts{}, s.wrap(ctx, op, err)
		}
	}
	for _, d := range q.Destinations {
		if _, done := out.ByDestination[d]; done {
			continue
		}
		var n int
		if err := rd.queryRow(cctx, `SELECT COUNT(*)`+live+` AND destination = ?`, d.String()).Scan(&n); err != nil {
			return QuotaCounts{}, s.wrap(ctx, op, err)
		}
		out.ByDestination[d] = n
	}
	var err error
	if out.Existing, err = s.existing(cctx, rd, q.Matches); err != nil {
		return QuotaCounts{}, s.wrap(ctx, op, err)
	}
	return out, nil
}

// ActiveMatches looks up the active rules (not on their way out) with the
// given Matches, in one read per chunk: what a write checks against the
// stored rule, without QuotaCounts' counts.
func (s *Store) ActiveMatches(ctx context.Context, matches []flowspec.Match) (map[flowspec.Match]Existing, error) {
	cctx, cancel := s.call(ctx, 1+len(matches)/lookupChunk)
	defer cancel()
	out, err := s.existing(cctx, s.eng.reader(), matches)
	if err != nil {
		return nil, s.wrap(ctx, "look up active rules", err)
	}
	return out, nil
}

// existing looks up the active rules with the given Matches.
func (s *Store) existing(cctx context.Context, rd querier, matches []flowspec.Match) (map[flowspec.Match]Existing, error) {
	out := map[flowspec.Match]Existing{}
	byFamily := map[flowspec.Family][]any{}
	for _, m := range matches {
		if m.IsValid() {
			byFamily[m.Family()] = append(byFamily[m.Family()], m.AppendTo(nil))
		}
	}
	for fam, nlris := range byFamily {
		for lo := 0; lo < len(nlris); lo += lookupChunk {
			chunk := nlris[lo:min(lo+lookupChunk, len(nlris))]
			rs, err := rd.query(cctx, s.matchLookup(`id, nlri, actor, expires_at, communities, origin, set_name`, ` AND NOT withdraw_requested`, len(chunk)),
				append([]any{int64(fam)}, chunk...)...)
			if err != nil {
				return nil, err
			}
			for rs.Next() {
				var (
					e     Existing
					nlri  []byte
					comms []byte
					exp   dbTime
				)
				if err := rs.Scan(&e.ID, &nlri, &e.Actor, &exp, &comms, &e.Origin, &e.Set); err != nil {
					rs.Close()
					return nil, err
				}
				m, n, err := flowspec.DecodeMatch(fam, nlri)
				if err != nil || n != len(nlri) {
					continue // bad stored bytes: the reconciler reports them
				}
				e.Match, e.ExpiresAt = m, exp.t
				e.Action, _ = flowspec.DecodeStoredAction(fam, comms)
				out[m] = e
			}
			err = rs.Err()
			rs.Close()
			if err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// WithdrawItem names a rule for WithdrawMany and the reason it is to
// carry from now on ("" keeps the stored one).
type WithdrawItem struct {
	ID     int64
	Reason string
	// UpdatedAt, if set, is the rule's UpdatedAt as the caller read it:
	// a rule changed since (e.g. given a shorter TTL) is left alone, as
	// the caller's verdict was about what it read.
	UpdatedAt time.Time
}

// WithdrawMany asks for every item's rule to be withdrawn, with its new
// reason, in one transaction: all or none. Rules no longer active or
// already on their way out are left alone. It returns the rules it
// withdrew. Rules changed since the caller read them (WithdrawItem.UpdatedAt)
// are left alone too.
func (s *Store) WithdrawMany(ctx context.Context, items []WithdrawItem, actor string) ([]Rule, error) {
	if len(items) == 0 {
		return nil, nil
	}
	if err := CheckText(actor, MaxActorBytes); err != nil {
		return nil, invalid("actor", "%v", err)
	}
	for i, it := range items {
		if err := CheckText(it.Reason, MaxReasonBytes); err != nil {
			return nil, &InputError{Index: i, Field: "reason", Msg: err.Error()}
		}
	}
	var out []Rule
	err := s.write(ctx, "withdraw rules", len(items), func(ctx context.Context, t *wtx) (bool, error) {
		out = out[:0]
		now := dbTimeNow()
		for _, it := range items {
			old, err := s.get(ctx, t, it.ID)
			if err != nil {
				return false, fmt.Errorf("rule %d: %w", it.ID, err)
			}
			if old.State != Active || old.WithdrawRequested ||
				!it.UpdatedAt.IsZero() && !old.UpdatedAt.Equal(normTime(it.UpdatedAt)) {
				continue
			}
			reason := old.Reason
			if it.Reason != "" {
				reason = it.Reason
			}
			if _, err := t.exec(ctx, `UPDATE rules SET withdraw_requested = TRUE, reason = ?, actor = ?, updated_at = ?
				WHERE id = ?`, reason, actor, s.eng.timeArg(now), it.ID); err != nil {
				return false, fmt.Errorf("withdraw rule %d: %w", it.ID, err)
			}
			was := map[string]string{"withdraw_requested": "false"}
			is := map[string]string{"withdraw_requested": "true"}
			if reason != old.Reason {
				was["reason"], is["reason"] = old.Reason, reason
			}
			t.event(it.ID, now, EventWithdrawRequested, actor, "", was, is)
			r := old
			r.WithdrawRequested, r.Reason, r.Actor, r.UpdatedAt = true, reason, actor, now
			out = append(out, r)
		}
		return len(out) > 0, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// backfillDestination adds the destination column (migration 5): the
// destination prefix of each active rule, so that the guardrails count
// rules per destination in the database. Rules stored before it get
// theirs from their NLRI; rows that no longer decode keep "".
func backfillDestination(ctx context.Context, t tx) error {
	for _, q := range []string{
		`ALTER TABLE rules ADD COLUMN destination TEXT NOT NULL DEFAULT ''`,
		`CREATE INDEX rules_active_destination ON rules (destination) WHERE state = 'active'`,
		`CREATE INDEX rules_active_actor ON rules (actor) WHERE state = 'active'`,
	} {
		if _, err := t.exec(ctx, q); err != nil {
			return err
		}
	}
	rs, err := t.query(ctx, `SELECT id, family, nlri FROM rules WHERE state = 'active'`)
	if err != nil {
		return err
	}
	type row struct {
		id   int64
		dest string
	}
	var todo []row
	for rs.Next() {
		var (
			id, fam int64
			nlri    []byte
		)
		if err := rs.Scan(&id, &fam, &nlri); err != nil {
			rs.Close()
			return err
		}
		m, n, err := flowspec.DecodeMatch(flowspec.Family(fam), nlri)
		if err != nil || n != len(nlri) {
			continue
		}
		if d := destinationKey(m); d != "" {
			todo = append(todo, row{id, d})
		}
	}
	err = rs.Err()
	rs.Close()
	if err != nil {
		return err
	}
	for _, r := range todo {
		if _, err := t.exec(ctx, `UPDATE rules SET destination = ? WHERE id = ?`, r.dest, r.id); err != nil {
			return err
		}
	}
	return nil
}
