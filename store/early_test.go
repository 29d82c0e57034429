package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/store/disktest"
)

func TestEarlyOKInputSQLite(t *testing.T)   { testEarlyOKInput(t, sqliteFresh) }
func TestEarlyOKInputPostgres(t *testing.T) { testEarlyOKInput(t, postgresFresh) }

// EarlyOK refuses what the write would refuse, and a rule that once
// stored does not target this site.
func testEarlyOKInput(t *testing.T, fresh freshFunc) {
	cfg := fresh(t)
	open(t, cfg, "b") // registers site b
	s := open(t, cfg, "a")
	ctx := ctxT(t)
	ok := func(what string, in Input) {
		t.Helper()
		if err := s.EarlyOK(ctx, in); err != nil {
			t.Errorf("%s: EarlyOK = %v, want nil", what, err)
		}
	}
	refused := func(what string, in Input, want error) {
		t.Helper()
		if err := s.EarlyOK(ctx, in); !errors.Is(err, want) {
			t.Errorf("%s: EarlyOK = %v, want %v", what, err, want)
		}
	}
	ok("a rule for every site", Input{Rule: rule(t, 1, "discard")})
	ok("a rule for this site and another known one", Input{Rule: rule(t, 1, "discard"), Sites: []string{"b", "a"}})
	ok("an unknown site allowed", Input{Rule: rule(t, 1, "discard"), Sites: []string{"a", "c"}, AllowUnknownSites: true})
	refused("an invalid rule", Input{}, ErrInvalidInput)
	refused("a reason with a newline", Input{Rule: rule(t, 1, "discard"), Reason: "a\nb"}, ErrInvalidInput)
	refused("an expiry in the past", Input{Rule: rule(t, 1, "discard"), ExpiresAt: time.Now().Add(-time.Minute)}, ErrInvalidInput)
	refused("an unknown site", Input{Rule: rule(t, 1, "discard"), Sites: []string{"a", "c"}}, ErrInvalidInput)
	refused("another site only", Input{Rule: rule(t, 1, "discard"), Sites: []string{"b"}}, ErrNotEarly)

	// A rule declared by site b's configuration: the API cannot change it.
	if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, 2, "discard"), Origin: "config:b"}); err != nil {
		t.Fatal(err)
	}
	refused("a Match declared in a configuration", Input{Rule: rule(t, 2, "rate-limit 1000")}, ErrDeclared)
	ok("the same Match from its own configuration", Input{Rule: rule(t, 2, "rate-limit 1000"), Origin: "config:b"})

	// An update that keeps the stored sites targets where the stored rule does.
	if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, 3, "discard"), Sites: []string{"b"}}); err != nil {
		t.Fatal(err)
	}
	refused("an update keeping another site", Input{Rule: rule(t, 3, "rate-limit 1000"), Keep: KeepSites}, ErrNotEarly)
	ok("an update moving the rule here", Input{Rule: rule(t, 3, "rate-limit 1000"), Sites: []string{"a"}})
	ok("a new rule keeping sites it has not got", Input{Rule: rule(t, 4, "discard"), Keep: KeepSites})
}

func TestEarlyOKFailedCommitSQLite(t *testing.T)   { testEarlyOKFailedCommit(t, sqliteFresh) }
func TestEarlyOKFailedCommitPostgres(t *testing.T) { testEarlyOKFailedCommit(t, postgresFresh) }

