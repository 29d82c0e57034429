package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// The SQL below is shared by both engines ("?" placeholders, standard SQL
// that SQLite 3.35+ and PostgreSQL 12+ both accept); engine methods supply
// the few dialect pieces.

// ruleCols and ruleFrom select a Rule with this site's status; ruleFrom
// takes the site as its first argument.
const ruleCols = `r.id, r.family, r.nlri, r.communities, r.text, r.reason, r.actor, r.sites,
	r.created_at, r.updated_at, r.expires_at, r.state, r.withdraw_requested,
	COALESCE(s.announced, FALSE), COALESCE(s.last_error, ''), r.origin, r.set_name`

const ruleFrom = ` FROM rules r` + statusJoin

// statusJoin joins this site's status (s) to rules r; it takes the site
// as its argument. The site is compared as CAST(? AS TEXT), not as a bare
// parameter: SQLite marks a statement with a bare parameter in this join
// term to be prepared again each time the parameter is bound (its
// planner may look at the bound value), so every read of rules with
// their status parsed and planned its statement anew (perf:
// sqlite3Reprepare under sqlite3_step), and the statement cache kept
// nothing. That was most of the change feed's read of one changed rule
// (store.BenchmarkChangedSinceOne/sqlite at 1,000 rules: 253-283 µs,
// against 91-130 µs with the cast, interleaved runs on a loaded 2-core
// box), which the reconciler makes after each single write. The plan is the same: SEARCH s USING PRIMARY KEY
// (rule_id=? AND site=?).
const statusJoin = ` LEFT JOIN rule_status s ON s.rule_id = r.id AND s.site = CAST(? AS TEXT)`

// briefCols are the columns of a brief rule (scanBrief): what the
// reconciler works from, without the text, reason, actor, sites and the
// creation and update times. Reading 100,000 rules this way took 746 ms
// against 943 ms with ruleCols (reconcile.BenchmarkFullPass100k read-ms).
const briefCols = `r.id, r.family, r.nlri, r.communities, r.expires_at, r.state, r.withdraw_requested,
	COALESCE(s.announced, FALSE), COALESCE(s.last_error, '')`

// scanBrief reads one row of briefCols.
func scanBrief(rw row) (Rule, error) {
	var r Rule
	if err := newBriefScan(&r).scan(rw); err != nil {
		return Rule{}, err
	}
	return r, nil
}

// briefScan reads rows of briefCols into one Rule, with scan targets made
// once: a walk of a million rows (EachActive) then makes no garbage of
// its own per row beyond what the driver hands over.
type briefScan struct {
	r           *Rule
	fam         int64
	nlri, comms []byte
	expires     dbTime
	state       string
	args        []any
	// The last action decoded, and from what: the rules of a load or a
	// feed mostly share one, and decoding it again (an interned lookup)
	// was a sixth of a read's CPU.
	lastFam   int64
	lastComms []byte
	lastAct   flowspec.Action
	lastOK    bool
}

func newBriefScan(r *Rule) *briefScan {
	b := &briefScan{r: r}
	b.args = []any{&r.ID, &b.fam, &b.nlri, &b.comms, &b.expires, &b.state, &r.WithdrawRequested, &r.Announced, &r.LastError}
	return b
}

// scan reads one row into b.r, overwriting every field a brief rule has;
// the others are left as they were.
func (b *briefScan) scan(rw row) error {
	if err := rw.Scan(b.args...); err != nil {
		return err
	}
	r := b.r
	r.ExpiresAt = b.expires.t
	r.State = State(b.state)
	f := flowspec.Family(b.fam)
	m, n, err := flowspec.DecodeMatch(f, b.nlri)
	if err != nil || n != len(b.nlri) {
		r.Rule = flowspec.Rule{}
		return nil
	}
	if !b.lastOK || b.fam != b.lastFam || !bytes.Equal(b.comms, b.lastComms) {
		a, err := flowspec.DecodeStoredAction(f, b.comms)
		if err != nil {
			r.Rule = flowspec.Rule{}
			return nil
		}
		b.lastFam, b.lastComms, b.lastAct, b.lastOK = b.fam, append(b.lastComms[:0], b.comms...), a, true
	}
	r.Rule = flowspec.Rule{Match: m, Action: b.lastAct}
	return nil
}

// scanRule reads one row of ruleCols.
func scanRule(rw row) (Rule, error) {
	var (
		r                         Rule
		fam                       int64
		nlri, comms               []byte
		sites                     dbText
		created, updated, expires dbTime
		state                     string
	)
	err := rw.Scan(&r.ID, &fam, &nlri, &comms, &r.Text, &r.Reason, &r.Actor, &sites,
		&created, &updated, &expires, &state, &r.WithdrawRequested, &r.Announced, &r.LastError, &r.Origin, &r.Set)
	if err != nil {
		return Rule{}, err
	}
	r.CreatedAt, r.UpdatedAt, r.ExpiresAt = created.t, updated.t, expires.t
	r.State = State(state)
	r.Sites = decodeSites(sites.s)
	r.Rule = decodeRule(flowspec.Family(fam), nlri, comms)
	return r, nil
}

// decodeRule rebuilds a rule from its stored bytes; bytes that no longer
// decode (a corrupted row, a codec change) give the zero Rule.
func decodeRule(f flowspec.Family, nlri, comms []byte) flowspec.Rule {
	m, n, err := flowspec.DecodeMatch(f, nlri)
	if err != nil || n != len(nlri) {
		return flowspec.Rule{}
	}
	a, err := flowspec.DecodeStoredAction(f, comms)
	if err != nil {
		return flowspec.Rule{}
	}
	return flowspec.Rule{Match: m, Action: a}
}

