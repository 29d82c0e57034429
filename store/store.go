// Package store is ribkeeper's desired state: the FlowSpec rules operators
// and detectors asked for, their lifecycle, per-site announce status, an
// audit history, and a change feed that wakes the reconciler.
//
// One concrete *Store runs on one of two engines: SQLite (the embedded
// default for a single appliance) or PostgreSQL (shared by several
// appliances, each with its own site name). Both behave the same; the
// conformance tests run against both.
//
// A rule's identity is its Match (family + canonical NLRI bytes): at most
// one active row exists per Match, and storing the same Match again updates
// that row in place. Withdrawn and expired rules stay for the audit trail
// until PurgeHistory deletes them with the history older than the
// retention.
//
// # Durability and group commit
//
// A write returns only after its transaction committed: an acknowledged rule
// survives a crash, and on SQLite (synchronous=FULL) a power loss. On SQLite
// that costs one fsync per commit, which alone would cap single-rule writes
// at about one per fsync. So every write of a SQLite Store (Upsert,
// Withdraw, UpsertMany, Finish, SetStatus) is queued to one committer
// goroutine that owns the write connection: it takes every queued write (up
// to 512 rules of work), runs them in order in one transaction, each inside
// its own SAVEPOINT, commits once and then answers each caller. A write that
// fails is rolled back to its savepoint and gets its own error; the others
// commit. UpsertMany is one queued write, so it stays all or nothing. A
// caller whose context ends, or whose deadline ([store] write_timeout)
// passes, before its write's COMMIT started gets an error and the write
// never lands; one whose deadline passes during the COMMIT is told that
// the outcome is pending (deadline.go). SQLite serializes writers anyway, so grouping loses no
// parallelism. PostgreSQL runs concurrent transactions and groups WAL
// flushes itself; its writes are not queued.
//
// Every transaction records its outcome and how long it has been running;
// EarlyOK (early.go) reads that, and the SQLite file system's free space,
// to say whether a write is expected to commit, so that a caller announces
// a rule ahead of its commit only then.
//
// # Change feed
//
// Changes wakes on this process's own writes after their commit. PostgreSQL
// instances hear each other by LISTEN/NOTIFY. A SQLite file written by
// another process (a second ribkeeper, the CLI opening the file) is noticed
// by polling PRAGMA data_version on the committer's connection every 250 ms
// and before every group: it moves only when another connection committed.
// A commit that only wrote announce status does not wake the feed.
//
// # Faults
//
// A database file deleted or replaced while running (identity.go), a
// corrupt file (integrity.go) and a start on a store that is not the one
// this appliance ran with (record.go) make the store refuse every write
// (RefusedError, matching ErrUnavailable) and fail the reads the
// reconciler makes, so that unknown is never taken for empty.
package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/flowspec"
)

// State is a rule's lifecycle state.
type State string

const (
	Active    State = "active"    // desired (until withdrawn or expired)
	Withdrawn State = "withdrawn" // an operator withdrew it and the path is gone
	Expired   State = "expired"   // its TTL passed and the path is gone
)

func (s State) valid() bool { return s == Active || s == Withdrawn || s == Expired }

// Rule is one stored rule.
type Rule struct {
	ID int64
	// Rule is decoded from the stored NLRI and community bytes. It is the
	// zero (invalid) Rule if the stored bytes no longer decode; Text still
	// holds the stored text, and the reconciler treats it as bad data.
	Rule      flowspec.Rule
	Text      string   // canonical text, Rule.String()
	Reason    string   // free text from the operator or detector
	Actor     string   // who created or last changed it ("cli", token name, "config")
	Sites     []string // empty: every site
	CreatedAt time.Time
	UpdatedAt time.Time
	ExpiresAt time.Time // zero: never expires
	State     State
	// WithdrawRequested is set when an operator withdrew an active rule; the
	// state becomes Withdrawn only after the reconciler saw the path gone.
	WithdrawRequested bool
	Announced         bool   // status from this site's reconciler
	LastError         string // last error this site's reconciler recorded, "" if none
	// Origin is "" for a rule added through the API, or "config:SITE" for
	// a static rule that SITE's configuration declares: only an Input
	// with the same Origin may change it.
	Origin string
	// Set is the declarative set the rule belongs to ("" for none; see
	// Input.Set).
	Set string
}

