package admit_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/store"
	"github.com/ribkeeper/ribkeeper/store/pgtest"
)

// countingStore is a real store that counts the calls that write.
type countingStore struct {
	*store.Store
	writes atomic.Int64
}

func (c *countingStore) Upsert(ctx context.Context, in store.Input) (store.Rule, bool, error) {
	c.writes.Add(1)
	return c.Store.Upsert(ctx, in)
}

func (c *countingStore) UpsertMany(ctx context.Context, ins []store.Input) ([]store.Rule, error) {
	c.writes.Add(1)
	return c.Store.UpsertMany(ctx, ins)
}

func (c *countingStore) Withdraw(ctx context.Context, id int64, actor string) (store.Rule, error) {
	c.writes.Add(1)
	return c.Store.Withdraw(ctx, id, actor)
}

func (c *countingStore) WithdrawMany(ctx context.Context, items []store.WithdrawItem, actor string) ([]store.Rule, error) {
	c.writes.Add(1)
	return c.Store.WithdrawMany(ctx, items, actor)
}

// setTexts returns the texts of the active rules of set name (withdrawals
// in progress excluded), sorted.
func setTexts(t *testing.T, st *store.Store, name string) []string {
	t.Helper()
	var out []string
	err := st.EachSetRule(context.Background(), name, func(m store.SetMember) error {
		if !m.WithdrawRequested {
			out = append(out, m.Rule.String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func reqs(texts ...string) []admit.Request {
	out := make([]admit.Request, len(texts))
	for i, s := range texts {
		out[i] = admit.Request{Text: s}
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// historyRows counts the history of every rule of the store.
func historyRows(t *testing.T, st *store.Store) int {
	t.Helper()
	ctx := context.Background()
	rules, err := st.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range rules {
		evs, err := st.History(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		n += len(evs)
	}
	return n
}

// A set is exactly the list given: a changed action is an update, a
// removed line a withdrawal, a new line an addition, and only that
// difference is written; applying the same list again writes nothing (no
// store write, no history row, no change signal: nothing to announce).
func TestSetIsExactlyTheGivenList(t *testing.T) { testSetExact(t, openStore(t, nil)) }

// The same on PostgreSQL.
func TestSetIsExactlyTheGivenListPostgres(t *testing.T) {
	st, err := store.Open(context.Background(), store.Config{Driver: "postgres", DSN: pgtest.Start(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	testSetExact(t, st)
}

func testSetExact(t *testing.T, s *store.Store) {
	ctx := context.Background()
	st := &countingStore{Store: s}
	var changed atomic.Int64
	g := admit.New(admit.Config{Store: st, Changed: func() { changed.Add(1) }})

	first := []string{
		"route 203.0.113.1/32 then blackhole",
		"route 203.0.113.2/32 then blackhole",
		"match destination 203.0.113.3/32 then discard",
		"match destination 203.0.113.4/32 then rate-limit 1000",
	}
	res, err := g.ApplySet(ctx, noc, "feed", reqs(first...))
	if err != nil {
		t.Fatal(err)
	}
	if res.Created != 4 || res.Rules != 4 || res.Withdrawn != 0 || res.Updated != 0 {
		t.Errorf("first apply: %+v, want 4 created", res)
	}
	if got := setTexts(t, st.Store, "feed"); !slices.Equal(got, sorted(first)) {
		t.Fatalf("set holds %v, want %v", got, sorted(first))
	}
	r, err := st.List(ctx, store.Active)
	if err != nil || len(r) != 4 || r[0].Set != "feed" {
		t.Fatalf("rules %+v, %v: want 4 carrying their set", r, err)
	}

	// The same list, in another order: nothing written.
	writes, hist, signals := st.writes.Load(), historyRows(t, st.Store), changed.Load()
	rev, err := st.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	shuffled := []string{first[2], first[0], first[3], first[1], first[0]} // a repeat counts once
	res, err = g.ApplySet(ctx, noc, "feed", reqs(shuffled...))
	if err != nil {
		t.Fatal(err)
	}
	if res.Unchanged != 4 || res.Written() {
		t.Errorf("unchanged re-apply: %+v, want 4 unchanged and nothing written", res)
	}
	rev2, _ := st.Revision(ctx)
	if st.writes.Load() != writes || historyRows(t, st.Store) != hist || changed.Load() != signals || rev2 != rev {
		t.Fatalf("unchanged re-apply wrote: store writes %d→%d, history rows %d→%d, change signals %d→%d, revision %d→%d",
			writes, st.writes.Load(), hist, historyRows(t, st.Store), signals, changed.Load(), rev, rev2)
	}

	// One action changed, one line removed, one added.
	second := []string{
		"route 203.0.113.1/32 then blackhole",
		"match destination 203.0.113.3/32 then rate-limit 5000",
		"match destination 203.0.113.4/32 then rate-limit 1000",
		"route 203.0.113.5/32 then blackhole",
	}
	hist = historyRows(t, st.Store)
	res, err = g.ApplySet(ctx, noc, "feed", reqs(second...))
	if err != nil {
		t.Fatal(err)
	}
	if res.Created != 1 || res.Updated != 1 || res.Withdrawn != 1 || res.Unchanged != 2 {
		t.Errorf("second apply: %+v, want 1 created, 1 updated, 1 withdrawn, 2 unchanged", res)
	}
	if got := setTexts(t, st.Store, "feed"); !slices.Equal(got, sorted(second)) {
		t.Fatalf("set holds %v, want %v", got, sorted(second))
	}
	if d := historyRows(t, st.Store) - hist; d != 3 {
		t.Errorf("second apply recorded %d history rows, want 3 (one per rule changed)", d)
	}

	// A rule of no set joins the set; a write outside the set leaves it
	// there, and the next apply puts back what the set says.
	if _, _, err := g.Add(ctx, noc, req("route 203.0.113.9/32 then blackhole")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.Add(ctx, noc, req("match destination 203.0.113.4/32 then discard")); err != nil {
		t.Fatal(err)
	}
	res, err = g.ApplySet(ctx, noc, "feed", reqs(append(second, "route 203.0.113.9/32 then blackhole")...))
	if err != nil || res.Updated != 2 || res.Created != 0 {
		t.Fatalf("apply over a rule of no set and a changed rule: %+v, %v; want 2 updated", res, err)
	}
	if got, want := setTexts(t, st.Store, "feed"), sorted(append(second, "route 203.0.113.9/32 then blackhole")); !slices.Equal(got, want) {
		t.Fatalf("set holds %v, want %v", got, want)
	}

	// DELETE withdraws it all.
	res, err = g.WithdrawSet(ctx, noc, "feed")
	if err != nil || res.Withdrawn != 5 {
		t.Fatalf("WithdrawSet: %+v, %v; want 5 withdrawn", res, err)
	}
	if got := setTexts(t, st.Store, "feed"); len(got) != 0 {
		t.Fatalf("after WithdrawSet the set holds %v", got)
	}
	if res, err := g.WithdrawSet(ctx, noc, "feed"); err != nil || res.Withdrawn != 0 {
		t.Fatalf("WithdrawSet again: %+v, %v; want nothing to do", res, err)
	}
}

// A set that breaks a guardrail, does not parse, or would take another
// set's rule is refused whole, naming its first line at fault, and
// nothing changes.
func TestSetRefusedWholeChangesNothing(t *testing.T) {
	ctx := context.Background()
	st := &countingStore{Store: openStore(t, nil)}
	g := admit.New(admit.Config{Store: st, Guardrails: config.Guardrails{MaxActiveRules: 5}})
	base := []string{"route 203.0.113.1/32 then blackhole", "route 203.0.113.2/32 then blackhole"}
	if _, err := g.ApplySet(ctx, noc, "feed", reqs(base...)); err != nil {
		t.Fatal(err)
	}
	if _, err := g.ApplySet(ctx, noc, "other", reqs("route 203.0.113.50/32 then blackhole")); err != nil {
		t.Fatal(err)
	}
	writes, hist := st.writes.Load(), historyRows(t, st.Store)
	cases := []struct {
		name  string
		lines []string
		kind  admit.Kind
		index int
		msg   string
	}{
		{"prefix length", []string{"route 203.0.113.3/32 then blackhole", "route 203.0.113.1/32 then blackhole", "route 203.0.113.0/24 then blackhole"},
			admit.KindGuardrail, 2, "prefix_lengths"},
		{"parse", []string{"route 203.0.113.3/32 then blackhole", "match destination 203.0.113.4/32 then discrad"},
			admit.KindInvalidRule, 1, "discrad"},
		{"quota", []string{"route 203.0.113.1/32 then blackhole", "route 203.0.113.3/32 then blackhole", "route 203.0.113.4/32 then blackhole",
			"route 203.0.113.5/32 then blackhole"}, admit.KindGuardrail, 3, "max_active_rules"},
		{"another set's rule", []string{"route 203.0.113.3/32 then blackhole", "route 203.0.113.50/32 then blackhole"},
			admit.KindSetConflict, 1, `belongs to set "other"`},
		{"the same match twice", []string{"route 203.0.113.3/32 then blackhole", "match destination 203.0.113.9/32 then discard",
			"match destination 203.0.113.9/32 then rate-limit 10"}, admit.KindInvalidInput, 2, "same match"},
	}
	for _, c := range cases {
		_, err := g.ApplySet(ctx, noc, "feed", reqs(c.lines...))
		ref := wantRefusal(t, c.name, err, c.kind, "text", c.msg)
		if ref.Index != c.index {
			t.Errorf("%s: refusal at rules[%d], want rules[%d]", c.name, ref.Index, c.index)
		}
	}
	if got := setTexts(t, st.Store, "feed"); !slices.Equal(got, sorted(base)) {
		t.Errorf("refused sets changed the set to %v", got)
	}
	if st.writes.Load() != writes || historyRows(t, st.Store) != hist {
		t.Errorf("refused sets wrote: store writes %d→%d, history rows %d→%d", writes, st.writes.Load(), hist, historyRows(t, st.Store))
	}
	_, err := g.ApplySet(ctx, noc, "bad name", reqs(base...))
	wantRefusal(t, "set name", err, admit.KindInvalidInput, "set", "letters, digits")
	// Without quotas the set is checked a chunk at a time: a refusal in
	// a later chunk still refuses it whole, naming its line.
	chunked := admit.New(admit.Config{Store: st, SetChunk: 1})
	_, err = chunked.ApplySet(ctx, noc, "feed", reqs(cases[0].lines...))
	if ref := wantRefusal(t, "prefix length, in chunks", err, admit.KindGuardrail, "text", "prefix_lengths"); ref.Index != 2 {
		t.Errorf("chunked refusal at rules[%d], want rules[2]", ref.Index)
	}
	if got := setTexts(t, st.Store, "feed"); !slices.Equal(got, sorted(base)) || st.writes.Load() != writes {
		t.Errorf("a set refused in its second chunk changed the set to %v (store writes %d→%d)", got, writes, st.writes.Load())
	}
	strict := admit.New(admit.Config{Store: st, Guardrails: config.Guardrails{RequireTTL: true}})
	_, err = strict.ApplySet(ctx, noc, "strict", reqs("route 203.0.113.20/32 then blackhole"))
	wantRefusal(t, "require_ttl", err, admit.KindGuardrail, "ttl", "require_ttl")
	small := admit.New(admit.Config{Store: st, Limits: admit.Limits{MaxSetRules: 2}})
	_, err = small.ApplySet(ctx, noc, "feed", reqs(append(base, "route 203.0.113.7/32 then blackhole")...))
	wantRefusal(t, "max_set_rules", err, admit.KindTooLarge, "rules", "[limits] max_set_rules")
}

// A set is owned by its writer: a scoped token's scope applies to every
// line, and it applies or deletes only its own sets.
func TestSetScope(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, nil)
	g := admit.New(admit.Config{Store: st})
	cust.Scope.MaxNewPerMinute = -1
	defer func() { cust.Scope.MaxNewPerMinute = 0 }()

	_, err := g.ApplySet(ctx, cust, "mine", reqs("route 198.51.100.1/32 then blackhole", "route 203.0.113.1/32 then blackhole"))
	if ref := wantRefusal(t, "a line outside the prefixes", err, admit.KindForbidden, "text", "outside them"); ref.Index != 1 {
		t.Errorf("refusal at rules[%d], want rules[1]", ref.Index)
	}
	_, err = g.ApplySet(ctx, cust, "mine", reqs("match destination 198.51.100.1/32 then discard"))
	wantRefusal(t, "an action outside the scope", err, admit.KindForbidden, "text", "may not use action discard")
	if _, err := g.ApplySet(ctx, cust, "mine", reqs("route 198.51.100.1/32 then blackhole", "route 198.51.100.2/32 then blackhole")); err != nil {
		t.Fatal(err)
	}
	if _, err := g.ApplySet(ctx, noc, "noc", reqs("route 203.0.113.1/32 then blackhole")); err != nil {
		t.Fatal(err)
	}
	_, err = g.ApplySet(ctx, cust, "noc", reqs("route 198.51.100.3/32 then blackhole"))
	ref := wantRefusal(t, "another writer's set", err, admit.KindForbidden, "set", "another writer")
	if slices.Contains([]string{ref.Msg}, "203.0.113") {
		t.Errorf("refusal %q names another scope's rule", ref.Msg)
	}
	_, err = g.WithdrawSet(ctx, cust, "noc")
	wantRefusal(t, "deleting another writer's set", err, admit.KindForbidden, "set")
	other := admit.Actor{Name: "other", Source: admit.SourceTCP, Scope: cust.Scope}
	_, err = g.WithdrawSet(ctx, other, "mine")
	wantRefusal(t, "deleting another token's set in the same scope", err, admit.KindForbidden, "set", `written by "cust"`)
	if got := setTexts(t, st, "noc"); len(got) != 1 {
		t.Errorf("set noc holds %v after refused writes", got)
	}
	if res, err := g.WithdrawSet(ctx, cust, "mine"); err != nil || res.Withdrawn != 2 {
		t.Errorf("deleting its own set: %+v, %v", res, err)
	}
	_, err = g.ApplySet(ctx, admit.Actor{Name: "reader", ReadOnly: true}, "x", reqs("route 203.0.113.1/32 then blackhole"))
	wantRefusal(t, "a read-only actor", err, admit.KindForbidden, "")
}

// Two sets applied concurrently, round after round, with single writes
// of other rules in between: each set ends exactly as its last apply
// said, and every single write is there.
func TestSetsConcurrentWithSingleWrites(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, nil)
	// Chunks of 7 rules: the single writes go between them.
	g := admit.New(admit.Config{Store: st, SetChunk: 7})
	const rounds = 6
	list := func(set, round int) []string {
		var out []string
		for i := range 40 {
			if (i+round)%3 == 0 {
				continue // a different third of the lines each round
			}
			action := "discard"
			if round%2 == 1 && i%5 == 0 {
				action = "rate-limit 1000"
			}
			out = append(out, fmt.Sprintf("match destination 10.%d.%d.%d/32 then %s", set, round%2, i, action))
		}
		return out
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for set := 1; set <= 2; set++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range rounds {
				if _, err := g.ApplySet(ctx, noc, fmt.Sprintf("set%d", set), reqs(list(set, round)...)); err != nil {
					errs <- fmt.Errorf("set%d round %d: %w", set, round, err)
					return
				}
			}
		}()
	}
	// Two writers of one set: it ends as one of their last lists, never
	// a mix of both.
	for set := 3; set <= 4; set++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range rounds {
				if _, err := g.ApplySet(ctx, noc, "shared", reqs(list(set, round)...)); err != nil {
					errs <- fmt.Errorf("shared from %d, round %d: %w", set, round, err)
					return
				}
			}
		}()
	}
	var singles []string
	for i := range 20 {
		singles = append(singles, fmt.Sprintf("route 192.0.2.%d/32 then blackhole", i))
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, s := range singles {
			if _, _, err := g.Add(ctx, noc, req(s)); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for set := 1; set <= 2; set++ {
		if got, want := setTexts(t, st, fmt.Sprintf("set%d", set)), sorted(list(set, rounds-1)); !slices.Equal(got, want) {
			t.Errorf("set%d holds %d rules %v\nwant %d %v", set, len(got), got, len(want), want)
		}
	}
	if got := setTexts(t, st, "shared"); !slices.Equal(got, sorted(list(3, rounds-1))) && !slices.Equal(got, sorted(list(4, rounds-1))) {
		t.Errorf("set shared holds %d rules %v\nwant exactly the last list of one of its writers", len(got), got)
	}
	active, err := st.List(ctx, store.Active)
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, r := range active {
		if r.Set == "" && !r.WithdrawRequested {
			live = append(live, r.Text)
		}
	}
	if slices.Sort(live); !slices.Equal(live, sorted(singles)) {
		t.Errorf("single writes: %v, want %v", live, sorted(singles))
	}
}
