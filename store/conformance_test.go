package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/flowspec"
)

// testConformance is the one behaviour suite both engines must pass.
func testConformance(t *testing.T, fresh freshFunc) {
	t.Run("UpsertCreatesThenUpdatesInPlace", func(t *testing.T) { testUpsert(t, fresh) })
	t.Run("UpsertManyAllOrNothing", func(t *testing.T) { testUpsertMany(t, fresh) })
	t.Run("InvalidInput", func(t *testing.T) { testInvalid(t, fresh) })
	t.Run("WithdrawThenFinish", func(t *testing.T) { testWithdraw(t, fresh) })
	t.Run("WithdrawSeenOnlyIfUnchanged", func(t *testing.T) { testWithdrawSeen(t, fresh) })
	t.Run("EarlyWritesRecordTheirOutcome", func(t *testing.T) { testEarlyOutcome(t, fresh) })
	t.Run("NewRowAfterFinish", func(t *testing.T) { testNewRowAfterFinish(t, fresh) })
	t.Run("FinishManyPerItem", func(t *testing.T) { testFinishMany(t, fresh) })
	t.Run("FinishClearsThisSitesAnnounced", func(t *testing.T) { testFinishClearsAnnounced(t, fresh) })
	t.Run("ExpiryFromTwoInstances", func(t *testing.T) { testExpiry(t, fresh) })
	t.Run("ConcurrentUpsertsOfOneMatch", func(t *testing.T) { testConcurrentUpsert(t, fresh) })
	t.Run("Sites", func(t *testing.T) { testSites(t, fresh) })
	t.Run("History", func(t *testing.T) { testHistory(t, fresh) })
	t.Run("CreatedEntryRebuilt", func(t *testing.T) { testCreatedRebuilt(t, fresh) })
	t.Run("PurgeKeepsLaterEntries", func(t *testing.T) { testPurgeByID(t, fresh) })
	t.Run("ChangesAfterWrites", func(t *testing.T) { testChanges(t, fresh) })
	t.Run("MigrationsConcurrentOpens", func(t *testing.T) { testMigrations(t, fresh) })
	t.Run("ReencodeFromText", func(t *testing.T) { testReencode(t, fresh) })
	t.Run("EveryActionRoundTrips", func(t *testing.T) { testActionsRoundTrip(t, fresh) })
	t.Run("CountsMatchList", func(t *testing.T) { testCounts(t, fresh) })
	t.Run("RevisionsMissNothingUnderConcurrentWrites", func(t *testing.T) { testRevisionsConcurrent(t, fresh) })
	t.Run("IDsOnlyForNewRules", func(t *testing.T) { testDenseIDs(t, fresh) })
	t.Run("UpdateKeepsWhatWasNotGiven", func(t *testing.T) { testKeep(t, fresh) })
	t.Run("UnknownSitesRefused", func(t *testing.T) { testKnownSites(t, fresh) })
	t.Run("PurgeHistoryOlderThanRetention", func(t *testing.T) { testPurge(t, fresh) })
	t.Run("StaticRulesChangeOnlyFromTheirOrigin", func(t *testing.T) { testOrigin(t, fresh) })
	t.Run("SitesMigrationKeepsReportingSites", func(t *testing.T) { testSitesMigration(t, fresh) })
	t.Run("QuotaCountsMatchTheRules", func(t *testing.T) { testQuotaCounts(t, fresh) })
	t.Run("WithdrawManyAllInOneTransaction", func(t *testing.T) { testWithdrawMany(t, fresh) })
	t.Run("IncidentsPerSiteBounded", func(t *testing.T) { testIncidents(t, fresh) })
	t.Run("SetsNameTheirRules", func(t *testing.T) { testSets(t, fresh) })
	t.Run("EachActiveStreamsTheActiveRules", func(t *testing.T) { testEachActive(t, fresh) })
}

func testUpsert(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	s := open(t, fresh(t), "a")
	exp := time.Now().Add(time.Hour)
	r1, created, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), ExpiresAt: exp, Reason: "ddos", Actor: "cli"})
	if err != nil || !created {
		t.Fatalf("first Upsert: created=%v err=%v", created, err)
	}
	if r1.ID == 0 || r1.State != Active || r1.Reason != "ddos" || r1.Actor != "cli" || r1.Text != rule(t, 1, "discard").String() {
		t.Fatalf("first Upsert returned %+v", r1)
	}
	if r1.CreatedAt.Location() != time.UTC || !r1.ExpiresAt.Equal(exp.Truncate(time.Microsecond)) {
		t.Fatalf("times: created %v expires %v, want UTC and %v", r1.CreatedAt, r1.ExpiresAt, exp)
	}
	got, err := s.Get(ctx, r1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !equalRule(got, r1) {
		t.Fatalf("Get = %+v\nUpsert returned %+v", got, r1)
	}

	// Same Match, new action/TTL/reason: the same row, updated.
	exp2 := exp.Add(time.Hour)
	r2, created, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "rate-limit 125000"), ExpiresAt: exp2, Reason: "still", Actor: "api"})
	if err != nil || created {
		t.Fatalf("second Upsert: created=%v err=%v", created, err)
	}
	if r2.ID != r1.ID || r2.Rule != rule(t, 1, "rate-limit 125000") || r2.Reason != "still" || r2.Actor != "api" ||
		!r2.ExpiresAt.Equal(exp2.Truncate(time.Microsecond)) || !r2.CreatedAt.Equal(r1.CreatedAt) || r2.UpdatedAt.Before(r1.UpdatedAt) {
		t.Fatalf("second Upsert returned %+v (first %+v)", r2, r1)
	}
	got, err = s.Get(ctx, r1.ID)
	if err != nil || !equalRule(got, r2) {
		t.Fatalf("Get after update = %+v, %v\nwant %+v", got, err, r2)
	}
	if got.Rule != rule(t, 1, "rate-limit 125000") {
		t.Fatalf("decoded rule %v, want %v", got.Rule, rule(t, 1, "rate-limit 125000"))
	}
	// Identical again: no change, no history.
	before, _ := s.History(ctx, r1.ID)
	r3, created, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "rate-limit 125000"), ExpiresAt: exp2, Reason: "still", Actor: "api"})
	if err != nil || created || r3.ID != r1.ID || !r3.UpdatedAt.Equal(r2.UpdatedAt) {
		t.Fatalf("identical Upsert: %+v created=%v err=%v", r3, created, err)
	}
	after, _ := s.History(ctx, r1.ID)
	if len(after) != len(before) {
		t.Fatalf("identical Upsert added history: %d → %d events", len(before), len(after))
	}
	// A different Match is a different rule.
	r4, created, err := s.Upsert(ctx, Input{Rule: rule(t, 2, "discard")})
	if err != nil || !created || r4.ID == r1.ID || !r4.ExpiresAt.IsZero() {
		t.Fatalf("other Match: %+v created=%v err=%v", r4, created, err)
	}
	all, err := s.List(ctx, Active)
	if err != nil || len(all) != 2 || all[0].ID != r4.ID {
		t.Fatalf("List(Active) = %v, %v; want 2 rules, newest first", ids(all), err)
	}
	if _, err := s.Get(ctx, 999999); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(unknown) = %v, want ErrNotFound", err)
	}
}