// encoded is a validated Input in stored form.
type encoded struct {
	in      Input
	family  int64
	nlri    []byte
	comms   []byte
	text    string
	sites   []string
	sitesJS string
	dest    string // destinationKey: made here, by the caller, not by the committer
	expires time.Time
}

// encode validates in; index is its position in a batch (-1: none).
func encode(in Input, index int, now time.Time) (encoded, error) {
	return encodeNext(in, index, now, nil)
}

// encodeNext is encode for the input of a batch that follows prev, which
// encoded without error (nil for the first): the reason and actor a
// batch's inputs mostly share are checked once, not once a rule.
func encodeNext(in Input, index int, now time.Time, prev *Input) (encoded, error) {
	bad := func(field, format string, args ...any) error {
		return &InputError{Index: index, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if !in.Rule.IsValid() {
		return encoded{}, bad("rule", "not a valid FlowSpec rule or route: build it with flowspec.Parse")
	}
	sites, err := normSites(in.Sites)
	if err != nil {
		return encoded{}, bad("sites", "%v", err)
	}
	if prev == nil || in.Reason != prev.Reason {
		if err := CheckText(in.Reason, MaxReasonBytes); err != nil {
			return encoded{}, bad("reason", "%v", err)
		}
	}
	if prev == nil || in.Actor != prev.Actor {
		if err := CheckText(in.Actor, MaxActorBytes); err != nil {
			return encoded{}, bad("actor", "%v", err)
		}
	}
	if in.Set != "" {
		if err := CheckSetName(in.Set); err != nil {
			return encoded{}, bad("set", "%v", err)
		}
	}
	exp := normTime(in.ExpiresAt)
	switch {
	case in.TTL < 0:
		return encoded{}, bad("ttl", "%s is not positive: give a positive TTL, or none for a rule that never expires", in.TTL)
	case in.TTL > 0:
		exp = ttlExpiry(in.TTL, now) // refreshed when the transaction runs (encoded.at)
	case !exp.IsZero() && !exp.After(now):
		return encoded{}, bad("expires_at", "%s is not in the future: give a positive TTL, or none for a rule that never expires", exp.Format(time.RFC3339))
	}
	return encoded{
		in:      in,
		family:  int64(in.Rule.Match.Family()),
		nlri:    in.Rule.Match.AppendTo(nil),
		comms:   storedAction(in.Rule.Action),
		text:    in.Rule.String(),
		sites:   sites,
		sitesJS: encodeSites(sites),
		dest:    destinationKey(in.Rule.Match),
		expires: exp,
	}, nil
}

// ttlExpiry is the expiry of a rule stored at now with a relative ttl.
func ttlExpiry(ttl time.Duration, now time.Time) time.Time {
	return normTime(now.Add(ttl))
}

// at sets the expiry of a relative TTL from now, the time of the
// transaction that stores e.
func (e *encoded) at(now time.Time) {
	if e.in.TTL > 0 {
		e.expires = ttlExpiry(e.in.TTL, now)
	}
}

// Limits of the free text a rule carries. A reason says why in a line or
// two (a ticket, a detector's attack summary); 512 bytes leave room for a
// guardrail's note appended to it. Actors are token names, "cli",
// "config"...
const (
	MaxReasonBytes = 512
	MaxActorBytes  = 128
)

// CheckText checks free text that is stored and shown back to operators:
// at most max bytes of valid UTF-8 with only printable characters (no
// control characters such as NUL, ESC or newlines, no bidirectional
// overrides such as U+202E, no other invisible format characters), so
// that printing it can neither move a terminal's cursor nor reorder what
// an operator reads.
func CheckText(s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%d bytes, longer than the %d allowed: shorten it", len(s), max)
	}
	for i, c := range s {
		if c == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n <= 1 {
				return fmt.Errorf("not valid UTF-8 at byte %d: send UTF-8 text", i)
			}
		}
		if !unicode.IsPrint(c) {
			return fmt.Errorf("has the non-printable character %U at byte %d: use printable text on one line", c, i)
		}
	}
	return nil
}

// storedAction is the communities column: the extended communities of a
// FlowSpec action, or a route's next hop and standard communities
// (flowspec.Action.AppendBinary; read back by DecodeStoredAction).
func storedAction(a flowspec.Action) []byte {
	b, _ := a.AppendBinary(nil)
	return b
}

// validSite checks one site name: non-empty, at most 128 bytes, printable,
// no surrounding space.
func validSite(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty site name")
	case len(s) > 128:
		return fmt.Errorf("site name %.20q... longer than 128 bytes", s)
	case strings.TrimSpace(s) != s:
		return fmt.Errorf("site name %q has surrounding spaces", s)
	}
	for _, c := range s {
		if !unicode.IsPrint(c) {
			return fmt.Errorf("site name %q has a non-printable character", s)
		}
	}
	return nil
}

// normSites validates, sorts and deduplicates site names; empty means all.
func normSites(in []string) ([]string, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]string, 0, len(in))
	for i, s := range in {
		if err := validSite(s); err != nil {
			return nil, fmt.Errorf("[%d]: %v", i, err)
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// encodeSites stores sites as a JSON array; "[]" means every site.
func encodeSites(sites []string) string {
	if len(sites) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(sites)
	return string(b)
}

func decodeSites(s string) []string {
	if s == "" || s == "[]" {
		return nil
	}
	var out []string
	if json.Unmarshal([]byte(s), &out) != nil || len(out) == 0 {
		return nil
	}
	return out
}