// Input is what a caller asks to store; Upsert keys it by Rule.Match.
type Input struct {
	Rule      flowspec.Rule
	ExpiresAt time.Time // zero: never
	// TTL, when positive, is a relative expiry that replaces ExpiresAt:
	// the rule expires TTL after the transaction that stores it, so a
	// write that waited behind other commits keeps its whole TTL and is
	// never refused for having waited.
	TTL    time.Duration
	Reason string
	Actor  string
	Sites  []string // empty: every site
	// Origin declares where the rule comes from ("config:SITE" for a
	// static rule; "" for the API). Storing a Match whose active rule has
	// another non-empty Origin fails with a DeclaredError.
	Origin string
	// Set, if not "", puts the rule in that declarative set (the gate's
	// ApplySet). An active rule of another set is not taken: the write
	// fails with a SetConflictError. An Input without a Set leaves an
	// active rule in the set it is in.
	Set string
	// AllowUnknownSites lets Sites name sites that no instance registered
	// (one not started yet); without it such an input is refused.
	AllowUnknownSites bool
	// Keep names the fields an update of an active rule leaves as stored
	// (the caller did not give them); a new rule takes them from Input as
	// they are. The zero value replaces every field.
	Keep Keep
	// Announced says this site's speaker holds the rule's path with its
	// action already (an early announcement it took before the commit):
	// Upsert records this site's status "announced" in the same
	// transaction, as the reconciler would once its mirror showed the
	// path, so that no second commit follows the write. Only Upsert
	// reads it, and only for a rule that then targets this site.
	Announced bool
}

// Keep is a set of Input fields an update leaves as stored.
type Keep uint8

const (
	KeepReason Keep = 1 << iota // keep Reason
	KeepExpiry                  // keep ExpiresAt
	KeepSites                   // keep Sites
)

// Config selects and configures an engine.
type Config struct {
	Driver string // "sqlite" (default) or "postgres"
	Path   string // sqlite file; default data/ribkeeper.db
	DSN    string // postgres connection string (URL or key=value)
	Site   string // this instance's site name; default "default"

	// Timeout bounds every database call (default 5s); a call that runs
	// out of time fails with ErrUnavailable. Batch calls get more time in
	// proportion to their size.
	Timeout time.Duration
	// WriteTimeout bounds a SQLite write from its arrival to its commit
	// (default DefaultWriteTimeout; see deadline.go).
	WriteTimeout time.Duration
	// IntegrityCheckTimeout bounds the integrity check (default 1m;
	// see integrity.go).
	IntegrityCheckTimeout time.Duration
	// IntegrityCheckInterval is how often a SQLite file is checked while
	// running; 0: only at Open.
	IntegrityCheckInterval time.Duration
	// Logger receives the PostgreSQL server in use (at the first
	// connection and whenever it changes) and change-feed reconnects; nil
	// discards.
	Logger hclog.Logger
	// Clock is what the store reads as now: timestamps, and whether a
	// rule's ExpiresAt has passed when it is finished. nil is the system
	// clock; tests inject a clock.Fake.
	Clock clock.Clock
}

// DefaultSite is the site of an instance whose Config.Site is empty.
const DefaultSite = "default"

// DefaultPath is the SQLite file of an instance whose Config.Path is empty.
const DefaultPath = "data/ribkeeper.db"