func testUpsertMany(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	s := open(t, fresh(t), "a")
	var ins []Input
	for i := range 1000 {
		ins = append(ins, Input{Rule: rule(t, i, "discard"), Actor: "batch"})
	}
	// A repeat of an earlier Match in the same batch updates it.
	ins = append(ins, Input{Rule: rule(t, 5, "rate-limit 1000"), Actor: "batch"})
	rs, err := s.UpsertMany(ctx, ins)
	if err != nil || len(rs) != len(ins) {
		t.Fatalf("UpsertMany: %d rules, %v", len(rs), err)
	}
	if rs[1000].ID != rs[5].ID || rs[1000].Rule != ins[1000].Rule {
		t.Fatalf("repeat in batch: %+v vs %+v", rs[1000], rs[5])
	}
	for i, r := range rs[:1000] {
		if r.Rule.Match != ins[i].Rule.Match {
			t.Fatalf("result %d out of order", i)
		}
	}
	act, err := s.ActiveRules(ctx)
	if err != nil || len(act) != 1000 {
		t.Fatalf("ActiveRules: %d, %v; want 1000", len(act), err)
	}
	// A batch of existing and new Matches updates and creates.
	rs2, err := s.UpsertMany(ctx, []Input{{Rule: rule(t, 2000, "discard")}, {Rule: rule(t, 0, "rate-limit 1000"), Reason: "again"}})
	if err != nil || rs2[0].ID <= rs[999].ID || rs2[1].ID != rs[0].ID || rs2[1].Reason != "again" {
		t.Fatalf("mixed batch: %+v, %v", rs2, err)
	}
	if g, _ := s.Get(ctx, rs[0].ID); g.Rule != rule(t, 0, "rate-limit 1000") {
		t.Fatalf("batch update not stored: %v", g.Text)
	}
	// All or nothing: a bad input at the end stores nothing.
	bad := []Input{{Rule: rule(t, 5000, "discard")}, {Rule: rule(t, 5001, "discard"), Sites: []string{""}}}
	if _, err := s.UpsertMany(ctx, bad); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("UpsertMany(bad) = %v, want ErrInvalidInput", err)
	}
	if act, _ := s.ActiveRules(ctx); len(act) != 1001 {
		t.Fatalf("failed batch stored %d rules", len(act)-1001)
	}
}

func testInvalid(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	s := open(t, fresh(t), "a")
	cases := map[string]Input{
		"zero rule":   {},
		"past expiry": {Rule: rule(t, 1, "discard"), ExpiresAt: time.Now().Add(-time.Second)},
		"empty site":  {Rule: rule(t, 1, "discard"), Sites: []string{"a", ""}},
		"spaced site": {Rule: rule(t, 1, "discard"), Sites: []string{" a"}},
		"ESC reason":  {Rule: rule(t, 1, "discard"), Reason: "\x1b[2J"},
		"NUL reason":  {Rule: rule(t, 1, "discard"), Reason: "a\x00"},
		"bidi reason": {Rule: rule(t, 1, "discard"), Reason: "a\u202eb"},
		"long reason": {Rule: rule(t, 1, "discard"), Reason: strings.Repeat("x", MaxReasonBytes+1)},
		"bad actor":   {Rule: rule(t, 1, "discard"), Actor: "a\nb"},
	}
	for name, in := range cases {
		if _, _, err := s.Upsert(ctx, in); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%s: Upsert = %v, want ErrInvalidInput", name, err)
		}
		// Behind inputs that pass, in a batch (a batch checks the
		// reason and actor its inputs share once).
		ok := Input{Rule: rule(t, 2, "discard"), Reason: "fine", Actor: "fine"}
		var ie *InputError
		if _, err := s.UpsertMany(ctx, []Input{ok, ok, in}); !errors.As(err, &ie) || ie.Index != 2 {
			t.Errorf("%s: UpsertMany = %v, want the InputError of input 2", name, err)
		}
	}
	if _, err := s.List(ctx, "bogus"); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("List(bogus) = %v, want ErrInvalidInput", err)
	}
	if err := s.Finish(ctx, 1, Active); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("Finish(Active) = %v, want ErrInvalidInput", err)
	}
	if all, _ := s.List(ctx, ""); len(all) != 0 {
		t.Errorf("invalid inputs stored %d rules", len(all))
	}
}

// WithdrawSeen withdraws a rule only while it is as the caller saw it
// (what a withdrawal checks); otherwise it writes nothing and says so.
func testWithdrawSeen(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	s := open(t, fresh(t), "a")
	seen, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), Actor: "det"})
	if err != nil {
		t.Fatal(err)
	}
	// Another writer gives it another owner and action.
	if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "rate-limit 1000"), Actor: "other"}); err != nil {
		t.Fatal(err)
	}
	rev, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WithdrawSeen(ctx, seen.ID, "det", seen); !errors.Is(err, ErrChanged) {
		t.Fatalf("WithdrawSeen of a changed rule = %v, want ErrChanged", err)
	}
	if g, err := s.Get(ctx, seen.ID); err != nil || g.WithdrawRequested || g.State != Active || g.Actor != "other" {
		t.Fatalf("after the refused WithdrawSeen: %+v, %v", g, err)
	}
	if d, err := s.ChangedSince(ctx, rev); err != nil || len(d.Active)+len(d.Gone) != 0 {
		t.Fatalf("the refused WithdrawSeen wrote a change: %+v, %v", d, err)
	}
	now, err := s.GetBrief(ctx, seen.ID)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.WithdrawSeen(ctx, now.ID, "det", now)
	if err != nil || !w.WithdrawRequested || w.Actor != "det" {
		t.Fatalf("WithdrawSeen of the rule as read = %+v, %v", w, err)
	}
	if _, err := s.WithdrawSeen(ctx, 12345, "x", Rule{ID: 12345}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("WithdrawSeen of an unknown id = %v, want ErrNotFound", err)
	}
}

