package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// EventKind names what happened to a rule.
type EventKind string

const (
	EventCreated           EventKind = "created"
	EventUpdated           EventKind = "updated"
	EventWithdrawRequested EventKind = "withdraw-requested"
	EventWithdrawn         EventKind = "withdrawn"
	EventExpired           EventKind = "expired"
	EventStatus            EventKind = "status" // a site's announce status changed
)

// Event is one entry of a rule's audit history.
type Event struct {
	ID     int64
	RuleID int64
	At     time.Time
	Kind   EventKind
	Actor  string
	Site   string // the site that made the change (status, withdrawn, expired); "" otherwise
	// Old and New hold the fields that changed, as text: "text", "reason",
	// "expires_at" (RFC 3339, "never"), "sites" (JSON array, [] = all),
	// "withdraw_requested", "state", "announced", "last_error", "origin", "set". Old is nil
	// for created.
	Old map[string]string
	New map[string]string
}

// History returns a rule's audit history, oldest first.
func (s *Store) History(ctx context.Context, id int64) ([]Event, error) {
	cctx, cancel := s.call(ctx, 1)
	defer cancel()
	evs, err := s.history(cctx, id)
	return evs, s.wrap(ctx, "read rule history", err)
}

func (s *Store) history(ctx context.Context, id int64) ([]Event, error) {
	// The rule before its history: an entry committed in between has as
	// old values what this read of the rule holds, so rebuilding the
	// created entry (rebuildCreated) from both stays exact.
	cur, err := s.get(ctx, s.eng.reader(), id)
	if err != nil {
		return nil, err
	}
	rs, err := s.eng.reader().query(ctx, `SELECT id, rule_id, at, kind, actor, site, old_values, new_values
		FROM rule_events WHERE rule_id = ? ORDER BY id`, id)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []Event
	for rs.Next() {
		var (
			e        Event
			at       dbTime
			kind     string
			old, new dbText
		)
		if err := rs.Scan(&e.ID, &e.RuleID, &at, &kind, &e.Actor, &e.Site, &old, &new); err != nil {
			return nil, err
		}
		e.At, e.Kind = at.t, EventKind(kind)
		if e.Old, err = decodeFields(old.s); err == nil {
			e.New, err = decodeFields(new.s)
		}
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", e.ID, err)
		}
		out = append(out, e)
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	rebuildCreated(cur, out)
	return out, nil
}

// rebuildCreated fills in the fields of the created entry of evs, a
// rule's history in order, when it was stored without them (created):
// the rule's fields as they are now (cur), taken back through the old
// values of each later entry, newest first. Every later change of a
// field ruleFields records is an entry with the field's old value, and
// a purge removes history by id order only (PurgeHistory), so the later
// entries of a created entry that is kept are all there.
func rebuildCreated(cur Rule, evs []Event) {
	c := slices.IndexFunc(evs, func(e Event) bool { return e.Kind == EventCreated && e.New == nil })
	if c < 0 {
		return
	}
	m := ruleFields(cur)
	for i := len(evs) - 1; i > c; i-- {
		for k, v := range evs[i].Old {
			switch k {
			case "origin", "set": // recorded only when set: "" is absent
				if v == "" {
					delete(m, k)
				} else {
					m[k] = v
				}
			case "text", "reason", "expires_at", "sites", "withdraw_requested":
				m[k] = v
			}
		}
	}
	evs[c].New = m
}

// wtx is a write transaction that collects history events and inserts
// them, many rows per statement, just before commit.
type wtx struct {
	tx
	events []pendingEvent
}

// pendingEvent is a history entry waiting for its transaction's flush,
// its changed fields already encoded (encodeFields: a JSON object, or nil
// for NULL).
type pendingEvent struct {
	ruleID       int64
	at           time.Time
	kind         EventKind
	actor, site  string
	oldJS, newJS any
	// through, when set, makes the entry stand for the created entries
	// (created) of every rule with an id from ruleID to through, each
	// at its created_at and by its actor (createdRange).
	through int64
}

// event records one history entry, written with the transaction.
func (w *wtx) event(id int64, at time.Time, kind EventKind, actor, site string, old, new map[string]string) {
	w.eventJSON(id, at, kind, actor, site, encodeFields(old), encodeFields(new))
}

// createdRange records the created entries (created) of the rules with
// ids from lo to hi, all of them inserted by this transaction, which
// holds the write lock (SQLite): one statement copies them from the
// rules' rows at the flush instead of sending each entry's fields.
func (w *wtx) createdRange(lo, hi int64) {
	w.events = append(w.events, pendingEvent{ruleID: lo, through: hi, kind: EventCreated})
}

// insertCreatedSQL writes createdRange's entries, in id order.
const insertCreatedSQL = `INSERT INTO rule_events (rule_id, at, kind, actor, site, old_values, new_values)
	SELECT id, created_at, '` + string(EventCreated) + `', actor, '', NULL, NULL FROM rules WHERE id BETWEEN ? AND ? ORDER BY id`

// eventJSON is event with the fields already encoded (encodeFields), for
// a writer that records the same change for many rules (SetStatus).
func (w *wtx) eventJSON(id int64, at time.Time, kind EventKind, actor, site string, oldJS, newJS any) {
	w.events = append(w.events, pendingEvent{ruleID: id, at: at, kind: kind, actor: actor, site: site, oldJS: oldJS, newJS: newJS})
}