// After a commit failed, no write is expected to commit until one did; a
// write refused for its input says nothing about the store.
func testEarlyOKFailedCommit(t *testing.T, fresh freshFunc) {
	s := open(t, fresh(t), "a")
	ctx := ctxT(t)
	in := Input{Rule: rule(t, 1, "discard")}
	if err := s.EarlyOK(ctx, in); err != nil {
		t.Fatalf("healthy store: %v", err)
	}
	s.beforeCommit = func(context.Context) error { return errors.New("disk I/O error (injected)") }
	if _, _, err := s.Upsert(ctx, in); err == nil {
		t.Fatal("the injected commit failure did not fail the write")
	}
	err := s.EarlyOK(ctx, Input{Rule: rule(t, 2, "discard")})
	if !errors.Is(err, ErrNotEarly) || !strings.Contains(err.Error(), "last commit failed") || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("after a failed commit: EarlyOK = %v, want ErrNotEarly naming the failure", err)
	}
	s.beforeCommit = nil
	if _, _, err := s.Upsert(ctx, in); err != nil {
		t.Fatal(err)
	}
	if err := s.EarlyOK(ctx, Input{Rule: rule(t, 2, "discard")}); err != nil {
		t.Fatalf("after a commit succeeded again: EarlyOK = %v", err)
	}
	// A write refused for its input is rolled back alone: the store is fine.
	if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, 3, "discard"), Sites: []string{"nowhere"}}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("unknown site: %v", err)
	}
	if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, 4, "discard"), Origin: "config:a"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, 4, "rate-limit 1000")}); !errors.Is(err, ErrDeclared) {
		t.Fatalf("declared in a configuration: %v", err)
	}
	if err := s.EarlyOK(ctx, Input{Rule: rule(t, 2, "discard")}); err != nil {
		t.Fatalf("after writes refused for their input: EarlyOK = %v", err)
	}
}

func TestEarlyOKStalledSQLite(t *testing.T)   { testEarlyOKStalled(t, sqliteFresh) }
func TestEarlyOKStalledPostgres(t *testing.T) { testEarlyOKStalled(t, postgresFresh) }

// While a transaction runs for longer than a commit should take (a hung
// disk), no write is expected to commit at once.
func testEarlyOKStalled(t *testing.T, fresh freshFunc) {
	cfg := fresh(t)
	clk := clock.NewFake(time.Now())
	cfg.Clock = clk
	s := open(t, cfg, "a")
	ctx := ctxT(t)
	in := Input{Rule: rule(t, 2, "discard")}
	entered, release := make(chan struct{}), make(chan struct{})
	s.beforeCommit = func(context.Context) error {
		close(entered)
		<-release
		return nil
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := s.Upsert(context.Background(), Input{Rule: rule(t, 1, "discard")})
		done <- err
	}()
	<-entered
	if err := s.EarlyOK(ctx, in); err != nil {
		t.Fatalf("a commit running for no time at all: EarlyOK = %v", err)
	}
	clk.Advance(earlyStall + time.Second)
	err := s.EarlyOK(ctx, in)
	if !errors.Is(err, ErrNotEarly) || !strings.Contains(err.Error(), "running for") {
		t.Fatalf("a commit running for %v: EarlyOK = %v, want ErrNotEarly naming the stall", earlyStall+time.Second, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the slow write: %v", err)
	}
	if err := s.EarlyOK(ctx, in); err != nil {
		t.Fatalf("after the slow commit ended: EarlyOK = %v", err)
	}
}

// A database that turned read-only fails its writes (SQLite's own
// "readonly database" error, here from PRAGMA query_only on the write
// connection): no write is expected to commit until one did.
func TestEarlyOKReadOnlyDatabase(t *testing.T) {
	s := open(t, sqliteFresh(t), "a")
	ctx := ctxT(t)
	in := Input{Rule: rule(t, 1, "discard")}
	readOnly := func(on bool) {
		t.Helper()
		v := "0"
		if on {
			v = "1"
		}
		if _, err := s.group.ss.conn.ExecContext(ctx, "PRAGMA query_only = "+v); err != nil {
			t.Fatal(err)
		}
	}
	readOnly(true)
	_, _, err := s.Upsert(ctx, in)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "readonly") {
		t.Fatalf("write to a read-only database: %v", err)
	}
	if err := s.EarlyOK(ctx, in); !errors.Is(err, ErrNotEarly) || !strings.Contains(err.Error(), "readonly") {
		t.Fatalf("after a refused write: EarlyOK = %v, want ErrNotEarly naming the read-only database", err)
	}
	readOnly(false)
	if _, _, err := s.Upsert(ctx, in); err != nil {
		t.Fatal(err)
	}
	if err := s.EarlyOK(ctx, in); err != nil {
		t.Fatalf("writable again: EarlyOK = %v", err)
	}
}