// A write whose change the speaker took ahead of the commit records in
// that commit what the reconciler would write after it: an upsert
// marked Announced this site's status, a withdrawal of a path gone
// (WithdrawGone) the rule's final state, with the same history.
func testEarlyOutcome(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	s := open(t, fresh(t), "a")
	r, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), Actor: "det", Announced: true})
	if err != nil || !r.Announced {
		t.Fatalf("Upsert marked Announced = %+v, %v; want the status announced", r, err)
	}
	if g, err := s.Get(ctx, r.ID); err != nil || !g.Announced || g.LastError != "" {
		t.Fatalf("stored after an Upsert marked Announced: %+v, %v", g, err)
	}
	// Another site's rule: not this site's status to record.
	other, _, err := s.Upsert(ctx, Input{Rule: rule(t, 2, "discard"), Actor: "det", Sites: []string{"b"},
		AllowUnknownSites: true, Announced: true})
	if err != nil || other.Announced {
		t.Fatalf("Upsert marked Announced of another site's rule = %+v, %v; want no status", other, err)
	}
	// A rule changed since it was seen is not withdrawn, let alone finished.
	seen, err := s.GetBrief(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "rate-limit 1000"), Actor: "det"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WithdrawGone(ctx, r.ID, "det", &seen); !errors.Is(err, ErrChanged) {
		t.Fatalf("WithdrawGone of a changed rule = %v, want ErrChanged", err)
	}
	if seen, err = s.GetBrief(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	w, err := s.WithdrawGone(ctx, r.ID, "det", &seen)
	if err != nil || w.State != Withdrawn || w.Announced || !w.WithdrawRequested {
		t.Fatalf("WithdrawGone = %+v, %v; want the rule withdrawn, not announced", w, err)
	}
	if g, err := s.Get(ctx, r.ID); err != nil || g.State != Withdrawn || g.Announced {
		t.Fatalf("stored after WithdrawGone: %+v, %v", g, err)
	}
	evs, err := s.History(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, string(e.Kind))
		if e.Kind == EventStatus && (e.Actor != "reconciler" || e.Site != "a" || e.Old["announced"] != "false" || e.New["announced"] != "true") {
			t.Errorf("status entry %+v, want the reconciler's of site a, announced false -> true", e)
		}
	}
	if got, want := strings.Join(kinds, " "), "created status updated withdraw-requested withdrawn"; got != want {
		t.Fatalf("history %q, want %q", got, want)
	}
	// Without seen, and for a rule already on its way out: answered as
	// Withdraw answers it, not finished here.
	plain, _, err := s.Upsert(ctx, Input{Rule: rule(t, 3, "discard"), Actor: "det"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Withdraw(ctx, plain.ID, "det"); err != nil {
		t.Fatal(err)
	}
	if w, err := s.WithdrawGone(ctx, plain.ID, "det", nil); err != nil || w.State != Active || !w.WithdrawRequested {
		t.Fatalf("WithdrawGone of a rule already asked to withdraw = %+v, %v; want it as it was", w, err)
	}
	fresh3, _, err := s.Upsert(ctx, Input{Rule: rule(t, 4, "discard"), Actor: "det"})
	if err != nil {
		t.Fatal(err)
	}
	if w, err := s.WithdrawGone(ctx, fresh3.ID, "det", nil); err != nil || w.State != Withdrawn {
		t.Fatalf("WithdrawGone without seen = %+v, %v; want the rule withdrawn", w, err)
	}
}

func testWithdraw(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	s := open(t, fresh(t), "a")
	r, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), Actor: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Withdraw(ctx, r.ID, "alice")
	if err != nil || !w.WithdrawRequested || w.State != Active || w.Actor != "alice" {
		t.Fatalf("Withdraw = %+v, %v", w, err)
	}
	// Still desired until the reconciler saw the path gone.
	if act, _ := s.ActiveRules(ctx); len(act) != 1 || !act[0].WithdrawRequested {
		t.Fatalf("ActiveRules after Withdraw = %+v", act)
	}
	if _, err := s.Withdraw(ctx, r.ID, "bob"); err != nil {
		t.Fatalf("second Withdraw: %v", err)
	}
	// Expired does not apply: the rule has no expiry.
	if err := s.Finish(ctx, r.ID, Expired); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Get(ctx, r.ID); g.State != Active {
		t.Fatalf("Finish(Expired) of a rule without expiry moved it to %s", g.State)
	}
	for range 2 { // idempotent
		if err := s.Finish(ctx, r.ID, Withdrawn); err != nil {
			t.Fatal(err)
		}
	}
	g, _ := s.Get(ctx, r.ID)
	if g.State != Withdrawn {
		t.Fatalf("state %s after Finish(Withdrawn)", g.State)
	}
	if act, _ := s.ActiveRules(ctx); len(act) != 0 {
		t.Fatalf("ActiveRules after Finish = %v", ids(act))
	}
	if l, _ := s.List(ctx, Withdrawn); len(l) != 1 {
		t.Fatalf("List(Withdrawn) = %v", ids(l))
	}
	if _, err := s.Withdraw(ctx, 12345, "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Withdraw(unknown) = %v", err)
	}
	if err := s.Finish(ctx, 12345, Withdrawn); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Finish(unknown) = %v", err)
	}
	// Finish(Withdrawn) without a request does nothing, and an Upsert
	// cancels a pending request.
	r2, _, _ := s.Upsert(ctx, Input{Rule: rule(t, 2, "discard")})
	if err := s.Finish(ctx, r2.ID, Withdrawn); err != nil {
		t.Fatal(err)
	}
	s.Withdraw(ctx, r2.ID, "alice")
	r2b, created, err := s.Upsert(ctx, Input{Rule: rule(t, 2, "discard"), Actor: "detector"})
	if err != nil || created || r2b.WithdrawRequested {
		t.Fatalf("Upsert of a withdraw-requested rule: %+v created=%v %v", r2b, created, err)
	}
	s.Finish(ctx, r2.ID, Withdrawn)
	if g, _ := s.Get(ctx, r2.ID); g.State != Active {
		t.Fatalf("renewed rule finished: %s", g.State)
	}
}

func testNewRowAfterFinish(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	s := open(t, fresh(t), "a")
	r1, _, _ := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard")})
	s.Withdraw(ctx, r1.ID, "cli")
	if err := s.Finish(ctx, r1.ID, Withdrawn); err != nil {
		t.Fatal(err)
	}
	r2, created, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard")})
	if err != nil || !created || r2.ID == r1.ID {
		t.Fatalf("Upsert after Finish: %+v created=%v %v", r2, created, err)
	}
	if g, _ := s.Get(ctx, r1.ID); g.State != Withdrawn {
		t.Fatalf("old row is %s", g.State)
	}
}

func testExpiry(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	cfg := fresh(t)
	fc := clock.NewFake(time.Now())
	cfg.Clock = fc // both sites read the same clock
	a, b := open(t, cfg, "a"), open(t, cfg, "b")
	r, _, err := a.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), ExpiresAt: fc.Now().Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	// Not yet expired: no-op.
	if err := b.Finish(ctx, r.ID, Expired); err != nil {
		t.Fatal(err)
	}
	if g, _ := a.Get(ctx, r.ID); g.State != Active {
		t.Fatalf("early Finish(Expired) moved the rule to %s", g.State)
	}
	// Past expiry it is still active until someone finishes it.
	fc.Set(r.ExpiresAt)
	if act, _ := b.ActiveRules(ctx); len(act) != 1 {
		t.Fatalf("expired but unfinished rule not in ActiveRules: %v", ids(act))
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Go(func() { errs[i] = st.Finish(ctx, r.ID, Expired) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Finish %d: %v", i, err)
		}
	}
	if g, _ := b.Get(ctx, r.ID); g.State != Expired {
		t.Fatalf("state %s, want expired", g.State)
	}
	h, _ := a.History(ctx, r.ID)
	if n := countKind(h, EventExpired); n != 1 {
		t.Fatalf("%d expired events from concurrent Finish, want 1", n)
	}
}

func testConcurrentUpsert(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	cfg := fresh(t)
	a, b := open(t, cfg, "a"), open(t, cfg, "b")
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Go(func() {
			_, _, errs[i] = st.Upsert(ctx, Input{Rule: rule(t, 7, "discard"), Reason: string(rune('a' + i))})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Upsert %d: %v", i, err)
		}
	}
	if act, _ := a.ActiveRules(ctx); len(act) != 1 {
		t.Fatalf("%d active rows for one Match, want 1", len(act))
	}
}

