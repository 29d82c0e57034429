package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/clock"
)

// faultStore opens a SQLite store with a fake clock (so that the file
// and integrity watchers never fire on their own: the tests call the
// checks) and one stored rule.
func faultStore(t *testing.T) (*Store, Config) {
	t.Helper()
	cfg := sqliteFresh(t)
	cfg.Clock = clock.NewFake(time.Now())
	s := open(t, cfg, "a")
	if _, _, err := s.Upsert(ctxT(t), Input{Rule: rule(t, 1, "discard"), Actor: "cli"}); err != nil {
		t.Fatal(err)
	}
	return s, cfg
}

func removeDB(t *testing.T, path string) {
	t.Helper()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

// wantLost checks that err is the refusal of a lost store: 503-class,
// naming the file and the next step.
func wantLost(t *testing.T, what string, err error, path string) {
	t.Helper()
	var re *RefusedError
	if !errors.As(err, &re) || re.Kind != "lost" || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("%s: %v, want the refusal of a lost store (ErrUnavailable)", what, err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "--accept-new-store") {
		t.Errorf("%s: %q does not name the file and the next step", what, err)
	}
}

// The database files deleted while running: the next commit is refused
// (the commit's own check), not written into the unlinked file, and the
// reconciler's reads fail instead of answering from nowhere.
func TestDeletedFileRefusesTheNextCommit(t *testing.T) {
	s, cfg := faultStore(t)
	removeDB(t, cfg.Path)
	// Not announced ahead of a commit that will be refused.
	if err := s.EarlyOK(ctxT(t), Input{Rule: rule(t, 2, "discard"), Actor: "cli"}); !errors.Is(err, ErrNotEarly) {
		t.Errorf("EarlyOK right after rm: %v, want ErrNotEarly", err)
	}
	_, _, err := s.Upsert(ctxT(t), Input{Rule: rule(t, 2, "discard"), Actor: "cli"})
	wantLost(t, "upsert after rm", err, cfg.Path)
	if !strings.Contains(err.Error(), "deleted") || !strings.Contains(err.Error(), cfg.Path+".rescued") {
		t.Errorf("upsert after rm: %q does not say where the open file is copied", err)
	}
	if _, err := s.ActiveRules(ctxT(t)); !errors.Is(err, ErrUnavailable) {
		t.Errorf("ActiveRules after rm: %v, want ErrUnavailable (unknown is not empty)", err)
	}
	if _, err := s.Revision(ctxT(t)); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Revision after rm: %v, want ErrUnavailable", err)
	}
	if _, err := os.Stat(cfg.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the deleted file was created again: %v", err)
	}
	// The copy of the old file, moved in place as the log says, is the
	// store with its rule.
	select {
	case <-s.rescued:
	case <-time.After(30 * time.Second):
		t.Fatal("no copy of the lost file within 30 s")
	}
	for _, suffix := range []string{"", "-wal"} {
		if err := os.Rename(cfg.Path+".rescued"+suffix, cfg.Path+suffix); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Clock = nil
	back := open(t, cfg, "a")
	rs, err := back.List(ctxT(t), "")
	if err != nil || len(rs) != 1 || rs[0].Rule.Match != rule(t, 1, "discard").Match {
		t.Fatalf("the rescued store holds %v, %v; want the rule stored before the loss", rs, err)
	}
}

// The periodic check (CheckFile) finds a file deleted, replaced by an
// empty one, or truncated in place, with no write to trigger it.
func TestCheckFileFindsALostFile(t *testing.T) {
	for _, tc := range []struct {
		name, what string
		do         func(t *testing.T, path string)
	}{
		{"deleted", "deleted", func(t *testing.T, path string) { removeDB(t, path) }},
		{"replaced by an empty file", "replaced", func(t *testing.T, path string) {
			removeDB(t, path)
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated in place", "truncated", func(t *testing.T, path string) {
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, cfg := faultStore(t)
			if err := s.CheckFile(); err != nil {
				t.Fatalf("CheckFile on the file opened: %v", err)
			}
			tc.do(t, cfg.Path)
			wantLost(t, "CheckFile", s.CheckFile(), cfg.Path)
			if !strings.Contains(s.Refusal().Msg, tc.what) {
				t.Errorf("refusal %q does not say the file was %s", s.Refusal().Msg, tc.what)
			}
			_, _, err := s.Upsert(ctxT(t), Input{Rule: rule(t, 2, "discard"), Actor: "cli"})
			wantLost(t, "upsert", err, cfg.Path)
			if _, err := s.List(ctxT(t), ""); !errors.Is(err, ErrUnavailable) {
				t.Errorf("List: %v, want ErrUnavailable", err)
			}
		})
	}
}

// A fresh store on the same path: a new id, and Vouch holds it where the
// record says this appliance ran with rules; --accept-new-store takes it.
func TestVouchHoldsANewStoreAfterRules(t *testing.T) {
	s, cfg := faultStore(t)
	file := filepath.Join(filepath.Dir(cfg.Path), "ribkeeper.identity")
	v, err := s.Vouch(ctxT(t), file, false)
	if err != nil || v.Held || !v.New {
		t.Fatalf("first Vouch = %+v, %v; want a new record", v, err)
	}
	old := v.Now
	// The same store again: not held, even once its rules are gone.
	if v, err := s.Vouch(ctxT(t), file, false); err != nil || v.Held || v.New {
		t.Fatalf("Vouch of the same store = %+v, %v", v, err)
	}
	s.Close()
	removeDB(t, cfg.Path)

	s2 := open(t, cfg, "a")
	v, err = s2.Vouch(ctxT(t), file, false)
	if err != nil || !v.Held {
		t.Fatalf("Vouch of a new store = %+v, %v; want held", v, err)
	}
	for _, want := range []string{old.ID, v.Now.ID, "1 active rules", "0 active rules", cfg.Path, file} {
		if !strings.Contains(v.Line, want) {
			t.Errorf("line %q does not name %q", v.Line, want)
		}
	}
	_, _, err = s2.Upsert(ctxT(t), Input{Rule: rule(t, 2, "discard"), Actor: "cli"})
	var re *RefusedError
	if !errors.As(err, &re) || re.Kind != "held" || !strings.Contains(err.Error(), "--accept-new-store") {
		t.Fatalf("write to a held store: %v", err)
	}
	if rec, _, _ := ReadRecord(file); rec.ID != old.ID {
		t.Fatalf("a held start rewrote the record: %+v", rec)
	}
	s2.Close()

	s3 := open(t, cfg, "a")
	v, err = s3.Vouch(ctxT(t), file, true)
	if err != nil || v.Held || !v.Accepted {
		t.Fatalf("Vouch accepting = %+v, %v", v, err)
	}
	if rec, _, _ := ReadRecord(file); rec.ID != v.Now.ID {
		t.Fatalf("the record names %s after accepting, want %s", rec.ID, v.Now.ID)
	}
	if _, _, err := s3.Upsert(ctxT(t), Input{Rule: rule(t, 2, "discard"), Actor: "cli"}); err != nil {
		t.Fatalf("write after accepting: %v", err)
	}
}

// A store that had no rules is replaced without asking: nothing to take
// away from the routers.
func TestVouchTakesANewStoreAfterNoRules(t *testing.T) {
	cfg := sqliteFresh(t)
	s := open(t, cfg, "a")
	file := filepath.Join(t.TempDir(), "id")
	if _, err := s.Vouch(ctxT(t), file, false); err != nil {
		t.Fatal(err)
	}
	s.Close()
	removeDB(t, cfg.Path)
	s2 := open(t, cfg, "a")
	if v, err := s2.Vouch(ctxT(t), file, false); err != nil || v.Held {
		t.Fatalf("Vouch after an empty store = %+v, %v", v, err)
	}
}

// corruptPages overwrites n pages in the middle of the file with
// garbage.
func corruptPages(t *testing.T, path string, n int) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	pages := fi.Size() / page
	if pages < 8 {
		t.Fatalf("%s has %d pages: too small to corrupt in the middle", path, pages)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := []byte(strings.Repeat("\xa5corrupt", page/8))
	for i := range int64(n) {
		if _, err := f.WriteAt(junk, (pages/2+i)*page); err != nil {
			t.Fatal(err)
		}
	}
}

// manyRules stores n rules with long reasons, so that the rules and
// history span many pages, and checkpoints the WAL into the file.
func manyRules(t *testing.T, s *Store, n int) {
	t.Helper()
	var in []Input
	for i := range n {
		in = append(in, Input{Rule: rule(t, 100+i, "discard"), Actor: "cli", Reason: strings.Repeat("r", 400)})
	}
	if _, err := s.UpsertMany(ctxT(t), in); err != nil {
		t.Fatal(err)
	}
	if _, err := s.eng.reader().exec(ctxT(t), "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
}

func wantCorrupt(t *testing.T, s *Store, path string) {
	t.Helper()
	in := s.Integrity()
	if in == nil || !in.Corrupt || in.OK {
		t.Fatalf("integrity %+v, want corrupt", in)
	}
	_, _, err := s.Upsert(ctxT(t), Input{Rule: rule(t, 5, "discard"), Actor: "cli"})
	var re *RefusedError
	if !errors.As(err, &re) || re.Kind != "corrupt" || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("write to a corrupt store: %v", err)
	}
	for _, want := range []string{path, ".recover", "backup"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if _, err := s.ActiveRules(ctxT(t)); !errors.Is(err, ErrUnavailable) {
		t.Errorf("ActiveRules of a corrupt store: %v, want ErrUnavailable (not the whole desired state)", err)
	}
}

// A file corrupted while running is found by the scheduled check (here
// called at once), which reads the disk on a connection of its own.
func TestIntegrityCheckFindsCorruptionWhileRunning(t *testing.T) {
	s, cfg := faultStore(t)
	manyRules(t, s, 300)
	if in := s.CheckIntegrity(ctxT(t)); in == nil || !in.OK {
		t.Fatalf("integrity of a sound file: %+v", in)
	}
	corruptPages(t, cfg.Path, 3)
	s.CheckIntegrity(ctxT(t))
	wantCorrupt(t, s, cfg.Path)
}

// A file corrupt at start: Open checks it and the store refuses writes.
func TestIntegrityCheckAtOpen(t *testing.T) {
	s, cfg := faultStore(t)
	manyRules(t, s, 300)
	s.Close()
	corruptPages(t, cfg.Path, 3)
	s2, err := Open(ctxT(t), cfg)
	if err != nil {
		t.Fatalf("Open of a file corrupt where the schema is sound: %v; want it open, refusing writes", err)
	}
	t.Cleanup(func() { s2.Close() })
	wantCorrupt(t, s2, cfg.Path)
}

// A write whose statements hang (a disk that stops answering before the
// commit) answers at its deadline that nothing was stored, and its
// transaction is rolled back when the disk answers: nothing lands behind
// the client's back. A write queued behind it answers at its own deadline
// and never runs; reads go on meanwhile.
func TestHungWriteIsAnsweredAndNeverLands(t *testing.T) {
	cfg := sqliteFresh(t)
	cfg.WriteTimeout = 300 * time.Millisecond
	// The late commit is counted, then logged: the test waits for the line.
	lines := make(chan string, 64)
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: lineWriter(lines), Level: hclog.Warn})
	s := open(t, cfg, "a")
	ctx := ctxT(t)
	hung, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- s.write(ctx, "hung upsert", 1, func(ctx context.Context, w *wtx) (bool, error) {
			close(hung)
			<-release // the disk hangs
			e, err := encode(Input{Rule: rule(t, 1, "discard"), Actor: "cli"}, -1, s.now())
			if err != nil {
				return false, err
			}
			_, _, changed, err := s.upsertTx(ctx, w, &e, s.now())
			return changed, err
		})
	}()
	<-hung
	wantTimeout(t, "the hung write", waitErr(t, first), "nothing was stored")
	_, _, err := s.Upsert(ctx, Input{Rule: rule(t, 2, "discard"), Actor: "cli"})
	wantTimeout(t, "a write queued behind it", err, "nothing was stored")
	if _, err := s.List(ctx, ""); err != nil {
		t.Fatalf("a read while the write hangs: %v", err)
	}
	close(release)
	// The next write commits, after the hung transaction was rolled back.
	if _, _, err := s.Upsert(ctx, Input{Rule: rule(t, 3, "discard"), Actor: "cli"}); err != nil {
		t.Fatal(err)
	}
	rs, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Rule.Match != rule(t, 3, "discard").Match {
		t.Fatalf("stored %v, want only the write made after the disk answered", rs)
	}
}

