package store

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// undoDestination takes migration 5 back out of s's database, so that
// reopening runs it again.
func undoDestination(t *testing.T, s *Store) {
	t.Helper()
	ctx := ctxT(t)
	w := s.eng.reader()
	// Migration 7 (sets) is taken out too: it runs again after 5.
	for _, q := range []string{
		`DROP INDEX rules_active_set`,
		`ALTER TABLE rules DROP COLUMN set_name`,
		`DROP INDEX rules_active_destination`,
		`DROP INDEX rules_active_actor`,
		`ALTER TABLE rules DROP COLUMN destination`,
		`DELETE FROM schema_migrations WHERE version >= 5`, // 5 and the later ones run again
	} {
		if _, err := w.exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func parseRule(t *testing.T, text string) flowspec.Rule {
	t.Helper()
	r, err := flowspec.Parse(text)
	if err != nil {
		t.Fatalf("flowspec.Parse(%q): %v", text, err)
	}
	return r
}

func testQuotaCounts(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	cfg := fresh(t)
	s := open(t, cfg, "a")
	exp := time.Now().Add(time.Hour)
	texts := []struct{ text, actor string }{
		{"match destination 192.0.2.0/24 protocol udp then discard", "alice"},
		{"match destination 192.0.2.0/24 protocol tcp then discard", "alice"},
		{"match destination 192.0.2.7/32 then discard", "bob"},
		{"match destination 2001:db8::/32 then discard", "alice"},
		{"match protocol gre then discard", "bob"},
		{"route 198.51.100.9/32 then blackhole", "alice"},
		{"match destination 192.0.2.0/24 protocol icmp then discard", "alice"}, // withdrawn below
	}
	var stored []Rule
	for _, x := range texts {
		r, _, err := s.Upsert(ctx, Input{Rule: parseRule(t, x.text), Actor: x.actor, ExpiresAt: exp})
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, r)
	}
	if _, err := s.Withdraw(ctx, stored[6].ID, "alice"); err != nil {
		t.Fatal(err)
	}
	p24 := netip.MustParsePrefix("192.0.2.0/24")
	p32 := netip.MustParsePrefix("192.0.2.7/32")
	v6 := netip.MustParsePrefix("2001:db8::/32")
	rt := netip.MustParsePrefix("198.51.100.9/32")
	none := netip.MustParsePrefix("203.0.113.0/24")
	unknown := parseRule(t, "match destination 203.0.113.1/32 then discard").Match
	q := QuotaQuery{Total: true, Actor: "alice", Destinations: []netip.Prefix{p24, p32, v6, rt, none},
		Matches: []flowspec.Match{stored[0].Rule.Match, stored[2].Rule.Match, stored[5].Rule.Match, stored[6].Rule.Match, unknown}}
	check := func(when string) {
		t.Helper()
		got, err := s.QuotaCounts(ctx, q)
		if err != nil {
			t.Fatalf("%s: QuotaCounts: %v", when, err)
		}
		if got.Active != 6 || got.ByActor != 4 {
			t.Errorf("%s: active %d, by alice %d; want 6 and 4 (a rule on its way out counts as gone)", when, got.Active, got.ByActor)
		}
		// Without Total the count of every active rule is not read.
		q2 := q
		q2.Total = false
		if got2, err := s.QuotaCounts(ctx, q2); err != nil || got2.Active != 0 || got2.ByActor != 4 {
			t.Errorf("%s: without Total: active %d, by alice %d, %v; want 0 (not counted) and 4", when, got2.Active, got2.ByActor, err)
		}
		for p, want := range map[netip.Prefix]int{p24: 2, p32: 1, v6: 1, rt: 1, none: 0} {
			if got.ByDestination[p] != want {
				t.Errorf("%s: destination %s: %d rules, want %d", when, p, got.ByDestination[p], want)
			}
		}
		if len(got.Existing) != 3 {
			t.Errorf("%s: existing %v, want rules %d, %d, %d", when, got.Existing, stored[0].ID, stored[2].ID, stored[5].ID)
		}
		for _, i := range []int{0, 2, 5} {
			e, ok := got.Existing[stored[i].Rule.Match]
			if !ok || e.ID != stored[i].ID || e.Actor != texts[i].actor || !e.ExpiresAt.Equal(stored[i].ExpiresAt) {
				t.Errorf("%s: existing %s = %+v, %v; want rule %d by %s", when, stored[i].Text, e, ok, stored[i].ID, texts[i].actor)
			}
		}
	}
	check("fresh")
	// Rules stored before migration 5 get their destination from it.
	undoDestination(t, s)
	s.Close()
	s = open(t, cfg, "a")
	check("after migration 5 ran over stored rules")
}

func testWithdrawMany(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	s := open(t, fresh(t), "a")
	var want []int64
	for i := range 3 {
		r, _, err := s.Upsert(ctx, Input{Rule: rule(t, i, "discard"), Reason: "ddos", Actor: "cli"})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, r.ID)
	}
	if _, err := s.Withdraw(ctx, want[2], "cli"); err != nil {
		t.Fatal(err)
	}
	// An unknown id fails the whole call: nothing changes.
	if _, err := s.WithdrawMany(ctx, []WithdrawItem{{ID: want[0], Reason: "x"}, {ID: 999999}}, "guardrail"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("WithdrawMany with an unknown id: %v, want ErrNotFound", err)
	}
	if r, _ := s.Get(ctx, want[0]); r.WithdrawRequested || r.Reason != "ddos" {
		t.Fatalf("a failed WithdrawMany changed rule %d: %+v", want[0], r)
	}
	got, err := s.WithdrawMany(ctx, []WithdrawItem{{ID: want[0], Reason: "ddos [withdrawn by guardrail safelist]"}, {ID: want[1]}, {ID: want[2], Reason: "late"}}, "guardrail")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != want[0] || got[1].ID != want[1] {
		t.Fatalf("WithdrawMany returned %v, want rules %d and %d (rule %d was already on its way out)", ids(got), want[0], want[1], want[2])
	}
	for i, reason := range []string{"ddos [withdrawn by guardrail safelist]", "ddos", "ddos"} {
		r, err := s.Get(ctx, want[i])
		if err != nil || !r.WithdrawRequested || r.Reason != reason {
			t.Errorf("rule %d after WithdrawMany: %+v, %v; want withdraw requested, reason %q", want[i], r, err, reason)
		}
	}
	// A rule changed since the caller read it is left alone.
	r, _, err := s.Upsert(ctx, Input{Rule: rule(t, 7, "discard"), Actor: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	read := r.UpdatedAt
	if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, 7, "discard"), Reason: "changed", Actor: "cli"}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.WithdrawMany(ctx, []WithdrawItem{{ID: r.ID, UpdatedAt: read}}, "guardrail"); err != nil || len(got) != 0 {
		t.Errorf("WithdrawMany of a rule changed since it was read: %v, %v; want nothing withdrawn", ids(got), err)
	}
	now, _ := s.Get(ctx, r.ID)
	if got, err := s.WithdrawMany(ctx, []WithdrawItem{{ID: r.ID, UpdatedAt: now.UpdatedAt}}, "guardrail"); err != nil || len(got) != 1 {
		t.Errorf("WithdrawMany of a rule as read: %v, %v; want it withdrawn", ids(got), err)
	}
	h, err := s.History(ctx, want[0])
	if err != nil || len(h) != 2 || h[1].Kind != EventWithdrawRequested || h[1].Actor != "guardrail" || h[1].New["reason"] == "" {
		t.Fatalf("history of rule %d: %+v, %v; want one withdraw_requested event by guardrail with the reason", want[0], h, err)
	}
}