func testSites(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	cfg := fresh(t)
	a, b := open(t, cfg, "a"), open(t, cfg, "b")
	all, _, _ := a.Upsert(ctx, Input{Rule: rule(t, 1, "discard")})
	onlyA, _, _ := a.Upsert(ctx, Input{Rule: rule(t, 2, "discard"), Sites: []string{"a"}})
	onlyB, _, _ := a.Upsert(ctx, Input{Rule: rule(t, 3, "discard"), Sites: []string{"b"}})
	both, _, err := a.Upsert(ctx, Input{Rule: rule(t, 4, "discard"), Sites: []string{"b", "a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(both.Sites, []string{"a", "b"}) {
		t.Fatalf("sites not normalized: %q", both.Sites)
	}
	if g, _ := b.Get(ctx, both.ID); !slices.Equal(g.Sites, []string{"a", "b"}) {
		t.Fatalf("stored sites %q", g.Sites)
	}
	gotA, _ := a.ActiveRules(ctx)
	gotB, err := b.ActiveRules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if w := []int64{all.ID, onlyA.ID, both.ID}; !slices.Equal(ids(gotA), w) {
		t.Fatalf("site a: %v, want %v", ids(gotA), w)
	}
	if w := []int64{all.ID, onlyB.ID, both.ID}; !slices.Equal(ids(gotB), w) {
		t.Fatalf("site b: %v, want %v", ids(gotB), w)
	}
	// Status is per site.
	if err := a.SetStatus(ctx, []int64{all.ID, onlyA.ID, 99999}, true, ""); err != nil {
		t.Fatal(err)
	}
	if err := b.SetStatus(ctx, []int64{all.ID}, false, "peer rejected"); err != nil {
		t.Fatal(err)
	}
	ga, _ := a.Get(ctx, all.ID)
	gb, _ := b.Get(ctx, all.ID)
	if !ga.Announced || ga.LastError != "" || gb.Announced || gb.LastError != "peer rejected" {
		t.Fatalf("status a=%v/%q b=%v/%q", ga.Announced, ga.LastError, gb.Announced, gb.LastError)
	}
	la, _ := a.List(ctx, Active)
	for _, r := range la {
		if r.Announced != (r.ID == all.ID || r.ID == onlyA.ID) {
			t.Fatalf("List at site a: rule %d announced=%v", r.ID, r.Announced)
		}
	}
	// Moving a rule to another site takes it off this site.
	if _, _, err := a.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), Sites: []string{"b"}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.ActiveRules(ctx); slices.Contains(ids(got), all.ID) {
		t.Fatalf("rule moved to b still active at a")
	}
}

func testHistory(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	s := open(t, fresh(t), "a")
	exp := time.Now().Add(time.Hour)
	r, _, _ := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), Actor: "cli", Reason: "one"})
	s.Upsert(ctx, Input{Rule: rule(t, 1, "rate-limit 1000"), Actor: "api", Reason: "one", ExpiresAt: exp})
	s.SetStatus(ctx, []int64{r.ID}, true, "")
	s.SetStatus(ctx, []int64{r.ID}, true, "") // no change, no event
	s.Withdraw(ctx, r.ID, "alice")
	if err := s.Finish(ctx, r.ID, Withdrawn); err != nil {
		t.Fatal(err)
	}
	h, err := s.History(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []EventKind
	for _, e := range h {
		kinds = append(kinds, e.Kind)
		if e.RuleID != r.ID || e.At.IsZero() || e.At.Location() != time.UTC {
			t.Errorf("event %+v", e)
		}
	}
	want := []EventKind{EventCreated, EventUpdated, EventStatus, EventWithdrawRequested, EventWithdrawn}
	if !slices.Equal(kinds, want) {
		t.Fatalf("history kinds %v, want %v", kinds, want)
	}
	if h[0].Actor != "cli" || h[0].Old != nil || h[0].New["text"] != rule(t, 1, "discard").String() {
		t.Errorf("created event %+v", h[0])
	}
	up := h[1]
	if up.Actor != "api" || up.Old["text"] != rule(t, 1, "discard").String() || up.New["text"] != rule(t, 1, "rate-limit 1000").String() ||
		up.Old["expires_at"] != "never" || up.New["expires_at"] == "never" {
		t.Errorf("updated event %+v", up)
	}
	if _, ok := up.New["reason"]; ok {
		t.Errorf("unchanged reason recorded: %+v", up)
	}
	if h[2].Site != "a" || h[2].New["announced"] != "true" || h[2].Old["announced"] != "false" {
		t.Errorf("status event %+v", h[2])
	}
	if h[3].Actor != "alice" || h[4].Site != "a" || h[4].New["state"] != "withdrawn" {
		t.Errorf("withdraw events %+v %+v", h[3], h[4])
	}
	if _, err := s.History(ctx, 424242); !errors.Is(err, ErrNotFound) {
		t.Fatalf("History(unknown) = %v", err)
	}
}

func testChanges(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	s := open(t, fresh(t), "a")
	drain(s)
	r, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard")})
	if err != nil {
		t.Fatal(err)
	}
	waitChange(t, s, "Upsert")
	drain(s)
	s.Withdraw(ctx, r.ID, "x")
	waitChange(t, s, "Withdraw")
	drain(s)
	s.Finish(ctx, r.ID, Withdrawn)
	waitChange(t, s, "Finish")
	drain(s)
	s.UpsertMany(ctx, []Input{{Rule: rule(t, 2, "discard")}, {Rule: rule(t, 3, "discard")}})
	waitChange(t, s, "UpsertMany")
	// Bursts coalesce into one pending wake-up.
	for i := range 5 {
		s.Upsert(ctx, Input{Rule: rule(t, 10+i, "discard")})
	}
	waitChange(t, s, "burst")
	if len(s.Changes()) > 1 {
		t.Fatalf("channel holds %d signals", len(s.Changes()))
	}
}

