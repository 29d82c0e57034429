package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// A lost store is never a mass withdrawal, at start either.
//
// Every store has an id, made once when it is created (a table of its
// own, kept outside the numbered migrations). The appliance keeps a
// record of the store it runs with in a file that outlives the store
// (Config's identity file, by default next to the SQLite file): the id,
// the active rules and the highest rule id, brought up to date while it
// runs (KeepRecord). At start, Vouch compares the store with that
// record. A store whose id differs, or an older copy of the same store
// (fewer rule ids than it had), where this appliance last held rules is
// held: it refuses every write (*RefusedError, kind "held"), and the
// daemon keeps its BGP sessions down, so that routers with graceful
// restart keep the rules they have instead of being told the desired
// state is empty, until the operator restores the right store or
// confirms this one (accept; 'ribkeeper serve --accept-new-store').

// Identity identifies a store's content.
type Identity struct {
	ID string `json:"store_id"`
	// Active counts the active rules (every site); LastID is the
	// highest rule id ever given (SQLite: the AUTOINCREMENT sequence,
	// which never goes back; PostgreSQL: the highest id stored).
	Active int   `json:"active_rules"`
	LastID int64 `json:"last_rule_id"`
}

func (id Identity) String() string {
	return fmt.Sprintf("store %s with %d active rules, last rule id %d", id.ID, id.Active, id.LastID)
}

// Record is the identity file's content.
type Record struct {
	Identity
	Store     string    `json:"store"` // the SQLite file or "postgres"
	UpdatedAt time.Time `json:"updated_at"`
}

// ensureID gives a new store its id (at Open).
func (s *Store) ensureID(ctx context.Context) error {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	t, err := s.eng.begin(ctx)
	if err != nil {
		return err
	}
	defer t.rollback(context.WithoutCancel(ctx))
	// Instances starting at once on one PostgreSQL take turns, as for
	// migrations (CREATE TABLE IF NOT EXISTS alone races there).
	if err := s.eng.lockMigrations(ctx, t); err != nil {
		return err
	}
	if _, err := t.exec(ctx, `CREATE TABLE IF NOT EXISTS store_identity (
		one INTEGER PRIMARY KEY CHECK (one = 1),
		id TEXT NOT NULL,
		created_at TEXT NOT NULL
	)`); err != nil {
		return err
	}
	if _, err := t.exec(ctx, `INSERT INTO store_identity (one, id, created_at) VALUES (1, ?, ?) ON CONFLICT (one) DO NOTHING`,
		hex.EncodeToString(b[:]), s.now().Format(time.RFC3339Nano)); err != nil {
		return err
	}
	return t.commit(ctx)
}

// Identity reads the store's identity.
func (s *Store) Identity(ctx context.Context) (Identity, error) {
	id, _, err := s.identityLight(ctx)
	if err == nil {
		id.Active, err = s.countActive(ctx)
	}
	return id, err
}

// identityLight is Identity without the count of active rules (Active
// 0): whether any rule is active instead.
func (s *Store) identityLight(ctx context.Context) (id Identity, anyActive bool, err error) {
	cctx, cancel := s.call(ctx, 1)
	defer cancel()
	rd := s.eng.reader()
	err = rd.queryRow(cctx, `SELECT id FROM store_identity WHERE one = 1`).Scan(&id.ID)
	if err == nil {
		err = rd.queryRow(cctx, `SELECT EXISTS (SELECT 1 FROM rules WHERE state = 'active')`).Scan(&anyActive)
	}
	if err == nil {
		q := `SELECT COALESCE(MAX(id), 0) FROM rules`
		if _, lite := s.eng.(*sqliteEngine); lite {
			q = `SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'rules'), 0)`
		}
		err = rd.queryRow(cctx, q).Scan(&id.LastID)
	}
	return id, anyActive, s.wrap(ctx, "read the store's identity", err)
}

// countActive counts the active rules (every site).
func (s *Store) countActive(ctx context.Context) (int, error) {
	cctx, cancel := s.call(ctx, 1)
	defer cancel()
	var n int
	err := s.eng.reader().queryRow(cctx, `SELECT COUNT(*) FROM rules WHERE state = 'active'`).Scan(&n)
	return n, s.wrap(ctx, "count the active rules", err)
}

// where names the store for messages and the record.
func (s *Store) where() string {
	if s.path != "" {
		return s.path
	}
	return "postgres"
}

// ReadRecord reads the identity file; ok is false when there is none.
func ReadRecord(file string) (rec Record, ok bool, err error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("read the store's identity record %s: %w", file, err)
	}
	if err := json.Unmarshal(b, &rec); err != nil || rec.ID == "" {
		return Record{}, false, fmt.Errorf("the store's identity record %s is not readable (%v): move it away if this appliance's store is the one it should run with", file, err)
	}
	return rec, true, nil
}

// WriteRecord replaces the identity file with rec (written to a
// temporary file, synced, renamed into place).
func WriteRecord(file string, rec Record) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	tmp := file + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("write the store's identity record: %w: check that %s is writable", err, filepath.Dir(file))
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, file)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write the store's identity record %s: %w", file, err)
	}
	return nil
}

