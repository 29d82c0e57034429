package store

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestChangedSinceSQLite(t *testing.T)   { testChangedSince(t, sqliteFresh) }
func TestChangedSincePostgres(t *testing.T) { testChangedSince(t, postgresFresh) }

func testChangedSince(t *testing.T, fresh freshFunc) {
	cfg := fresh(t)
	s := open(t, cfg, "a")
	ctx := ctxT(t)
	exp := time.Now().Add(time.Hour)
	r1, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), ExpiresAt: exp, Actor: "t"})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := s.Revision(ctx)
	if err != nil || rev == 0 {
		t.Fatalf("Revision = %d, %v", rev, err)
	}
	if d, err := s.ChangedSince(ctx, rev); err != nil || len(d.Active)+len(d.Gone) != 0 || d.Next != rev {
		t.Fatalf("nothing changed: %+v, %v", d, err)
	}
	// Status writes are not changes.
	if err := s.SetStatus(ctx, []int64{r1.ID}, true, ""); err != nil {
		t.Fatal(err)
	}
	if d, err := s.ChangedSince(ctx, rev); err != nil || len(d.Active)+len(d.Gone) != 0 {
		t.Fatalf("after a status write: %+v, %v", d, err)
	}
	r2, _, err := s.Upsert(ctx, Input{Rule: rule(t, 2, "discard"), ExpiresAt: exp, Actor: "t"})
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := s.Upsert(ctx, Input{Rule: rule(t, 3, "discard"), Sites: []string{"b"}, AllowUnknownSites: true, Actor: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Withdraw(ctx, r1.ID, "t"); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, r1.ID, Withdrawn); err != nil {
		t.Fatal(err)
	}
	d, err := s.ChangedSince(ctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Active) != 1 || d.Active[0].ID != r2.ID || !d.Active[0].Rule.IsValid() {
		t.Fatalf("Active = %+v, want rule %d", d.Active, r2.ID)
	}
	slices.Sort(d.Gone)
	if want := []int64{r1.ID, other.ID}; !slices.Equal(d.Gone, want) {
		t.Fatalf("Gone = %v, want %v (final, other site)", d.Gone, want)
	}
	if d.Next <= rev {
		t.Fatalf("Next = %d, not after %d", d.Next, rev)
	}
	if again, err := s.ChangedSince(ctx, d.Next); err != nil || len(again.Active)+len(again.Gone) != 0 {
		t.Fatalf("after Next: %+v, %v", again, err)
	}
	// The streaming read: the changed ids around the active one (a lower
	// and a higher, both gone) are told apart from it in one walk, and
	// the caller's error ends the read as it is.
	var seen []int64
	ch, err := s.EachChangedSince(ctx, rev, func(r *Rule) error {
		seen = append(seen, r.ID)
		return nil
	})
	if err != nil || !slices.Equal(seen, []int64{r2.ID}) || !slices.Equal(ch.Gone, d.Gone) || ch.Next != d.Next {
		t.Fatalf("EachChangedSince = %v, %+v, %v; want [%d], gone %v, next %d", seen, ch, err, r2.ID, d.Gone, d.Next)
	}
	stop := errors.New("stop")
	if _, err := s.EachChangedSince(ctx, rev, func(*Rule) error { return stop }); err != stop {
		t.Fatalf("EachChangedSince with a failing caller: %v, want its error", err)
	}
	// Changed ids in one run are read as a range of ids (above); with a
	// gap, an active rule of this site that did not change lies between
	// them and is not read.
	r4, _, err := s.Upsert(ctx, Input{Rule: rule(t, 4, "discard"), ExpiresAt: exp, Actor: "t"})
	if err != nil {
		t.Fatal(err)
	}
	rev3, err := s.Revision(ctx) // r4 stays as it is from here on
	if err != nil {
		t.Fatal(err)
	}
	r5, _, err := s.Upsert(ctx, Input{Rule: rule(t, 5, "discard"), ExpiresAt: exp, Actor: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, 2, "accept"), ExpiresAt: exp, Actor: "t"}); err != nil {
		t.Fatal(err)
	}
	gap, err := s.ChangedSince(ctx, rev3)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, r := range gap.Active {
		got = append(got, r.ID)
	}
	if want := []int64{r2.ID, r5.ID}; r4.ID >= r5.ID || !slices.Equal(got, want) || len(gap.Gone) != 0 {
		t.Fatalf("changed around an unchanged rule: active %v, gone %v; want %v", got, gap.Gone, want)
	}
	if after, err := s.ChangedSince(ctx, gap.Next-1); err != nil || len(after.Active) != 1 || after.Active[0].ID != r2.ID {
		t.Fatalf("the last change alone: %+v, %v; want rule %d", after, err, r2.ID)
	}
}