func testMigrations(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	cfg := fresh(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	stores := make([]*Store, len(errs))
	for i := range errs {
		wg.Go(func() {
			c := cfg
			c.Site = "s"
			stores[i], errs[i] = Open(ctx, c)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent Open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	s := open(t, cfg, "again")
	var n, max int64
	if err := s.eng.reader().queryRow(ctx, "SELECT COUNT(*), MAX(version) FROM schema_migrations").Scan(&n, &max); err != nil {
		t.Fatal(err)
	}
	ms, _ := loadMigrations(s.eng.migrations())
	if n != int64(len(ms)) || max != ms[len(ms)-1].version {
		t.Fatalf("schema_migrations: %d rows, max %d; want %d, %d", n, max, len(ms), ms[len(ms)-1].version)
	}
	if _, _, err := stores[0].Upsert(ctx, Input{Rule: rule(t, 1, "discard")}); err != nil {
		t.Fatal(err)
	}
}

// Migration 4 gives rules stored with the old true/false bits (and the old
// flow label widths) the NLRI their text says; a store already at the
// latest version is left alone.
func testReencode(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	cfg := fresh(t)
	s := open(t, cfg, "a")
	tru, err := flowspec.Parse("match destination 10.21.4.0/24 port true then discard")
	if err != nil {
		t.Fatal(err)
	}
	fls, err := flowspec.Parse("match destination 10.21.5.0/24 port false then discard")
	if err != nil {
		t.Fatal(err)
	}
	a, _, err := s.Upsert(ctx, Input{Rule: tru})
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := s.Upsert(ctx, Input{Rule: fls})
	if err != nil {
		t.Fatal(err)
	}
	// What the old encoder wrote: operator 0x80 (000) for true, 0x87 for
	// false; the text was right.
	old := func(m flowspec.Match, from, to byte) []byte {
		w := m.AppendTo(nil)
		i := bytes.LastIndexByte(w, from)
		w[i] = to
		return w
	}
	w := s.eng.reader()
	for _, c := range []struct {
		id   int64
		nlri []byte
	}{{a.ID, old(tru.Match, 0x87, 0x80)}, {b.ID, old(fls.Match, 0x80, 0x87)}} {
		if _, err := w.exec(ctx, `UPDATE rules SET nlri = ? WHERE id = ?`, c.nlri, c.id); err != nil {
			t.Fatal(err)
		}
	}
	undoDestination(t, s)
	if _, err := w.exec(ctx, `DELETE FROM schema_migrations WHERE version >= 4`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, cfg, "a") // runs migration 4 (and 5) again
	for _, c := range []struct {
		id   int64
		want flowspec.Rule
	}{{a.ID, tru}, {b.ID, fls}} {
		got, err := s.Get(ctx, c.id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Rule.Match != c.want.Match || got.State != Active {
			t.Errorf("rule %d after migration: %s (%s), want %s", c.id, got.Rule.Match, got.State, c.want.Match)
		}
	}
}

func equalRule(a, b Rule) bool {
	return a.ID == b.ID && a.Rule == b.Rule && a.Text == b.Text && a.Reason == b.Reason && a.Actor == b.Actor &&
		slices.Equal(a.Sites, b.Sites) && a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt) &&
		a.ExpiresAt.Equal(b.ExpiresAt) && a.State == b.State && a.WithdrawRequested == b.WithdrawRequested &&
		a.Announced == b.Announced && a.LastError == b.LastError
}

func ids(rs []Rule) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func countKind(h []Event, k EventKind) int {
	n := 0
	for _, e := range h {
		if e.Kind == k {
			n++
		}
	}
	return n
}

// Every kind of action, including IPv6-address-specific extended
// communities, reads back equal to what was stored.
func testActionsRoundTrip(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	s := open(t, fresh(t), "a")
	for _, text := range []string{
		"match destination 2001:db8::1/128 then redirect-ip 2001:db8::99",
		"match destination 2001:db8::2/128 then rate-limit 1000 redirect-ip 2001:db8::99 action sample",
		"match destination 192.0.2.1/32 then redirect-ip 198.51.100.1 mark 10",
		"match destination 192.0.2.2/32 then redirect 65000:100 rate-limit-packets 500",
		"route 203.0.113.7/32 then blackhole",
	} {
		r, err := flowspec.Parse(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		stored, _, err := s.Upsert(ctx, Input{Rule: r, Actor: "test"})
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		got, err := s.Get(ctx, stored.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Rule != r {
			t.Errorf("%s: read back as %s", text, got.Rule)
		}
	}
}

// Counts agrees with what List returns, state by state.
func testCounts(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	s := open(t, fresh(t), "a")
	var ids []int64
	for i := 1; i <= 6; i++ {
		r, _, err := s.Upsert(ctx, Input{Rule: rule(t, i, "discard"), Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	if _, err := s.Withdraw(ctx, ids[0], "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Withdraw(ctx, ids[1], "test"); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, ids[1], Withdrawn); err != nil {
		t.Fatal(err)
	}
	if err := s.SetStatus(ctx, ids[2:4], true, ""); err != nil {
		t.Fatal(err)
	}
	counts, err := s.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		state                  State
		withdrawing, announced bool
	}
	got := map[key]int{}
	for _, c := range counts {
		if c.Family != flowspec.IPv4 {
			t.Errorf("count of family %v", c.Family)
		}
		got[key{c.State, c.WithdrawRequested, c.Announced}] += c.N
	}
	want := map[key]int{
		{Active, true, false}:    1,
		{Withdrawn, true, false}: 1,
		{Active, false, true}:    2,
		{Active, false, false}:   2,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("count %+v = %d, want %d (all: %v)", k, got[k], n, got)
		}
	}
	// By destination: the same counts, each under its rule's prefix
	// (the withdrawn one's too).
	byDest, err := s.DestinationCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sum := map[key]int{}
	for _, c := range byDest {
		sum[key{c.State, c.WithdrawRequested, c.Announced}] += c.N
		if want := netip.MustParsePrefix(fmt.Sprintf("10.0.0.%d/32", c.Destination.Addr().As4()[3])); !c.Destination.IsValid() || c.Destination != want || c.N != 1 {
			t.Errorf("destination count %+v: want one rule under a 10.0.0.x/32", c)
		}
	}
	if fmt.Sprint(sum) != fmt.Sprint(got) {
		t.Errorf("by destination %v, want the counts %v", sum, got)
	}
}

// A reader that follows ChangedSince from one delta's Next to the next,
// with no settle window, sees every rule that concurrent writers stored:
// history ids become visible in id order on both engines.
func testRevisionsConcurrent(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	cfg := fresh(t)
	w, r := open(t, cfg, "a"), open(t, cfg, "a")
	const writers, each = 8, 40
	done := make(chan error, writers)
	for g := range writers {
		go func() {
			for i := range each {
				if _, _, err := w.Upsert(ctx, Input{Rule: rule(t, 1000+g*each+i, "discard"), Actor: "test"}); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	seen := map[int64]bool{}
	var rev int64
	read := func() {
		d, err := r.ChangedSince(ctx, rev)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range d.Active {
			seen[x.ID] = true
		}
		rev = d.Next
	}
	for finished := 0; finished < writers; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished++
		default:
			read()
		}
	}
	read()
	all, err := r.ActiveRules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != writers*each {
		t.Fatalf("%d active rules, want %d", len(all), writers*each)
	}
	for _, x := range all {
		if !seen[x.ID] {
			t.Errorf("rule %d was never in a delta", x.ID)
		}
	}
}

// testFinishMany: each item is finished exactly as Finish would (the
// conditions included), errors are per item, and more items than one
// transaction takes are all written.
func testFinishMany(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	cfg := fresh(t)
	fc := clock.NewFake(time.Now())
	cfg.Clock = fc
	s := open(t, cfg, "a")
	var in []Input
	for i := range finishChunk + 5 {
		in = append(in, Input{Rule: rule(t, i+1, "discard"), Actor: "cli"})
	}
	// Set after building the rules (slow under -race), with room for
	// UpsertMany's own checks before the expiry must still be ahead.
	// The store's clock moves only when the test moves it: the rules
	// are ahead of it until then, however slow building them was.
	past := fc.Now().Add(time.Second)
	for i := range in {
		in[i].ExpiresAt = past
	}
	rs, err := s.UpsertMany(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	live, _, err := s.Upsert(ctx, Input{Rule: rule(t, 9000, "discard"), ExpiresAt: fc.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	asked, _, err := s.Upsert(ctx, Input{Rule: rule(t, 9001, "discard")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Withdraw(ctx, asked.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	fc.Set(past)

	var items []FinishItem
	for _, r := range rs {
		items = append(items, FinishItem{ID: r.ID, State: Expired})
	}
	items = append(items,
		FinishItem{ID: live.ID, State: Expired},    // not expired yet: no-op
		FinishItem{ID: live.ID, State: Withdrawn},  // no withdraw requested: no-op
		FinishItem{ID: asked.ID, State: Withdrawn}, // finishes
		FinishItem{ID: 987654, State: Expired},     // unknown
		FinishItem{ID: live.ID, State: Active},     // not a final state
	)
	errs, err := s.FinishMany(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != len(items) {
		t.Fatalf("%d results for %d items", len(errs), len(items))
	}
	n := len(items)
	for i, e := range errs[:n-2] {
		if e != nil {
			t.Errorf("item %d (%+v): %v", i, items[i], e)
		}
	}
	if !errors.Is(errs[n-2], ErrNotFound) {
		t.Errorf("unknown id: %v, want ErrNotFound", errs[n-2])
	}
	if !errors.Is(errs[n-1], ErrInvalidInput) {
		t.Errorf("state active: %v, want ErrInvalidInput", errs[n-1])
	}
	act, err := s.ActiveRules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(act) != 1 || act[0].ID != live.ID {
		t.Fatalf("ActiveRules after FinishMany = %v, want only %d", ids(act), live.ID)
	}
	if g, _ := s.Get(ctx, asked.ID); g.State != Withdrawn {
		t.Fatalf("withdraw-requested rule is %s", g.State)
	}
	if l, _ := s.List(ctx, Expired); len(l) != len(rs) {
		t.Fatalf("%d expired, want %d", len(l), len(rs))
	}
	h, _ := s.History(ctx, rs[len(rs)-1].ID)
	if countKind(h, EventExpired) != 1 {
		t.Fatalf("history of the last rule: %+v", h)
	}
	// Again: nothing left to do, nothing recorded twice.
	if errs, err := s.FinishMany(ctx, items[:3]); err != nil || errs[0] != nil {
		t.Fatalf("second FinishMany: %v %v", errs, err)
	}
	if h, _ := s.History(ctx, rs[0].ID); countKind(h, EventExpired) != 1 {
		t.Fatalf("second FinishMany recorded again: %+v", h)
	}
}

// Updates never consume an id: single upserts, batches with updates and
// repeats, and concurrent upserts of one Match leave the ids of new rules
// consecutive.
func testDenseIDs(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	cfg := fresh(t)
	a, b := open(t, cfg, "a"), open(t, cfg, "b")
	var want []int64
	add := func(i int, action string) {
		t.Helper()
		r, created, err := a.Upsert(ctx, Input{Rule: rule(t, i, action), Reason: action})
		if err != nil {
			t.Fatal(err)
		}
		if created {
			want = append(want, r.ID)
		}
	}
	add(1, "discard")
	add(1, "rate-limit 1000")
	add(1, "rate-limit 1000") // identical
	add(2, "discard")
	add(2, "rate-limit 2000")
	rs, err := a.UpsertMany(ctx, []Input{
		{Rule: rule(t, 1, "discard")}, {Rule: rule(t, 3, "discard")}, {Rule: rule(t, 3, "rate-limit 5")},
		{Rule: rule(t, 4, "discard")}, {Rule: rule(t, 2, "discard")},
	})
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, rs[1].ID, rs[3].ID)
	var wg sync.WaitGroup
	for i := range 8 {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Go(func() {
			if _, _, err := st.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), Reason: string(rune('a' + i))}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	add(5, "discard")
	for i, id := range want {
		if id != want[0]+int64(i) {
			t.Fatalf("ids of new rules %v, want consecutive", want)
		}
	}
	if all, _ := a.List(ctx, ""); len(all) != 5 {
		t.Fatalf("%d rules stored, want 5", len(all))
	}
}

// An update with Keep leaves those fields as stored; a new rule takes them
// from the input as given.
func testKeep(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	s := open(t, fresh(t), "a")
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	all := KeepReason | KeepExpiry | KeepSites
	r, created, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), Reason: "DNS amplification", ExpiresAt: exp,
		Sites: []string{"a"}, Actor: "cli", Keep: all})
	if err != nil || !created || r.Reason != "DNS amplification" || !r.ExpiresAt.Equal(exp) || len(r.Sites) != 1 {
		t.Fatalf("create with Keep: %+v created=%v %v", r, created, err)
	}
	r2, created, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "rate-limit 125000"), Actor: "cli", Keep: all})
	if err != nil || created || r2.ID != r.ID || r2.Reason != "DNS amplification" || !r2.ExpiresAt.Equal(exp) ||
		len(r2.Sites) != 1 || r2.Rule != rule(t, 1, "rate-limit 125000") {
		t.Fatalf("update keeping all: %+v created=%v %v", r2, created, err)
	}
	if g, _ := s.Get(ctx, r.ID); !equalRule(g, r2) {
		t.Fatalf("stored %+v, returned %+v", g, r2)
	}
	// Given explicitly, even empty: replaced.
	r3, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "rate-limit 125000"), Actor: "cli", Keep: KeepExpiry | KeepSites})
	if err != nil || r3.Reason != "" || !r3.ExpiresAt.Equal(exp) {
		t.Fatalf("clearing the reason: %+v %v", r3, err)
	}
	h, _ := s.History(ctx, r.ID)
	if last := h[len(h)-1]; last.Old["reason"] != "DNS amplification" || last.New["reason"] != "" {
		t.Fatalf("history of the cleared reason: %+v", last)
	}
}

// Each instance registers its site at Open; a rule naming a site nobody
// registered is refused with the known ones, unless it allows that.
func testKnownSites(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	cfg := fresh(t)
	a := open(t, cfg, "fra1")
	open(t, cfg, "ams1")
	open(t, cfg, "ams1") // a restart registers nothing new
	if got, err := a.Sites(ctx); err != nil || strings.Join(got, ",") != "ams1,fra1" {
		t.Fatalf("Sites = %v, %v", got, err)
	}
	r, _, err := a.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), Sites: []string{"ams1", "fra1"}})
	if err != nil {
		t.Fatal(err)
	}
	var ie *InputError
	_, _, err = a.Upsert(ctx, Input{Rule: rule(t, 2, "discard"), Sites: []string{"fra2"}})
	if !errors.As(err, &ie) || ie.Field != "sites" || !strings.Contains(ie.Msg, `"fra2"`) || !strings.Contains(ie.Msg, "ams1, fra1") {
		t.Fatalf("unknown site: %v", err)
	}
	_, err = a.UpsertMany(ctx, []Input{{Rule: rule(t, 3, "discard")}, {Rule: rule(t, 2, "discard"), Sites: []string{"fra1", "lon1"}}})
	if !errors.As(err, &ie) || ie.Field != "sites" || ie.Index != 1 {
		t.Fatalf("unknown site in a batch: %v", err)
	}
	if all, _ := a.List(ctx, ""); len(all) != 1 {
		t.Fatalf("refused inputs stored %d rules", len(all)-1)
	}
	if _, _, err := a.Upsert(ctx, Input{Rule: rule(t, 2, "discard"), Sites: []string{"lon1"}, AllowUnknownSites: true}); err != nil {
		t.Fatalf("allowed unknown site: %v", err)
	}
	// An update that keeps the stored sites is not checked again.
	if _, _, err := a.Upsert(ctx, Input{Rule: rule(t, 2, "rate-limit 10"), Keep: KeepSites}); err != nil {
		t.Fatalf("update keeping an unknown site: %v", err)
	}
	if got, _ := a.Get(ctx, r.ID); len(got.Sites) != 2 {
		t.Fatalf("sites %v", got.Sites)
	}
}

// History older than the cut disappears, in small batches; withdrawn and
// expired rules last changed before it go with their status; active rules
// stay; newer history stays; the revision never goes back. The cut is an
// explicit time: no test waits for real time to pass.
func testPurge(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	s := open(t, fresh(t), "a")
	old, _, _ := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), Reason: "old"})
	s.Upsert(ctx, Input{Rule: rule(t, 1, "rate-limit 10"), Reason: "old too"})
	gone, _, _ := s.Upsert(ctx, Input{Rule: rule(t, 2, "discard")})
	s.Withdraw(ctx, gone.ID, "cli")
	if err := s.Finish(ctx, gone.ID, Withdrawn); err != nil {
		t.Fatal(err)
	}
	if err := s.SetStatus(ctx, []int64{gone.ID}, true, ""); err != nil {
		t.Fatal(err)
	}
	var many []Input
	for i := range 30 {
		many = append(many, Input{Rule: rule(t, 100+i, "discard")})
	}
	rs, err := s.UpsertMany(ctx, many)
	if err != nil {
		t.Fatal(err)
	}
	// The cut: just after everything written so far.
	h, _ := s.History(ctx, rs[29].ID)
	cut := h[len(h)-1].At.Add(time.Microsecond)
	for !dbTimeNow().After(cut) {
		// microseconds: the next write must be stamped after the cut
	}
	recent, _, _ := s.Upsert(ctx, Input{Rule: rule(t, 3, "discard"), Reason: "recent"})
	s.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), Reason: "renewed after the cut"})
	rev, _ := s.Revision(ctx)

	if p, err := s.PurgeHistory(ctx, cut.Add(-time.Hour), 7); err != nil || p != (Purged{}) {
		t.Fatalf("purge before everything: %+v, %v", p, err)
	}
	p, err := s.PurgeHistory(ctx, cut, 7) // batches of 7: several rounds
	if err != nil {
		t.Fatal(err)
	}
	// created+updated of 1, created+withdraw-requested+withdrawn+status of
	// 2, created of 100..129.
	if p.Rules != 1 || p.Events != 2+4+30 {
		t.Fatalf("purged %+v, want 1 rule and 36 events", p)
	}
	if _, err := s.Get(ctx, gone.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the finished rule is still there: %v", err)
	}
	if h, _ := s.History(ctx, old.ID); len(h) != 1 || h[0].New["reason"] != "renewed after the cut" {
		t.Fatalf("history of the active rule: %+v, want only the entry after the cut", h)
	}
	if h, _ := s.History(ctx, recent.ID); len(h) != 1 {
		t.Fatalf("recent history purged: %+v", h)
	}
	if act, _ := s.ActiveRules(ctx); len(act) != 32 {
		t.Fatalf("%d active rules after the purge, want 32", len(act))
	}
	if r2, _ := s.Revision(ctx); r2 != rev {
		t.Fatalf("revision %d -> %d", rev, r2)
	}
	// Everything is old: all history goes but the newest entry.
	p, err = s.PurgeHistory(ctx, time.Now().Add(time.Hour), 0)
	if err != nil || p.Events != 1 {
		t.Fatalf("purge all: %+v, %v", p, err)
	}
	if r2, _ := s.Revision(ctx); r2 != rev {
		t.Fatalf("revision %d -> %d after purging all", rev, r2)
	}
}