// On a small file system: EarlyOK says no while less than EarlyFreeMargin
// is free, though such a write still commits when it fits; on a full
// disk the write fails, and early announcement waits for a commit to
// succeed once there is room again.
func TestEarlyOKDiskSpace(t *testing.T) {
	disk := disktest.Mount(t, "4m")
	s := open(t, Config{Path: filepath.Join(disk, "rk.db")}, "a")
	ctx := ctxT(t)
	if err := s.EarlyOK(ctx, Input{Rule: rule(t, 1, "discard")}); err != nil {
		t.Fatalf("%s free: EarlyOK = %v", free(t, disk), err)
	}

	// Less than the margin free, enough for one rule.
	filler := disktest.Fill(t, disk, "filler")
	fi, err := os.Stat(filler)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filler, fi.Size()-EarlyFreeMargin/2); err != nil {
		t.Fatal(err)
	}
	err = s.EarlyOK(ctx, Input{Rule: rule(t, 1, "discard")})
	if !errors.Is(err, ErrNotEarly) || !strings.Contains(err.Error(), "free") || !strings.Contains(err.Error(), disk) {
		t.Fatalf("%s free: EarlyOK = %v, want ErrNotEarly naming the file system", free(t, disk), err)
	}
	if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard")}); err != nil {
		t.Fatalf("a write that fits, with %s free: %v", free(t, disk), err)
	}

	// Full.
	disktest.Fill(t, disk, "filler2")
	if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, 2, "discard")}); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "full") {
		t.Fatalf("write on a full disk: %v", err)
	}
	for _, f := range []string{filler, filepath.Join(disk, "filler2")} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	err = s.EarlyOK(ctx, Input{Rule: rule(t, 2, "discard")})
	if !errors.Is(err, ErrNotEarly) || !strings.Contains(err.Error(), "last commit failed") {
		t.Fatalf("room again, no commit since the failure: EarlyOK = %v", err)
	}
	if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, 2, "discard")}); err != nil {
		t.Fatal(err)
	}
	if err := s.EarlyOK(ctx, Input{Rule: rule(t, 3, "discard")}); err != nil {
		t.Fatalf("room again and a commit succeeded: EarlyOK = %v", err)
	}
}

// A file system mounted read-only is no place to announce ahead of a
// commit. (Linux refuses to remount read-only under files open for
// writing, so this checks the reading itself; the kernel still does it to
// a file system that hit errors.)
func TestDiskConditionReadOnly(t *testing.T) {
	disk := disktest.Mount(t, "1m")
	if kind, why := diskCondition(disk); kind != "" {
		t.Fatalf("an empty tmpfs: %s", why)
	}
	disktest.ReadOnly(t, disk, true)
	if kind, why := diskCondition(disk); kind != "read-only" || !strings.Contains(why, disk) {
		t.Fatalf("a read-only tmpfs: %q %q", kind, why)
	}
	disktest.ReadOnly(t, disk, false)
}

func free(t *testing.T, dir string) string {
	n, _, err := diskSpace(dir)
	if err != nil {
		t.Fatal(err)
	}
	return bytesText(n)
}