// Verdict is what Vouch decided.
type Verdict struct {
	// Held: the store is not the one this appliance ran with (Line says
	// why, naming both), and it now refuses every write.
	Held bool
	// Accepted: it was not, and the operator confirmed it.
	Accepted bool
	// New: there was no record (a first start): one is written.
	New  bool
	Line string
	Was  Record
	Now  Identity
}

// Vouch compares the store with the identity file's record (see above):
// a store that is not the one this appliance last ran with, where that
// one held rules, is held unless accept. Otherwise the record is
// rewritten for this store. An unreadable record or store is an error:
// the caller cannot tell, and must not start as if it could.
func (s *Store) Vouch(ctx context.Context, file string, accept bool) (Verdict, error) {
	cur, err := s.Identity(ctx)
	if err != nil {
		return Verdict{}, err
	}
	rec, ok, err := ReadRecord(file)
	if err != nil {
		return Verdict{}, err
	}
	v := Verdict{Was: rec, Now: cur, New: !ok}
	differs := ""
	switch {
	case !ok:
	case rec.ID != cur.ID:
		differs = "a different store"
	case cur.LastID < rec.LastID && s.path != "":
		differs = "an older copy of the store"
	}
	if differs != "" && rec.Active > 0 {
		v.Line = fmt.Sprintf("%s holds %s (%s), not the one this appliance last ran with (%s, %s, recorded in %s at %s)",
			s.where(), differs, cur, rec.Store, rec.Identity, file, rec.UpdatedAt.Format(time.RFC3339))
		if !accept {
			v.Held = true
			s.refuse(&RefusedError{Kind: "held", Msg: v.Line + ": writes are refused and the BGP sessions stay down, so that routers with graceful restart keep the rules they hold. " +
				"Restore the store this appliance ran with (a backup of the file) and restart, or, to make this store the desired state (routers then drop every rule it lacks), restart with 'ribkeeper serve --accept-new-store'"})
			return v, nil
		}
		v.Accepted = true
	}
	return v, s.writeRecord(file, cur)
}

func (s *Store) writeRecord(file string, id Identity) error {
	return WriteRecord(file, Record{Identity: id, Store: s.where(), UpdatedAt: s.now()})
}

// recordEvery is the least time between two updates of the identity
// record after changes: the first change after a quiet recordEvery is
// recorded at once (the record says this appliance holds rules within
// milliseconds of the first one), later ones once recordEvery has passed
// since the last update. A burst of single writes then costs one record
// update (reads, a file write and its fsync) a second instead of one per
// commit, next to the commits themselves (measured: a fifth of the
// daemon's CPU while writes came one at a time). The record lags the
// store by a second at most, which Vouch's comparison of rule ids
// tolerates: a copy of the store would have to be less than a second
// older than the one lost to pass for it.
const recordEvery = time.Second

// KeepRecord keeps the identity file up to date with the store until ctx
// ends: after the commits that changed desired state, at most once per
// recordEvery, and every recountInterval besides. It writes nothing while
// the store refuses writes (lost, corrupt, held). Call it only after a
// Vouch that did not hold the store.
//
// After a commit it reads what Vouch decides by (the store's id, its
// last rule id, whether any rule is active) in a few lookups; the count
// of active rules, which reads every active rule (~0.1 s at a million,
// after every commit of a bulk load), is read again every
// recountInterval at most, and a record written in between carries the
// last count (at least 1 while a rule is active, 0 when none is).
func (s *Store) KeepRecord(ctx context.Context, file string) {
	last := Identity{}
	var counted time.Time // when last.Active was counted; zero: never
	rev := int64(-1)
	t := s.clock.NewTimer()
	defer t.Stop()
	var checked time.Time // the last check against the store
	pending := false      // a change waits for recordEvery to pass
	for {
		wait := recountInterval
		if pending {
			wait = checked.Add(recordEvery).Sub(s.clock.Now())
		}
		t.Reset(wait)
		tick := false
		select {
		case <-ctx.Done():
			return
		case <-s.recordWake:
			if !checked.IsZero() && s.clock.Now().Before(checked.Add(recordEvery)) {
				pending = true
				continue
			}
		case <-t.C():
			tick = !pending
		}
		pending = false
		checked = s.clock.Now()
		if s.refusal.Load() != nil {
			continue
		}
		r, err := s.Revision(ctx)
		if err != nil || (r == rev && !tick) {
			continue
		}
		id, active, err := s.identityLight(ctx)
		if err != nil || s.refusal.Load() != nil {
			continue
		}
		now := s.clock.Now()
		switch {
		case counted.IsZero() || now.Sub(counted) >= recountInterval:
			if id.Active, err = s.countActive(ctx); err != nil {
				continue
			}
			counted = now
		case !active:
			id.Active = 0
		default:
			id.Active = max(last.Active, 1)
		}
		if id != last {
			if err := s.writeRecord(file, id); err != nil {
				s.log.Warn("cannot update the store's identity record", "error", err)
				continue
			}
			last = id
		}
		rev = r
	}
}

// recountInterval is how often KeepRecord counts the active rules again.
const recountInterval = 10 * time.Second

// Hold makes the store refuse every write (kind "held") for why, which
// says what to do: the caller could not vouch for it.
func (s *Store) Hold(why string) {
	s.refuse(&RefusedError{Kind: "held", Msg: why})
}