// A rule with an Origin (a static rule of a site's configuration) changes
// only through inputs of that origin; it may take over an API rule.
func testOrigin(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	s := open(t, fresh(t), "a")
	r, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), Actor: "config", Origin: "config:a"})
	if err != nil || r.Origin != "config:a" {
		t.Fatalf("static rule: %+v, %v", r, err)
	}
	if g, _ := s.Get(ctx, r.ID); g.Origin != "config:a" {
		t.Fatalf("stored origin %q", g.Origin)
	}
	var de *DeclaredError
	_, _, err = s.Upsert(ctx, Input{Rule: rule(t, 1, "rate-limit 5"), Actor: "cli"})
	if !errors.As(err, &de) || !errors.Is(err, ErrDeclared) || de.ID != r.ID || !strings.Contains(err.Error(), "configuration of site a") {
		t.Fatalf("API update of a static rule: %v", err)
	}
	_, err = s.UpsertMany(ctx, []Input{{Rule: rule(t, 2, "discard")}, {Rule: rule(t, 1, "rate-limit 5")}})
	if !errors.Is(err, ErrDeclared) {
		t.Fatalf("batch update of a static rule: %v", err)
	}
	if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "rate-limit 5"), Actor: "config", Origin: "config:a"}); err != nil {
		t.Fatalf("update from its origin: %v", err)
	}
	api, _, _ := s.Upsert(ctx, Input{Rule: rule(t, 3, "discard"), Actor: "cli"})
	took, created, err := s.Upsert(ctx, Input{Rule: rule(t, 3, "discard"), Actor: "config", Origin: "config:a"})
	if err != nil || created || took.ID != api.ID || took.Origin != "config:a" {
		t.Fatalf("static rule taking over an API rule: %+v %v", took, err)
	}
}

