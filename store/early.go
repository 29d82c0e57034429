package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Early announcement preflight.
//
// A caller may hand a single rule to the routers while its write commits
// (reconcile.Reconciler.AnnounceEarly): the commit's fsync is then off the
// time to mitigate. That is only safe for a write that will commit: a
// write the store refuses must not produce a single UPDATE, not even an
// announcement withdrawn a moment later. EarlyOK says, before the write,
// whether the store expects it to commit and to make the rule desired at
// this site. It answers from what the store knows without writing:
//
//   - the checks a write makes on its input (Input fields, unknown sites,
//     a Match declared by a site's configuration), and whether the rule,
//     once stored, targets this site;
//   - the store's own health, kept by every write: the last transaction
//     failed (an I/O error, a full disk, a read-only file, a lost
//     connection: early announcement stays off until a commit succeeds
//     again), or a transaction has been running for longer than a commit
//     should take (a hung disk or database);
//   - on SQLite, the file system of the database: read-only, or with less
//     free space than EarlyFreeMargin.
//
// It is a prediction, never a guarantee: a disk can fail between the
// check and the commit. What a wrong prediction costs is bounded by the
// caller, which withdraws an early announcement at once when its write
// fails. On PostgreSQL, whose disk the store cannot see, a full disk
// is known from the first commit that fails.

// EarlyFreeMargin is the free space the SQLite database's file system must
// have for a write to be announced ahead of its commit. A commit appends
// the pages it changed to the WAL file, and the write may commit in a
// group of up to 512 rules of work (see the package doc): one rule took 8
// pages (33 KB) of WAL, a group of 512 rules 284 KB, so 1 MiB covers the
// largest group with room left for the WAL index to grow.
const EarlyFreeMargin = 1 << 20

// A transaction running for longer than earlyStall, plus earlyStallPerRule
// for each rule of its work, is taken as stalled (a hung disk or
// database): no write is announced early until it ends. A commit of one
// group takes milliseconds; 10,000 rules finished in two transactions took
// 100–175 ms (BenchmarkFinishMany), well under their bound of 0.75 s each.
const (
	earlyStall        = 250 * time.Millisecond
	earlyStallPerRule = 100 * time.Microsecond
)

// ErrNotEarly classifies EarlyOK's answers other than input refusals: the
// write may still commit, but announcing it before the commit could put a
// rule on the routers that the store then refuses.
var ErrNotEarly = errors.New("not expected to commit at once")

// EarlyOK reports whether Upsert(in), called now, is expected to commit
// and to make the rule desired at this site: nil if so. Otherwise the
// error says why: an input the write would refuse (ErrInvalidInput,
// ErrDeclared), or ErrNotEarly (the store's condition, or a rule that
// does not target this site). It writes nothing; on SQLite it costs a
// statfs and an indexed read, on PostgreSQL one round trip.
func (s *Store) EarlyOK(ctx context.Context, in Input) error {
	e, err := encode(in, -1, s.now())
	if err != nil {
		return err
	}
	if err := s.condition(); err != nil {
		return err
	}
	if s.spec.plain(&e) {
		return nil // no stored rule of this Match can object (special.go)
	}
	return s.targetsHere(ctx, &e)
}

// condition is the store's part of EarlyOK: nil while writes are expected
// to commit. Its changes are logged once each: they tell the operator
// that rules reach the routers only after their commit, and why.
func (s *Store) condition() error {
	kind, why := s.health.check(s.clock.Now())
	s.checkFile() // a stat: a file deleted a moment ago is not announced into
	if r := s.refusal.Load(); r != nil {
		kind, why = r.Kind, r.Msg
	}
	if kind == "" && s.dataDir != "" {
		kind, why = diskCondition(s.dataDir)
	}
	was := s.health.noteOff(kind)
	switch {
	case kind != "" && was != kind:
		s.log.Warn("early announcement is off: writes reach the routers only once committed", "reason", why)
	case kind == "" && was != "":
		s.log.Info("early announcement is back on: writes are expected to commit")
	}
	if kind != "" {
		return fmt.Errorf("%w: %s", ErrNotEarly, why)
	}
	return nil
}

// diskCondition checks the file system holding dir: read-only, or with
// less than EarlyFreeMargin free. It reads it on every call: a statfs took
// 2.5 µs (ext4, loaded machine), against about a millisecond for a write
// through the API; a cached reading would miss a disk filled since.
func diskCondition(dir string) (kind, why string) {
	free, ro, err := diskSpace(dir)
	switch {
	case err != nil:
		return "statfs", fmt.Sprintf("cannot read the free space of %s: %v", dir, err)
	case ro:
		return "read-only", fmt.Sprintf("the file system of %s is read-only: remount it read-write", dir)
	case free < EarlyFreeMargin:
		return "free", fmt.Sprintf("the file system of %s has %s free, less than the %s a commit may need: free space there",
			dir, bytesText(free), bytesText(EarlyFreeMargin))
	}
	return "", ""
}

