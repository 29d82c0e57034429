package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store/pgtest"
)

// One PostgreSQL server serves every test of this binary.
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// freshFunc returns the Config of a new, empty database; tests open one or
// more Stores on it with different sites.
type freshFunc func(t testing.TB) Config

func sqliteFresh(t testing.TB) Config {
	return Config{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "data", "ribkeeper.db")}
}

func postgresFresh(t testing.TB) Config {
	return Config{Driver: "postgres", DSN: pgtest.Start(t)}
}

func TestSQLite(t *testing.T)   { testConformance(t, sqliteFresh) }
func TestPostgres(t *testing.T) { testConformance(t, postgresFresh) }

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// open opens a Store on cfg as site, closed in t.Cleanup.
func open(t testing.TB, cfg Config, site string) *Store {
	t.Helper()
	cfg.Site = site
	s, err := Open(ctxT(t), cfg)
	if err != nil {
		t.Fatalf("Open(%s): %v", cfg.Driver, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// rule returns a distinct rule for each i: "destination 10.x.y.z/32".
func rule(t testing.TB, i int, action string) flowspec.Rule {
	t.Helper()
	text := fmt.Sprintf("match destination 10.%d.%d.%d/32 then %s", i>>16&255, i>>8&255, i&255, action)
	r, err := flowspec.Parse(text)
	if err != nil {
		t.Fatalf("flowspec.Parse(%q): %v", text, err)
	}
	return r
}

// drain empties a Changes channel.
func drain(s *Store) {
	for {
		select {
		case <-s.Changes():
		default:
			return
		}
	}
}

func waitChange(t testing.TB, s *Store, what string) {
	t.Helper()
	select {
	case <-s.Changes():
	case <-time.After(10 * time.Second):
		t.Fatalf("no change signal within 10s after %s", what)
	}
}