// A write whose COMMIT hangs is answered at its deadline that its
// outcome is pending; when the disk answers, the commit lands, is
// counted and logged, and shows in reads.
func TestHungCommitIsReportedPending(t *testing.T) {
	cfg := sqliteFresh(t)
	cfg.WriteTimeout = 300 * time.Millisecond
	// The late commit is counted, then logged: the test waits for the line.
	lines := make(chan string, 64)
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: lineWriter(lines), Level: hclog.Warn})
	s := open(t, cfg, "a")
	ctx := ctxT(t)
	hung, release := make(chan struct{}), make(chan struct{})
	s.beforeCommit = func(context.Context) error {
		select {
		case <-hung:
		default:
			close(hung)
			<-release
		}
		return nil
	}
	first := make(chan error, 1)
	go func() {
		_, _, err := s.Upsert(ctx, Input{Rule: rule(t, 1, "discard"), Actor: "cli"})
		first <- err
	}()
	<-hung
	wantTimeout(t, "the write whose commit hangs", waitErr(t, first), "may still be stored")
	close(release)
	for logged := false; !logged; {
		select {
		case l := <-lines:
			logged = strings.Contains(l, "committed after all")
		case <-time.After(30 * time.Second):
			t.Fatal("the late commit was not logged within 30 s of the disk answering")
		}
	}
	if n := s.LateCommits(); n != 1 {
		t.Fatalf("late commits %d, want 1", n)
	}
	rs, err := s.List(ctx, "")
	if err != nil || len(rs) != 1 {
		t.Fatalf("after the disk answered: %v, %v; want the rule whose commit landed", rs, err)
	}
}

