package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// migrationFiles holds each engine's schema migrations, named
// NNNN_description.sql; they are applied in order, each version once, and
// never edited after release.
//
//go:embed migrations
var migrationFiles embed.FS

type migration struct {
	version int64
	name    string
	sql     string
	// code, if set, is a migration written in Go (instead of sql): data
	// changes that need ribkeeper's own codec.
	code func(ctx context.Context, t tx) error
}

// codeMigrations are the Go migrations, numbered in the same sequence as
// each engine's SQL files.
var codeMigrations = []migration{
	{version: 4, name: "0004_reencode_flowspec (Go)", code: reencodeFlowSpec},
	{version: 5, name: "0005_destination (Go)", code: backfillDestination},
}

func loadMigrations(dir string) ([]migration, error) {
	ents, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, ent := range ents {
		name := ent.Name()
		if ent.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive version number and '_'", name)
		}
		b, err := fs.ReadFile(migrationFiles, path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: name, sql: string(b)})
	}
	ms = append(ms, codeMigrations...)
	slices.SortFunc(ms, func(a, b migration) int { return int(a.version - b.version) })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s have the same version", ms[i-1].name, ms[i].name)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no migrations in %s", dir)
	}
	return ms, nil
}

// migrate brings the schema up to date in one transaction. Instances that
// start at once take turns (SQLite: BEGIN IMMEDIATE; PostgreSQL: an advisory
// lock), and the second one finds nothing left to do.
func migrate(ctx context.Context, eng engine) error {
	ms, err := loadMigrations(eng.migrations())
	if err != nil {
		return fmt.Errorf("load embedded migrations: %w", err)
	}
	t, err := eng.begin(ctx)
	if err != nil {
		return err
	}
	defer t.rollback(context.WithoutCancel(ctx))
	if err := eng.lockMigrations(ctx, t); err != nil {
		return fmt.Errorf("lock schema_migrations: %w", err)
	}
	if _, err := t.exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version BIGINT PRIMARY KEY,
		name TEXT NOT NULL,
		applied_at TEXT NOT NULL
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var current int64
	if err := t.queryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if latest := ms[len(ms)-1].version; current > latest {
		return fmt.Errorf("database schema version %d is newer than this ribkeeper knows (%d): run a ribkeeper at least as new as the one that last used this database", current, latest)
	}
	for _, m := range ms {
		if m.version <= current {
			continue
		}
		if m.code != nil {
			if err := m.code(ctx, t); err != nil {
				return fmt.Errorf("apply migration %s: %w", m.name, err)
			}
		} else if _, err := t.exec(ctx, m.sql); err != nil {
			return fmt.Errorf("apply migration %s: %w", m.name, err)
		}
		if _, err := t.exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.version, m.name, dbTimeNow().Format("2006-01-02T15:04:05.000000Z")); err != nil {
			return fmt.Errorf("record migration %s: %w", m.name, err)
		}
	}
	return t.commit(ctx)
}
