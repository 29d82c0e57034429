package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSQLiteCreatesDataDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "rules.db")
	s := open(t, Config{Path: path}, "")
	if s.Site() != DefaultSite {
		t.Errorf("site %q, want %q", s.Site(), DefaultSite)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := s.eng.reader().queryRow(ctxT(t), "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode %q, %v", mode, err)
	}
}

func TestSQLiteOpenErrorsSayWhatToDo(t *testing.T) {
	dir := t.TempDir()
	notDB := filepath.Join(dir, "not.db")
	os.WriteFile(notDB, []byte(strings.Repeat("this is not a database\n", 100)), 0o600)
	_, err := Open(ctxT(t), Config{Path: notDB})
	if err == nil || !strings.Contains(err.Error(), notDB) {
		t.Fatalf("Open(not a database) = %v", err)
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	_, err = Open(ctxT(t), Config{Path: filepath.Join(file, "x.db")})
	if err == nil || !strings.Contains(err.Error(), "create data directory") {
		t.Fatalf("Open(under a file) = %v", err)
	}
	if _, err := Open(ctxT(t), Config{Driver: "mysql"}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("Open(mysql) = %v", err)
	}
}

// A second process (here: a second Store) reopening the file sees every
// acknowledged write.
func TestSQLiteReopenKeepsRules(t *testing.T) {
	cfg := sqliteFresh(t)
	s := open(t, cfg, "a")
	r, _, err := s.Upsert(ctxT(t), Input{Rule: rule(t, 1, "discard"), Reason: "kept"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := open(t, cfg, "a")
	g, err := s2.Get(ctxT(t), r.ID)
	if err != nil || !equalRule(g, r) {
		t.Fatalf("after reopen: %+v, %v\nwant %+v", g, err, r)
	}
}

// The lookups of a batch's Matches go through the index of active
// Matches whatever the batch's size: without statistics SQLite's planner
// chose rules_state for a 500-value IN list and read every active rule
// per lookup, so batch writes slowed as the table grew (8k rules/s at
// 100k rules, from 60 ms per 500-rule lookup). A set's rules are read
// through the index of set members, not by a scan of every active rule.
func TestSQLiteLookupsUseTheirIndex(t *testing.T) {
	s := open(t, sqliteFresh(t), "a")
	plan := func(q string, args ...any) string {
		t.Helper()
		rs, err := s.eng.reader().query(ctxT(t), "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatalf("explain %s: %v", q, err)
		}
		defer rs.Close()
		var out []string
		for rs.Next() {
			var (
				id, parent, unused int64
				detail             string
			)
			if err := rs.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			out = append(out, detail)
		}
		return strings.Join(out, "; ")
	}
	for _, n := range []int{1, 2, lookupChunk} {
		args := []any{int64(1)}
		for i := range n {
			args = append(args, []byte{byte(i), byte(i >> 8)})
		}
		for _, q := range []string{
			s.matchLookup("nlri", "", n),
			s.matchLookup("id, nlri, actor, expires_at, communities, origin, set_name", " AND NOT withdraw_requested", n),
		} {
			if p := plan(q, args...); !strings.Contains(p, "rules_active_match") {
				t.Errorf("lookup of %d Matches: plan %q, want the index rules_active_match", n, p)
			}
		}
	}
	if p := plan(s.setRulesQuery(), "feed"); !strings.Contains(p, "rules_active_set") {
		t.Errorf("set read: plan %q, want the index rules_active_set", p)
	}
}

// The multi-row insert of a batch's rules (sqliteTx.insertRules) gives
// each row its own id and reports the rows whose Match was active, or
// listed earlier in the same statement, as not inserted, wherever they
// sit in a statement of many rows; the statements without a skipped row
// take their ids from the sequence. Each row holds its own values,
// whether its statement names the values its rows share once (the first
// and last chunks) or not (the second: a reason of its own for each row).
func TestSQLiteInsertRulesMapsEachRow(t *testing.T) {
	ctx := ctxT(t)
	s := open(t, sqliteFresh(t), "a")
	// Two rules already active: the 3rd and the 70th input below (the
	// second chunk of rows).
	for _, i := range []int{2, 69} {
		if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, i, "discard"), Actor: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	const n = 100  // a chunk of insertRulesRows, then 32 and 4
	const dup = 50 // the Match of row 10 again, in the same statement
	match := func(i int) int {
		if i == dup {
			return 10
		}
		return i
	}
	reason := func(i int) string {
		if i >= insertRulesRows && i < insertRulesRows+32 {
			return fmt.Sprintf("reason %d", i)
		}
		return "shared"
	}
	action := func(i int) string {
		if i%2 == 0 {
			return "discard"
		}
		return "rate-limit 1000"
	}
	now := s.now()
	args := make([][]any, n)
	for i := range args {
		e, err := encode(Input{Rule: rule(t, match(i), action(match(i))), Actor: "t", Reason: reason(i)}, i, now)
		if err != nil {
			t.Fatal(err)
		}
		args[i] = s.insertArgs(&e, now)
	}
	var ids []int64
	var ok []bool
	err := s.write(ctx, "test insert", n, func(ctx context.Context, w *wtx) (bool, error) {
		var err error
		ids, ok, err = w.tx.(*sqliteTx).insertRules(ctx, args)
		return true, err
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for i := range n {
		if active := i == 2 || i == 69 || i == dup; ok[i] == active {
			t.Fatalf("row %d: inserted %v, want %v", i, ok[i], !active)
		}
		if !ok[i] {
			continue
		}
		if seen[ids[i]] {
			t.Fatalf("row %d: id %d given twice", i, ids[i])
		}
		seen[ids[i]] = true
		r, err := s.Get(ctx, ids[i])
		if err != nil {
			t.Fatal(err)
		}
		want := rule(t, match(i), action(match(i)))
		if r.Rule != want || r.Text != want.String() || r.Reason != reason(i) || r.Actor != "t" || !r.CreatedAt.Equal(now) {
			t.Fatalf("row %d got id %d, which holds %s (%q, reason %q, actor %q, created %s), not %s (reason %q, actor t, created %s)",
				i, ids[i], r.Rule, r.Text, r.Reason, r.Actor, r.CreatedAt, want, reason(i), now)
		}
		var dest string
		if err := s.eng.reader().queryRow(ctx, `SELECT destination FROM rules WHERE id = ?`, ids[i]).Scan(&dest); err != nil {
			t.Fatal(err)
		}
		if want := destinationKey(want.Match); dest != want {
			t.Fatalf("row %d: destination %q, want %q", i, dest, want)
		}
	}
}

// A range of created entries (createdRange) is written in its place
// among the transaction's other entries, one entry a rule, in id order,
// each with its rule's creation time and actor, as created writes them.
func TestSQLiteCreatedRangeInOrder(t *testing.T) {
	ctx := ctxT(t)
	s := open(t, sqliteFresh(t), "a")
	old, _, err := s.Upsert(ctx, Input{Rule: rule(t, 0, "discard"), Actor: "first"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	now := s.now()
	args := make([][]any, n)
	for i := range args {
		e, err := encode(Input{Rule: rule(t, i+1, "discard"), Actor: fmt.Sprintf("actor%d", i)}, i, now)
		if err != nil {
			t.Fatal(err)
		}
		args[i] = s.insertArgs(&e, now)
	}
	var ids []int64
	err = s.write(ctx, "test range", n, func(ctx context.Context, w *wtx) (bool, error) {
		w.event(old.ID, now, EventWithdrawRequested, "before", "", nil, nil)
		var err error
		if ids, _, err = w.tx.(*sqliteTx).insertRules(ctx, args); err != nil {
			return false, err
		}
		w.createdRange(ids[0], ids[n-1])
		w.event(old.ID, now, EventUpdated, "after", "", nil, nil)
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := s.eng.reader().query(ctx, `SELECT rule_id, at, kind, actor FROM rule_events WHERE rule_id <> ? OR actor <> 'first' ORDER BY id`, old.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	type entry struct {
		rule  int64
		at    int64
		kind  string
		actor string
	}
	var got []entry
	for rs.Next() {
		var e entry
		if err := rs.Scan(&e.rule, &e.at, &e.kind, &e.actor); err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	want := []entry{{old.ID, now.UnixMicro(), string(EventWithdrawRequested), "before"}}
	for i, id := range ids {
		want = append(want, entry{id, now.UnixMicro(), string(EventCreated), fmt.Sprintf("actor%d", i)})
	}
	want = append(want, entry{old.ID, now.UnixMicro(), string(EventUpdated), "after"})
	if !slices.Equal(got, want) {
		t.Fatalf("history entries\n got %v\nwant %v", got, want)
	}
}

// The committer's connection keeps its statements from one transaction
// to the next: a write like the last one prepares nothing (a batch's
// statements of many rows cost a millisecond each to prepare).
func TestSQLiteCommitterKeepsStatements(t *testing.T) {
	ctx := ctxT(t)
	s := open(t, sqliteFresh(t), "a")
	batch := func(from int) {
		t.Helper()
		var ins []Input
		for i := from; i < from+100; i++ {
			ins = append(ins, Input{Rule: rule(t, i, "discard"), Actor: "t"})
		}
		if _, err := s.UpsertMany(ctx, ins); err != nil {
			t.Fatal(err)
		}
	}
	batch(0)
	before := s.group.ss.prepares
	batch(100)
	if n := s.group.ss.prepares - before; n != 0 {
		t.Fatalf("a second batch like the first prepared %d statements again", n)
	}
}