// Store is the desired state. It is safe for concurrent use.
type Store struct {
	eng     engine
	site    string
	timeout time.Duration
	log     hclog.Logger
	changes chan struct{}
	group   *committer // SQLite: every write goes through it; nil on PostgreSQL
	clock   clock.Clock
	// health is kept by every write and read by EarlyOK; dataDir is the
	// SQLite database's directory, whose file system EarlyOK checks ("" on
	// PostgreSQL).
	health  health
	dataDir string
	path    string // the SQLite database file ("" on PostgreSQL)
	// writeTimeout bounds each write (deadline.go); lateCommits counts
	// the writes whose COMMIT outlived their caller's deadline.
	writeTimeout time.Duration
	lateCommits  atomic.Uint64
	// refusal, when set, refuses every write and tells why: the
	// database file was lost or replaced (identity.go), it failed its
	// integrity check (integrity.go), or the operator must confirm a
	// new store (record.go).
	refusal atomic.Pointer[RefusedError]
	// integrity is the last integrity check's result (integrity.go).
	integrity        atomic.Pointer[IntegrityResult]
	integrityTimeout time.Duration
	// recordWake wakes KeepRecord after each change (signal).
	recordWake chan struct{}
	// rescued is closed once a lost file's copy is done (identity.go);
	// rescuing is set when a copy started, which Close waits for.
	rescued  chan struct{}
	rescuing atomic.Bool
	// spec lets EarlyOK skip its read on SQLite (special.go); nil on
	// PostgreSQL.
	spec *special
	// beforeCommit, when set (by tests only), runs right before each
	// commit; an error fails the commit as the database's would.
	beforeCommit func(ctx context.Context) error

	stop      context.CancelFunc // stops background goroutines
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating and migrating as needed) the configured engine.
// Errors from an unreachable database match ErrUnavailable.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Site == "" {
		cfg.Site = DefaultSite
	}
	if err := validSite(cfg.Site); err != nil {
		return nil, invalid("site", "%v", err)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.IntegrityCheckTimeout <= 0 {
		cfg.IntegrityCheckTimeout = time.Minute
	}
	s := &Store{
		writeTimeout:     cfg.WriteTimeout,
		integrityTimeout: cfg.IntegrityCheckTimeout,
		clock:            cfg.Clock,
		site:             cfg.Site,
		timeout:          cfg.Timeout,
		log:              cfg.Logger,
		changes:          make(chan struct{}, 1),
		recordWake:       make(chan struct{}, 1), // see KeepRecord
		rescued:          make(chan struct{}),
	}
	bg, stop := context.WithCancel(context.Background())
	s.stop = stop

	octx, cancel := context.WithTimeout(ctx, 4*cfg.Timeout)
	defer cancel()
	var err error
	switch cfg.Driver {
	case "", "sqlite", "sqlite3":
		if cfg.Path == "" {
			cfg.Path = DefaultPath
		}
		s.eng, err = openSQLite(octx, cfg.Path)
		s.dataDir, s.path = filepath.Dir(cfg.Path), cfg.Path
	case "postgres", "postgresql", "pgx":
		var pg *pgEngine
		pg, err = openPostgres(octx, cfg.DSN, cfg.Logger)
		if err == nil {
			s.eng = pg
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				pg.listen(bg, s.signal, s.log)
			}()
		}
	default:
		stop()
		return nil, invalid("driver", "unknown store driver %q: use \"sqlite\" or \"postgres\"", cfg.Driver)
	}
	if err != nil {
		stop()
		return nil, s.wrapOpen(ctx, err)
	}
	if err := migrate(octx, s.eng); err != nil {
		s.Close()
		return nil, s.wrap(ctx, "migrate database schema", err)
	}
	if s.path != "" {
		// Before anything else reads the rules: a corrupt file opens,
		// serving the reads it can and refusing writes (integrity.go).
		s.CheckIntegrity(octx)
	}
	// failed is Open's error for a step that failed, nil if the file
	// is corrupt (then the store opens, refusing writes).
	failed := func(op string, err error) error {
		if err == nil {
			return nil
		}
		if isCorrupt(err) {
			s.corrupt(op + ": " + err.Error())
		}
		if r := s.refusal.Load(); r != nil && r.Kind == "corrupt" {
			return nil
		}
		s.Close()
		return s.wrap(ctx, op, err)
	}
	if err := failed("register site "+cfg.Site, s.registerSite(octx)); err != nil {
		return nil, err
	}
	if err := failed("give the store its id", s.ensureID(octx)); err != nil {
		return nil, err
	}
	if lite, ok := s.eng.(*sqliteEngine); ok {
		ss, err := lite.session(octx)
		if err := failed("open write connection", err); err != nil {
			return nil, err
		}
		if ss == nil {
			ss = &sqliteSession{e: lite} // corrupt: connects on its first write, which is refused
		}
		spec, err := s.loadSpecial(octx)
		if err := failed("read declared and sited rules", err); err != nil {
			return nil, err
		}
		s.spec = spec
		s.group = newCommitter(s, ss)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.group.run(bg)
		}()
		// From here the file's identity is checked (identity.go), and
		// its integrity on a schedule (integrity.go).
		lite.noteIdentity()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.watchFile(bg)
		}()
		if cfg.IntegrityCheckInterval > 0 {
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.watchIntegrity(bg, cfg.IntegrityCheckInterval)
			}()
		}
	}
	return s, nil
}