// targetsHere checks what the write would find stored: sites it would
// refuse as unknown, a Match declared by a site's configuration, and
// whether the rule, once stored, targets this site.
func (s *Store) targetsHere(ctx context.Context, e *encoded) error {
	if err := s.checkSites(ctx, []encoded{*e}, false); err != nil {
		return err
	}
	cctx, cancel := s.call(ctx, 1)
	defer cancel()
	var (
		id     int64
		origin string
		stored dbText
	)
	err := s.eng.reader().queryRow(cctx, `SELECT id, origin, sites FROM rules WHERE family = ? AND nlri = ? AND state = 'active'`,
		e.family, e.nlri).Scan(&id, &origin, &stored)
	found := err == nil
	if err != nil && !errors.Is(err, errNoRows) {
		return fmt.Errorf("%w: %w", ErrNotEarly, s.wrap(ctx, "read the stored rule", err))
	}
	if found && origin != "" && origin != e.in.Origin {
		return &DeclaredError{ID: id, Origin: origin}
	}
	sites := e.sites
	if found && e.in.Keep&KeepSites != 0 {
		sites = decodeSites(stored.s)
	}
	if len(sites) > 0 && !slices.Contains(sites, s.site) {
		return fmt.Errorf("%w: the rule targets the sites %s, not this one (%s)", ErrNotEarly, strings.Join(sites, ", "), s.site)
	}
	return nil
}

// health is what the store knows of its own ability to commit, kept by
// every transaction that writes.
type health struct {
	mu sync.Mutex
	// failed is the last transaction's failure; nil once one committed.
	failed error
	// flights are the transactions running now.
	flights map[*flight]struct{}
	// off is the kind of the reason early announcement is off ("" while
	// on), to log its changes only.
	off string
}

type flight struct {
	start time.Time
	limit time.Duration
}

// begin records a transaction of work rules starting at now; end it with
// end or abandon.
func (h *health) begin(now time.Time, work int) *flight {
	f := &flight{start: now, limit: earlyStall + time.Duration(work)*earlyStallPerRule}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.flights == nil {
		h.flights = make(map[*flight]struct{})
	}
	h.flights[f] = struct{}{}
	return f
}

// end records the outcome of f: nil if it committed. An input refusal
// (the write's fault, rolled back alone) says nothing about the store.
func (h *health) end(f *flight, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.flights, f)
	switch {
	case err == nil:
		h.failed = nil
	case errors.Is(err, ErrInvalidInput), errors.Is(err, ErrDeclared), errors.Is(err, ErrNotFound), errors.Is(err, ErrChanged):
	default:
		h.failed = err
	}
}

// abandon forgets f without an outcome: its caller gave up, which says
// nothing about the store.
func (h *health) abandon(f *flight) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.flights, f)
}

// check returns why writes are not expected to commit now, "" if they are.
func (h *health) check(now time.Time) (kind, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failed != nil {
		return "failed", fmt.Sprintf("the last commit failed (%v): early announcement resumes once a commit succeeds", h.failed)
	}
	for f := range h.flights {
		if d := now.Sub(f.start); d > f.limit {
			return "stalled", fmt.Sprintf("a transaction has been running for %v, longer than the %v it should take: check the database's disk (hung or overloaded)",
				d.Round(time.Millisecond), f.limit)
		}
	}
	return "", ""
}

// noteOff records the kind of the current reason ("" for none) and
// returns the previous one.
func (h *health) noteOff(kind string) (was string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	was, h.off = h.off, kind
	return was
}

// bytesText is n in KiB or MiB for messages.
func bytesText(n uint64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// EarlyWithdrawOK reports whether Withdraw(r.ID), called now for the
// rule r as just read (GetBrief), is expected to commit and to take a
// path of this site off the routers: nil if so. Otherwise ErrNotEarly
// says why (the rule is not active here, its withdrawal is already
// requested, or the store's condition as for EarlyOK). A withdrawal
// checks nothing of its input, so only the rule and the store's health
// decide. It neither reads nor writes the database (a statfs on SQLite).
func (s *Store) EarlyWithdrawOK(r Rule) error {
	switch {
	case r.State != Active || r.WithdrawRequested:
		return fmt.Errorf("%w: rule %d is not active, or its withdrawal is already requested", ErrNotEarly, r.ID)
	case len(r.Sites) > 0 && !slices.Contains(r.Sites, s.site):
		return fmt.Errorf("%w: the rule targets the sites %s, not this one (%s)", ErrNotEarly, strings.Join(r.Sites, ", "), s.site)
	}
	return s.condition()
}