// A database from before sites were registered (schema version 1) gets
// every site that reported announce status as known, so upgrading does
// not refuse the sites in use.
func testSitesMigration(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	cfg := fresh(t)
	var eng engine
	var err error
	if cfg.Driver == "postgres" {
		eng, err = openPostgres(ctx, cfg.DSN, hclog.NewNullLogger())
	} else {
		eng, err = openSQLite(ctx, cfg.Path)
	}
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations(eng.migrations())
	if err != nil {
		t.Fatal(err)
	}
	tx, err := eng.begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := eng.timeArg(dbTimeNow())
	r := rule(t, 1, "discard")
	for _, step := range []struct {
		q    string
		args []any
	}{
		{`CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`, nil},
		{ms[0].sql, nil},
		{`INSERT INTO schema_migrations (version, name, applied_at) VALUES (1, 'x', 'x')`, nil},
		{`INSERT INTO rules (family, nlri, communities, text, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
			[]any{int64(r.Match.Family()), r.Match.AppendTo(nil), storedAction(r.Action), r.String(), now, now}},
		{`INSERT INTO rule_status (rule_id, site, announced, updated_at) VALUES (1, 'old1', TRUE, ?), (1, 'old2', FALSE, ?)`, []any{now, now}},
	} {
		if _, err := tx.exec(ctx, step.q, step.args...); err != nil {
			t.Fatalf("%s: %v", step.q, err)
		}
	}
	if err := tx.commit(ctx); err != nil {
		t.Fatal(err)
	}
	eng.close()
	s := open(t, cfg, "new")
	if got, err := s.Sites(ctx); err != nil || strings.Join(got, ",") != "new,old1,old2" {
		t.Fatalf("sites after the migration: %v, %v", got, err)
	}
	if g, err := s.Get(ctx, 1); err != nil || g.Origin != "" || g.Rule != r {
		t.Fatalf("old rule after the migrations: %+v, %v", g, err)
	}
}

// A rule finishes once this site's reconciler saw its path gone: this
// site's status says not announced from then on, also when another site
// finished the rule first; the other site's status is its own.
func testFinishClearsAnnounced(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	cfg := fresh(t)
	a, b := open(t, cfg, "a"), open(t, cfg, "b")
	r, _, err := a.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), Actor: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Store{a, b} {
		if err := s.SetStatus(ctx, []int64{r.ID}, true, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Withdraw(ctx, r.ID, "cli"); err != nil {
		t.Fatal(err)
	}
	if errs, err := a.FinishMany(ctx, []FinishItem{{ID: r.ID, State: Withdrawn}}); err != nil || errs[0] != nil {
		t.Fatalf("FinishMany at a: %v %v", errs, err)
	}
	if g, _ := a.Get(ctx, r.ID); g.State != Withdrawn || g.Announced {
		t.Fatalf("at a after its finish: state %s, announced %v; want withdrawn, not announced", g.State, g.Announced)
	}
	if g, _ := b.Get(ctx, r.ID); !g.Announced {
		t.Fatal("b's status changed by a's finish")
	}
	// b finds the rule final already: its own finish is a no-op for the
	// rule and still clears b's status.
	if errs, err := b.FinishMany(ctx, []FinishItem{{ID: r.ID, State: Withdrawn}}); err != nil || errs[0] != nil {
		t.Fatalf("FinishMany at b: %v %v", errs, err)
	}
	if g, _ := b.Get(ctx, r.ID); g.Announced {
		t.Fatal("b still says announced after its own finish")
	}
}

// EachActive hands over, one at a time and in id order, exactly the rules
// ActiveRules names (this site's, active, withdrawals in progress
// included) with their brief fields and this site's status;
// what the callback copies out stays valid after the walk; its error
// stops the walk; a cancelled walk fails (the rows seen are not desired
// state); and a callback slower than the store's timeout is not taken
// for a stalled database.
func testEachActive(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	cfg := fresh(t)
	a, b := open(t, cfg, "a"), open(t, cfg, "b")
	// More than the 1,024 rows after which the progress watch re-arms.
	const n = 2500
	in := make([]Input, 0, n)
	for i := range n {
		x := Input{Rule: rule(t, i+1, "discard"), Actor: "t"}
		switch i % 5 {
		case 1:
			x.Rule = rule(t, i+1, "rate-limit 1000")
			x.ExpiresAt = time.Now().Add(time.Hour)
		case 2:
			x.Sites = []string{"b"} // not a's
		case 3:
			x.Sites = []string{"a", "b"}
		}
		in = append(in, x)
	}
	stored, err := a.UpsertMany(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Withdraw(ctx, stored[4].ID, "t"); err != nil { // active, withdrawal requested
		t.Fatal(err)
	}
	if _, err := a.Withdraw(ctx, stored[9].ID, "t"); err != nil {
		t.Fatal(err)
	}
	if err := a.Finish(ctx, stored[9].ID, Withdrawn); err != nil { // final: not active
		t.Fatal(err)
	}
	if err := a.SetStatus(ctx, []int64{stored[0].ID}, true, ""); err != nil {
		t.Fatal(err)
	}
	if err := a.SetStatus(ctx, []int64{stored[1].ID}, false, "peer refused"); err != nil {
		t.Fatal(err)
	}
	if err := b.SetStatus(ctx, []int64{stored[5].ID}, true, ""); err != nil { // b's status, not a's
		t.Fatal(err)
	}
	// What EachActive must give, from List (every column, read apart).
	all, err := a.List(ctx, Active)
	if err != nil {
		t.Fatal(err)
	}
	var want []Rule
	for _, r := range slices.Backward(all) { // List is newest first
		if len(r.Sites) > 0 && !slices.Contains(r.Sites, "a") {
			continue
		}
		want = append(want, Rule{ID: r.ID, Rule: r.Rule, ExpiresAt: r.ExpiresAt, State: r.State,
			WithdrawRequested: r.WithdrawRequested, Announced: r.Announced, LastError: r.LastError})
	}
	if len(want) != n-n/5-1 {
		t.Fatalf("List: %d active rules at site a, want %d", len(want), n-n/5-1)
	}
	var got []Rule
	if err := a.EachActive(ctx, func(r *Rule) error {
		got = append(got, *r)
		return nil
	}); err != nil {
		t.Fatalf("EachActive: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("EachActive gave %d rules, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Rule != w.Rule || !g.ExpiresAt.Equal(w.ExpiresAt) || g.State != w.State ||
			g.WithdrawRequested != w.WithdrawRequested || g.Announced != w.Announced || g.LastError != w.LastError {
			t.Fatalf("EachActive's rule %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
	if got[0].ID != stored[0].ID || !got[0].Announced || got[1].LastError != "peer refused" {
		t.Fatalf("this site's status not given: %+v, %+v", got[0], got[1])
	}
	if act, err := a.ActiveRules(ctx); err != nil || !slices.Equal(ids(act), ids(got)) {
		t.Fatalf("ActiveRules = %v, %v; want EachActive's rules", ids(act), err)
	}

	// The callback's error stops the walk and is returned as it is.
	stop := errors.New("stop here")
	calls := 0
	err = a.EachActive(ctx, func(*Rule) error {
		if calls++; calls == 1500 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 1500 {
		t.Fatalf("EachActive after its callback failed at row 1500: %v after %d calls", err, calls)
	}

	// Cancelled midway: an error, never a shorter desired state.
	cctx, cancel := context.WithCancel(ctx)
	calls = 0
	err = a.EachActive(cctx, func(*Rule) error {
		if calls++; calls == 100 {
			cancel()
		}
		return nil
	})
	cancel()
	if err == nil {
		t.Fatalf("EachActive cancelled after 100 of %d rows returned no error (%d rows given)", len(want), calls)
	}

	// A slow callback is the caller's time, not a stalled database: the
	// store's clock moves three timeouts on while the caller holds a row.
	short := cfg
	clk := clock.NewFake(time.Now())
	short.Timeout, short.Clock = 500*time.Millisecond, clk
	c := open(t, short, "a")
	calls = 0
	err = c.EachActive(ctx, func(*Rule) error {
		if calls++; calls == 1 || calls == 1500 {
			clk.Advance(3 * short.Timeout)
		}
		return nil
	})
	if err != nil || calls != len(want) {
		t.Fatalf("EachActive with a callback slower than the %v timeout: %v after %d of %d rows", short.Timeout, err, calls, len(want))
	}
}

// The created entry of a rule's history is stored without its fields
// (the rule's row holds them): History rebuilds them, through every
// later change of each field, exactly as they were at creation.
func testCreatedRebuilt(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	s := open(t, fresh(t), "a")
	exp, later := time.Now().Add(time.Hour), time.Now().Add(48*time.Hour)
	ins := []Input{
		{Rule: rule(t, 1, "discard"), Actor: "cli", Reason: "first", Sites: []string{"a"}, ExpiresAt: exp},
		{Rule: rule(t, 2, "discard"), Actor: "config", Origin: "config:a"},
		{Rule: rule(t, 3, "rate-limit 10"), Actor: "feed", Set: "feed", Reason: "in a set"},
		{Rule: rule(t, 4, "discard"), Actor: "api", Reason: `plain "quoted" \\ text`},
	}
	created := map[int64]map[string]string{}
	var ids []int64
	for i, in := range ins {
		var r Rule
		var err error
		if i < 2 {
			r, _, err = s.Upsert(ctx, in)
		} else { // the bulk path
			var rs []Rule
			rs, err = s.UpsertMany(ctx, []Input{in})
			if err == nil {
				r = rs[0]
			}
		}
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		created[r.ID], ids = ruleFields(r), append(ids, r.ID)
	}
	// Change every field history records, some more than once.
	steps := []func() error{
		func() error {
			_, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "rate-limit 5"), Actor: "api", Reason: "second", ExpiresAt: later})
			return err
		},
		func() error { _, err := s.Withdraw(ctx, ids[0], "alice"); return err },
		func() error { return s.SetStatus(ctx, ids, true, "") },
		func() error {
			_, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), Actor: "bob", Keep: KeepReason | KeepExpiry})
			return err
		},
		func() error {
			_, _, err := s.Upsert(ctx, Input{Rule: rule(t, 2, "rate-limit 1"), Actor: "config", Origin: "config:a", Reason: "tuned", ExpiresAt: later})
			return err
		},
		func() error {
			_, err := s.UpsertMany(ctx, []Input{{Rule: rule(t, 3, "discard"), Actor: "feed", Set: "feed", Reason: "replaced"}})
			return err
		},
		func() error {
			_, _, err := s.Upsert(ctx, Input{Rule: rule(t, 4, "discard"), Actor: "feed", Set: "adopted", Sites: []string{"a"}})
			return err
		},
		func() error {
			_, err := s.WithdrawMany(ctx, []WithdrawItem{{ID: ids[3], Reason: "guardrail"}}, "admit")
			return err
		},
		func() error { return s.Finish(ctx, ids[3], Withdrawn) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	for _, id := range ids {
		h, err := s.History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) < 2 || h[0].Kind != EventCreated || h[0].Old != nil {
			t.Fatalf("rule %d: history %+v, want a created entry and later ones", id, h)
		}
		if !maps.Equal(h[0].New, created[id]) {
			t.Errorf("rule %d: created entry %v, want %v (the rule as created)", id, h[0].New, created[id])
		}
	}
	// A bulk load and a bulk update: enough entries at once for the
	// engines' bulk paths (PostgreSQL: COPY).
	var bulk, again []Input
	for i := range 300 {
		bulk = append(bulk, Input{Rule: rule(t, 1000+i, "discard"), Actor: "feed", Reason: "bulk"})
		again = append(again, Input{Rule: rule(t, 1000+i, "discard"), Actor: "feed", Reason: "bulk again"})
	}
	rs, err := s.UpsertMany(ctx, bulk)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertMany(ctx, again); err != nil {
		t.Fatal(err)
	}
	for _, r := range []Rule{rs[0], rs[299]} {
		h, err := s.History(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 2 || h[0].Kind != EventCreated || h[0].New["reason"] != "bulk" || h[0].Actor != "feed" ||
			h[1].Kind != EventUpdated || h[1].Old["reason"] != "bulk" || h[1].New["reason"] != "bulk again" {
			t.Errorf("history of a bulk-loaded rule: %+v", h)
		}
	}
}

// PurgeHistory removes history in id order: where the clock stepped back,
// an entry older than the cut that follows a newer one stays, so a kept
// created entry is never without the later entries it is rebuilt through.
func testPurgeByID(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	cfg := fresh(t)
	sc := &steppingClock{now: time.Now()}
	cfg.Clock = sc
	s := open(t, cfg, "a")
	r, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), Actor: "cli", Reason: "first"})
	if err != nil {
		t.Fatal(err)
	}
	cut := sc.Now().Add(-time.Minute)
	sc.set(cut.Add(-time.Minute)) // the clock steps back past the cut
	if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), Actor: "cli", Reason: "second"}); err != nil {
		t.Fatal(err)
	}
	sc.set(cut.Add(time.Hour))
	if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, 2, "discard"), Actor: "cli"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PurgeHistory(ctx, cut, 0); err != nil {
		t.Fatal(err)
	}
	h, err := s.History(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h[0].New["reason"] != "first" || h[1].New["reason"] != "second" {
		t.Fatalf("history after the purge: %+v, want the created entry (reason first) and the update", h)
	}
}

// steppingClock is a clock that an NTP correction can step back (a
// clock.Fake never goes back); its timers are real.
type steppingClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *steppingClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func (c *steppingClock) NewTimer() clock.Timer { return clock.Real{}.NewTimer() }