// GetBrief reads what a withdrawal checks exactly as Get does, and
// EarlyWithdrawOK lets only an active rule of this site leave ahead of
// its withdrawal's commit.
func TestEarlyWithdrawOK(t *testing.T) {
	ctx := ctxT(t)
	s := open(t, sqliteFresh(t), "a")
	here, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), Actor: "noc", Origin: "", ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	there, _, err := s.Upsert(ctx, Input{Rule: rule(t, 2, "discard"), Actor: "noc", Sites: []string{"b"}, AllowUnknownSites: true})
	if err != nil {
		t.Fatal(err)
	}
	brief := func(id int64) Rule {
		t.Helper()
		full, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.GetBrief(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if b.ID != full.ID || b.Rule != full.Rule || b.Actor != full.Actor || b.Origin != full.Origin ||
			!slices.Equal(b.Sites, full.Sites) || !b.ExpiresAt.Equal(full.ExpiresAt) || b.State != full.State ||
			b.WithdrawRequested != full.WithdrawRequested {
			t.Fatalf("GetBrief(%d) = %+v, Get = %+v", id, b, full)
		}
		return b
	}
	if err := s.EarlyWithdrawOK(brief(here.ID)); err != nil {
		t.Fatalf("an active rule of this site: %v", err)
	}
	if err := s.EarlyWithdrawOK(brief(there.ID)); !errors.Is(err, ErrNotEarly) {
		t.Fatalf("another site's rule: %v, want ErrNotEarly", err)
	}
	if _, err := s.Withdraw(ctx, here.ID, "noc"); err != nil {
		t.Fatal(err)
	}
	if err := s.EarlyWithdrawOK(brief(here.ID)); !errors.Is(err, ErrNotEarly) {
		t.Fatalf("a rule whose withdrawal is requested: %v, want ErrNotEarly", err)
	}
	if _, err := s.GetBrief(ctx, 999); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetBrief(unknown) = %v, want ErrNotFound", err)
	}
}

// On SQLite EarlyOK skips its read for a plain write (no sites, no origin)
// whose Match has no declared or sited active rule (special.go): rules
// stored before the store opened are known from its first read, rules
// stored since from its own commits, and the set reloads past its bound
// without losing any.
func TestEarlyOKSpecialRules(t *testing.T) {
	cfg := sqliteFresh(t)
	ctx := ctxT(t)
	before := open(t, cfg, "b")
	if _, _, err := before.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), Origin: "config:b"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := before.Upsert(ctx, Input{Rule: rule(t, 2, "discard"), Sites: []string{"b"}}); err != nil {
		t.Fatal(err)
	}
	before.Close()
	s := open(t, cfg, "a")
	if s.spec == nil || len(s.spec.m) != 2 {
		t.Fatalf("special set at open: %+v, want the declared and the sited rule", s.spec)
	}
	if err := s.EarlyOK(ctx, Input{Rule: rule(t, 1, "rate-limit 1000"), Keep: KeepSites}); !errors.Is(err, ErrDeclared) {
		t.Errorf("declared before open: EarlyOK = %v, want ErrDeclared", err)
	}
	if err := s.EarlyOK(ctx, Input{Rule: rule(t, 2, "rate-limit 1000"), Keep: KeepSites}); !errors.Is(err, ErrNotEarly) {
		t.Errorf("sited elsewhere before open: EarlyOK = %v, want ErrNotEarly", err)
	}
	// Stored since, through this store: a sited rule, then its update.
	s.spec.limit = 3 // the next notes reload the set
	for i := 3; i <= 5; i++ {
		if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, i, "discard"), Sites: []string{"b"}, AllowUnknownSites: true}); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.spec.m) != 5 || s.spec.limit != specialFloor {
		t.Errorf("after a reload: %d matches, limit %d; want 5 and %d", len(s.spec.m), s.spec.limit, specialFloor)
	}
	for i := 3; i <= 5; i++ {
		if err := s.EarlyOK(ctx, Input{Rule: rule(t, i, "rate-limit 1000"), Keep: KeepSites}); !errors.Is(err, ErrNotEarly) {
			t.Errorf("rule %d sited elsewhere: EarlyOK = %v, want ErrNotEarly", i, err)
		}
	}
	if err := s.EarlyOK(ctx, Input{Rule: rule(t, 9, "discard"), Keep: KeepSites}); err != nil {
		t.Errorf("a plain new rule: EarlyOK = %v, want nil", err)
	}
	// PostgreSQL is shared: no set, always the read.
	if pg := open(t, postgresFresh(t), "a"); pg.spec != nil {
		t.Error("a PostgreSQL store keeps a special set")
	}
}