func (s *Store) wrapOpen(ctx context.Context, err error) error {
	var ue *unavailableError
	if errors.As(err, &ue) || errors.Is(err, ErrInvalidInput) {
		return err
	}
	return fmt.Errorf("store: open: %w", err)
}

// Close stops the change feed and closes the database. The Changes channel
// is not closed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stop()
		s.wg.Wait()
		if s.rescuing.Load() {
			<-s.rescued // the lost file's copy, written from its open descriptor
		}
		if s.eng != nil {
			s.closeErr = s.eng.close()
		}
	})
	return s.closeErr
}

// Site returns this instance's site name.
func (s *Store) Site() string { return s.site }

// Changes delivers a wake-up (one-slot, coalescing) after any change to
// desired state, made by this process or by another instance (PostgreSQL:
// notified; SQLite: noticed within about 250 ms),
// and after every reconnect of the PostgreSQL change feed, since
// notifications may have been missed while it was down. Status writes do not
// wake it. A receiver re-reads the whole state; the signal carries nothing.
func (s *Store) Changes() <-chan struct{} { return s.changes }

func (s *Store) signal() {
	select {
	case s.changes <- struct{}{}:
	default:
	}
	select {
	case s.recordWake <- struct{}{}:
	default:
	}
}

// call bounds one database call; n > 1 scales the deadline for batches.
func (s *Store) call(ctx context.Context, n int) (context.Context, context.CancelFunc) {
	d := s.timeout
	if n > 1000 {
		d += time.Duration(n/1000) * s.timeout / 4
	}
	return context.WithTimeout(ctx, d)
}

// wrap adds the operation to err and classifies it. parent is the caller's
// context: if the caller gave up, that is not the database's fault.
func (s *Store) wrap(parent context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if isCorrupt(err) {
		s.corrupt(op + ": " + err.Error())
		return s.refused()
	}
	var ue *unavailableError
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalidInput) || errors.Is(err, ErrDeclared) || errors.Is(err, ErrSetConflict) || errors.Is(err, ErrChanged) || errors.As(err, &ue) {
		return err
	}
	if perr := parent.Err(); perr != nil {
		return fmt.Errorf("store: %s: %w", op, perr)
	}
	if errors.Is(err, context.DeadlineExceeded) || s.eng.unavailable(err) {
		return &unavailableError{op: op, err: err, hint: s.eng.hint()}
	}
	return fmt.Errorf("store: %s: %w", op, err)
}