const eventChunk = 128 // rows per INSERT: 7 parameters each

// flushEvents inserts w's pending events.
func (s *Store) flushEvents(ctx context.Context, w *wtx) error {
	if len(w.events) == 0 {
		return nil
	}
	if err := s.eng.lockHistory(ctx, w.tx); err != nil {
		return fmt.Errorf("record history: %w", err)
	}
	evs := w.events
	if pt, ok := w.tx.(*pgTx); ok {
		if err := pt.insertEvents(ctx, evs); err != nil {
			return fmt.Errorf("record history: %w", err)
		}
		evs = nil
	}
	args := make([]any, 0, 7*min(len(evs), eventChunk))
	// The events of one transaction mostly share their time, kind, actor
	// and site: each is turned into an argument once while it repeats.
	var (
		at                boxedTime
		kind, actor, site boxedString
	)
	for len(evs) > 0 {
		if e := evs[0]; e.through != 0 {
			lt, ok := w.tx.(*sqliteTx)
			if !ok {
				return fmt.Errorf("record history: a range of created entries on %T: this is a bug", w.tx)
			}
			if err := lt.execMany(ctx, insertCreatedSQL, []any{e.ruleID, e.through}); err != nil {
				return fmt.Errorf("record history: %w", err)
			}
			evs = evs[1:]
			continue
		}
		// Whole chunks, then the rest in chunks of a power of two: a
		// handful of statement texts, each prepared once per transaction.
		n := chunkSize(len(evs), eventChunk)
		if r := slices.IndexFunc(evs[:n], func(e pendingEvent) bool { return e.through != 0 }); r >= 0 {
			n = chunkSize(r, eventChunk) // the entries before the range first
		}
		args = args[:0]
		for _, e := range evs[:n] {
			args = append(args, e.ruleID, at.get(s.eng, e.at), kind.get(string(e.kind)), actor.get(e.actor), site.get(e.site), e.oldJS, e.newJS)
		}
		if err := execRows(ctx, w, insertEventsSQL(n), args); err != nil {
			return fmt.Errorf("record history: %w", err)
		}
		evs = evs[n:]
	}
	w.events = w.events[:0]
	// Every change of desired state records history: this transaction
	// wakes the other instances' change feeds when it commits.
	if err := s.eng.notifyChanges(ctx, w.tx); err != nil {
		return fmt.Errorf("notify the other instances: %w", err)
	}
	return nil
}

// chunkSize is the rows of the next multi-row statement for n rows left,
// at most max (a power of two): max while n allows, then the largest power
// of two not above n.
func chunkSize(n, max int) int {
	if n >= max {
		return max
	}
	c := 1
	for c*2 <= n {
		c *= 2
	}
	return c
}

func insertEventsSQL(n int) string {
	return multiRowSQL("INSERT INTO rule_events (rule_id, at, kind, actor, site, old_values, new_values) VALUES ", "(?, ?, ?, ?, ?, ?, ?)", n, "")
}

// multiRowSQL is head, then row n times separated by commas, then tail.
// The texts are kept: a statement is looked up by its text (prepared
// once per SQLite transaction, cached by pgx).
func multiRowSQL(head, row string, n int, tail string) string {
	key := multiRowKey{head, row, n, tail}
	if q, ok := multiRowTexts.Load(key); ok {
		return q.(string)
	}
	var b strings.Builder
	b.Grow(len(head) + n*(len(row)+1) + len(tail))
	b.WriteString(head)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
	}
	b.WriteString(tail)
	q, _ := multiRowTexts.LoadOrStore(key, b.String())
	return q.(string)
}

type multiRowKey struct {
	head, row string
	n         int
	tail      string
}

// multiRowTexts caches multiRowSQL's texts; callers ask for a few sizes
// only (chunkSize), so it stays small.
var multiRowTexts sync.Map

// ruleFields is what history records of a rule's desired state.
func ruleFields(r Rule) map[string]string {
	exp := "never"
	if !r.ExpiresAt.IsZero() {
		exp = r.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	m := map[string]string{
		"text":               r.Text,
		"reason":             r.Reason,
		"expires_at":         exp,
		"sites":              encodeSites(r.Sites),
		"withdraw_requested": strconv.FormatBool(r.WithdrawRequested),
	}
	if r.Origin != "" {
		m["origin"] = r.Origin
	}
	if r.Set != "" {
		m["set"] = r.Set
	}
	return m
}

// diffFields returns the entries of a and b whose values differ.
func diffFields(a, b map[string]string) (was, is map[string]string) {
	for k, v := range b {
		if a[k] != v {
			if was == nil {
				was, is = map[string]string{}, map[string]string{}
			}
			was[k], is[k] = a[k], v
		}
	}
	return was, is
}

// encodeFields returns the JSON object of m, or nil (NULL) for nil.
func encodeFields(m map[string]string) any {
	if m == nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	n := 2
	for k, v := range m {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			b, _ := json.Marshal(m) // replaces invalid UTF-8; never in practice
			return string(b)
		}
		keys = append(keys, k)
		n += len(k) + len(v) + 6
	}
	slices.Sort(keys)
	// The same JSON object json.Marshal writes (sorted keys), without its
	// reflection: every upsert and every finish records two of these.
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, m[k])
	}
	return string(append(b, '}'))
}

// appendJSONString appends s, valid UTF-8, as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

func decodeFields(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("decode changed fields: %w", err)
	}
	return m, nil
}
