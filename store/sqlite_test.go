package store

import (
	"errors"
	"os"
	"path/filepath"
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
