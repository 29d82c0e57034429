package store

import (
	"errors"
	"slices"
	"testing"
)

// testSets: a rule carries its set's name (reads, history); a set's write
// does not take another set's rule; a write outside any set leaves the
// rule in its set; EachSetRule and SetCounts read the sets back.
func testSets(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	s := open(t, fresh(t), "a")
	ins := []Input{
		{Rule: rule(t, 1, "discard"), Actor: "feed", Set: "blocklist"},
		{Rule: rule(t, 2, "discard"), Actor: "feed", Set: "blocklist"},
		{Rule: rule(t, 3, "discard"), Actor: "other", Set: "rtbh"},
		{Rule: rule(t, 4, "discard"), Actor: "cli"},
	}
	out, err := s.UpsertMany(ctx, ins)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range out {
		if r.Set != ins[i].Set {
			t.Errorf("rule %d: set %q, want %q", i, r.Set, ins[i].Set)
		}
	}
	got, err := s.Get(ctx, out[0].ID)
	if err != nil || got.Set != "blocklist" {
		t.Fatalf("Get = %+v, %v: want set blocklist", got, err)
	}
	evs, err := s.History(ctx, out[0].ID)
	if err != nil || len(evs) != 1 || evs[0].New["set"] != "blocklist" {
		t.Fatalf("history %+v, %v: want the set in the created event", evs, err)
	}

	// Another set cannot take it, in one write or a batch.
	_, _, err = s.Upsert(ctx, Input{Rule: rule(t, 1, "rate-limit 0"), Actor: "x", Set: "rtbh"})
	var ce *SetConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ErrSetConflict) || ce.ID != out[0].ID || ce.Set != "blocklist" {
		t.Fatalf("Upsert into another set = %v, want a SetConflictError naming blocklist", err)
	}
	if _, err := s.UpsertMany(ctx, []Input{{Rule: rule(t, 5, "discard"), Set: "rtbh"}, {Rule: rule(t, 2, "discard"), Set: "rtbh"}}); !errors.Is(err, ErrSetConflict) {
		t.Fatalf("UpsertMany into another set = %v, want ErrSetConflict", err)
	}
	// A write outside any set keeps the rule in its set; a set adopts a
	// rule of no set.
	r, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "rate-limit 1000"), Actor: "cli"})
	if err != nil || r.Set != "blocklist" {
		t.Fatalf("Upsert without a set = %+v, %v: want it kept in blocklist", r, err)
	}
	r, _, err = s.Upsert(ctx, Input{Rule: rule(t, 4, "discard"), Actor: "feed", Set: "blocklist"})
	if err != nil || r.Set != "blocklist" {
		t.Fatalf("set write of a rule of no set = %+v, %v: want it in blocklist", r, err)
	}
	if evs, err := s.History(ctx, r.ID); err != nil || evs[len(evs)-1].New["set"] != "blocklist" {
		t.Fatalf("history %+v, %v: want the set change recorded", evs, err)
	}
	if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, 6, "discard"), Set: "no spaces"}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("bad set name = %v, want ErrInvalidInput", err)
	}

	var ids []int64
	err = s.EachSetRule(ctx, "blocklist", func(m SetMember) error {
		ids = append(ids, m.ID)
		if m.Actor == "" || !m.Rule.IsValid() {
			t.Errorf("member %+v: want its rule and actor", m)
		}
		return nil
	})
	want := []int64{out[0].ID, out[1].ID, out[3].ID}
	if err != nil || !slices.Equal(ids, want) {
		t.Fatalf("EachSetRule = %v, %v; want %v", ids, err, want)
	}
	if _, err := s.Withdraw(ctx, out[1].ID, "cli"); err != nil {
		t.Fatal(err)
	}
	counts, err := s.SetCounts(ctx)
	wantCounts := []SetCount{{"blocklist", "cli", 1}, {"blocklist", "feed", 1}, {"rtbh", "other", 1}}
	if err != nil || !slices.Equal(counts, wantCounts) {
		t.Fatalf("SetCounts = %+v, %v; want %+v", counts, err, wantCounts)
	}
	page, err := s.ListPage(ctx, Page{State: Active, Set: "rtbh", Limit: 10})
	if err != nil || len(page) != 1 || page[0].ID != out[2].ID {
		t.Fatalf("ListPage of set rtbh = %+v, %v", page, err)
	}
}
