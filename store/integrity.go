package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mattn/go-sqlite3"
)

// Corruption found early.
//
// A SQLite file damaged on disk (a bad sector, a write by another
// program, a torn copy) may still answer most queries: a list that skips
// the rows of a damaged page would look like a smaller desired state.
// So the store checks the file (PRAGMA quick_check: every page and
// record, without cross-checking index content, so that it stays linear
// in the file's size) at start, on a schedule off the write path
// ([store] integrity_check_interval), and as soon as any statement
// reports corruption. A store that fails:
//
//   - refuses every write (*RefusedError, kind "corrupt"; the API's
//     503) with a message naming the file and the next step;
//   - fails the reads the reconciler makes (EachActive, ActiveRules,
//     Revision, ChangedSince), so that it keeps the desired state it
//     holds and withdraws nothing; other reads (lists, a rule, history, status)
//     are served as far as the file allows;
//   - stays so until the process restarts on a good file.
//
// A check that does not finish in its time (Config.IntegrityCheckTimeout,
// for very large files) or that cannot read the file is reported, not
// taken as corruption.

// IntegrityResult is the last integrity check's outcome.
type IntegrityResult struct {
	At   time.Time
	Took time.Duration
	// OK: the file passed. Otherwise Corrupt says it failed and Problem
	// what the check found; neither set means the check did not finish
	// (Problem says why).
	OK      bool
	Corrupt bool
	Problem string
}

// Integrity returns the last integrity check's outcome, nil before the
// first one or on PostgreSQL.
func (s *Store) Integrity() *IntegrityResult { return s.integrity.Load() }

// CheckIntegrity checks the SQLite file now, on a connection of its own
// (a fresh page cache: it reads what is on disk), records the outcome and
// makes the store refuse writes if the file is corrupt. On PostgreSQL it
// does nothing and returns nil.
func (s *Store) CheckIntegrity(ctx context.Context) *IntegrityResult {
	lite, ok := s.eng.(*sqliteEngine)
	if !ok {
		return nil
	}
	start := s.clock.Now()
	res := &IntegrityResult{At: start}
	problems, err := lite.quickCheck(ctx, s.integrityTimeout)
	res.Took = s.clock.Now().Sub(start)
	switch {
	case err != nil && isCorrupt(err):
		res.Corrupt, res.Problem = true, err.Error()
	case err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, sqlite3.ErrInterrupt)):
		res.Problem = fmt.Sprintf("the check did not finish within %v: it is skipped until the next one", s.integrityTimeout)
	case err != nil:
		res.Problem = "the check could not run: " + err.Error()
	case len(problems) == 1 && problems[0] == "ok":
		res.OK = true
	default:
		res.Corrupt, res.Problem = true, strings.Join(problems, "; ")
	}
	s.integrity.Store(res)
	switch {
	case res.Corrupt:
		s.corrupt(res.Problem)
	case !res.OK:
		s.log.Warn("database integrity check did not complete", "path", s.path, "problem", res.Problem)
	default:
		s.log.Debug("database integrity check passed", "path", s.path, "took", res.Took)
	}
	return res
}

// quickCheck runs PRAGMA quick_check on a connection opened for it and
// returns its lines ("ok" alone when the file is sound).
func (e *sqliteEngine) quickCheck(ctx context.Context, limit time.Duration) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	db := sql.OpenDB(e.connector)
	defer db.Close()
	rs, err := db.QueryContext(ctx, "PRAGMA quick_check(20)")
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var line string
		if err := rs.Scan(&line); err != nil {
			return nil, err
		}
		out = append(out, line)
	}
	return out, rs.Err()
}

// isCorrupt reports SQLite's "database disk image is malformed" and
// "file is not a database".
func isCorrupt(err error) bool {
	var se sqlite3.Error
	if errors.As(err, &se) {
		return se.Code == sqlite3.ErrCorrupt || se.Code == sqlite3.ErrNotADB
	}
	return false
}

// corrupt makes the store refuse writes for a corrupt file.
func (s *Store) corrupt(problem string) {
	msg := fmt.Sprintf("the database file %s is corrupt (%s): writes are refused and nothing is withdrawn (the rules announced stay announced). "+
		"Stop ribkeeper, then restore %s from a backup, or recover what it holds with: sqlite3 %s .recover | sqlite3 %s.recovered, check the result and put it in its place",
		s.path, oneLine(problem), s.path, s.path, s.path)
	if r := s.refuse(&RefusedError{Kind: "corrupt", Msg: msg}); r.Kind == "corrupt" && r.Msg == msg {
		s.log.Error("database file is corrupt: refusing every write, withdrawing nothing", "path", s.path, "problem", oneLine(problem), "next", msg)
	}
}

// untrusted fails the reconciler's reads of a store whose content
// cannot be taken as the whole desired state: corrupt or lost.
func (s *Store) untrusted() error {
	if r := s.refusal.Load(); r != nil && (r.Kind == "corrupt" || r.Kind == "lost") {
		return r
	}
	return nil
}

// watchIntegrity checks the file every interval until ctx ends.
func (s *Store) watchIntegrity(ctx context.Context, every time.Duration) {
	t := s.clock.NewTimer()
	defer t.Stop()
	for {
		t.Reset(every)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if s.refusal.Load() == nil {
			s.CheckIntegrity(ctx)
		}
	}
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", "; ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