func wantTimeout(t *testing.T, what string, err error, says string) {
	t.Helper()
	if !errors.Is(err, ErrWriteTimeout) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("%s: %v, want ErrWriteTimeout (503)", what, err)
	}
	if !strings.Contains(err.Error(), says) || !strings.Contains(err.Error(), "write_timeout") {
		t.Errorf("%s: %q does not say %q and name the setting", what, err, says)
	}
}

func waitErr(t *testing.T, c <-chan error) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the write was not answered within 30 s: it waits for the hung disk")
		return nil
	}
}

// lineWriter sends each log line written to it on c (dropped when c is
// full).
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	select {
	case w <- string(p):
	default:
	}
	return len(p), nil
}

// The identity record follows a burst of writes once a second, not once
// per commit: the first change after a quiet second is recorded at once,
// later ones when the second since that update has passed.
func TestRecordFollowsABurstOnceASecond(t *testing.T) {
	s, cfg := faultStore(t)
	fc := cfg.Clock.(*clock.Fake)
	file := filepath.Join(t.TempDir(), "ribkeeper.identity")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.KeepRecord(ctx, file) }()
	t.Cleanup(func() { cancel(); <-done })
	recorded := func() int64 { rec, _, _ := ReadRecord(file); return rec.LastID }
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 30 s", what)
			}
			<-tick.C
		}
	}
	// The store's first rule, written before KeepRecord started: at once.
	waitUntil("the first rule recorded", func() bool { return recorded() == 1 })
	// Two more commits within the second: each wake-up is taken (the
	// second only once the first was dealt with), neither rewrites the
	// record yet.
	for i := 2; i <= 3; i++ {
		if _, _, err := s.Upsert(ctxT(t), Input{Rule: rule(t, i, "discard"), Actor: "cli"}); err != nil {
			t.Fatal(err)
		}
		waitUntil("the wake-up taken", func() bool { return len(s.recordWake) == 0 })
	}
	if got := recorded(); got != 1 {
		t.Fatalf("record rewritten within the second (last rule id %d): one update per commit", got)
	}
	fc.Advance(recordEvery)
	waitUntil("the burst recorded once the second passed", func() bool { return recorded() == 3 })
}
