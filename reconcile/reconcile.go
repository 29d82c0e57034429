// Package reconcile keeps the speaker's locally originated paths exactly
// equal to the desired rules in the store.
//
// The loop is level-triggered: store changes, RIB mirror changes, the
// expiry, retry and resync timers (on an injected clock) and Trigger only
// wake it, and every pass plans from both sides' state, never from event
// contents. A pass is a short sequence of named parts, each its own type:
//
//   - source (source.go): the desired-state source. Its copy of the
//     active rules is refreshed by a full read or by the rules changed
//     since a revision, and it says which Matches those touched; expiry is
//     a heap of ExpiresAt.
//   - planner (planner.go): the one comparison of desired with actual
//     state. Plan.put decides what one Match needs; Diff (the pure
//     specification), the full comparison and the dirty-only comparison
//     all go through it. view.go is desired state at one instant
//     (lifecycle and validation).
//   - workQueue (queue.go, storm.go): per-Match attempts with backoff,
//     expectations of changes in flight, and storm pacing.
//   - the applier (pass.go: apply, announceAll, withdrawAll, finish):
//     retiring rules first, then make before break, then orphans, then
//     final states.
//   - statusBatch (status.go): the status reporter, the one writer of a
//     rule's status for this site. "Announced" is what the mirror showed
//     a pass (the rule's path with its action); the store clears it when
//     the rule finishes, which happens only once the mirror shows the path
//     gone. A single write made early whose change the speaker took
//     (AnnounceEarly, WithdrawEarly report it) records the same in its own
//     commit instead (store.Input.Announced, store.Store.WithdrawGone): what
//     the speaker took is what a pass would have observed, and the write
//     stays one commit.
//
// Unknown is never empty: when desired state cannot be read, the pass works
// from the last rows it read and withdraws no orphans; when the RIB mirror
// is not initialised, the pass announces and withdraws nothing.
//
// The interfaces the package consumes, Desired and Speaker, say
// everything it needs; store.Store and bgp.Speaker implement them.
package reconcile

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// Desired is everything the reconciler needs of the desired-state store
// (store.Store implements it). Its parts are used by the source (reads), the
// applier (FinishMany) and the status reporter (SetStatus).
type Desired interface {
	// EachActive calls fn with every rule in state Active for this site,
	// including those past ExpiresAt or with WithdrawRequested, one at a
	// time: the same *store.Rule each time (copy values out of it, never
	// keep it). An error means desired state is unknown, never empty.
	// The reconciler compacts each rule as it arrives and never holds the
	// table as store.Rules (a full read of a million rules would).
	EachActive(ctx context.Context, fn func(*store.Rule) error) error
	// Revision returns the newest revision: read before EachActive,
	// EachChangedSince(it) afterwards misses nothing.
	Revision(ctx context.Context) (int64, error)
	// EachChangedSince calls fn with each rule changed after rev that is
	// active for this site, as EachActive does (the same *store.Rule each
	// time), and returns the changed rules no longer active and the
	// revision the changes cover.
	EachChangedSince(ctx context.Context, rev int64, fn func(*store.Rule) error) (store.Changes, error)
	// FinishMany makes each rule final (Withdrawn or Expired) and clears
	// this site's announced status, once the mirror shows its path gone;
	// idempotent. errs[i] is items[i]'s outcome; err is set when the
	// writes failed as a whole.
	FinishMany(ctx context.Context, items []store.FinishItem) (errs []error, err error)
	// SetStatus records this site's status of the rules ids.
	SetStatus(ctx context.Context, ids []int64, announced bool, lastErr string) error
	// Changes delivers a coalesced wake-up after any desired-state change.
	Changes() <-chan struct{}
}

// Speaker is everything the reconciler needs of the BGP speaker
// (bgp.Speaker implements it): the calls that change its RIB, and the
// mirror of that RIB that the reconciler observes.
type Speaker interface {
	// Announce adds or replaces the local paths for rules; errs[i] is
	// the outcome for rules[i].
	Announce(ctx context.Context, rules []flowspec.Rule) (errs []error)
	// Withdraw deletes the local paths whose NLRIs are ms; errs[i] is the
	// outcome for ms[i].
	Withdraw(ctx context.Context, ms []flowspec.Match) (errs []error)

	// Changes delivers a coalesced wake-up after any mirror change.
	Changes() <-chan struct{}
	// Paths calls fn for every locally originated path in the mirror of
	// the RIB; ok is false (and fn is not called) until it is initialised.
	Paths(fn func(m flowspec.Match, a flowspec.Action)) (ok bool)
	// Path returns the path for m as Paths reports it; ok is false while
	// the mirror is not initialised.
	Path(m flowspec.Match) (a flowspec.Action, present, ok bool)
	// Len returns the number of paths.
	Len() int
	// DrainDirty calls fn for every Match whose path changed since the
	// previous call and forgets them; complete is false (fn not called)
	// when it cannot say, and then every path must be compared.
	DrainDirty(fn func(flowspec.Match)) (gen uint64, complete bool)
	// Generation counts the mirror's changes: equal readings mean nothing
	// changed in between.
	Generation() uint64
	// Epoch changes when the RIB was recreated (a speaker restart):
	// nothing seen in the old one holds for the new one.
	Epoch() uint64
	// PeerReestablished counts peers that reset and came back (GoBGP sends
	// them the whole table again by itself).
	PeerReestablished() uint64
	// EstablishedPeers is the number of established BGP sessions (storm
	// pacing protects those only).
	EstablishedPeers() int
}

// Defaults for the zero Config fields.
const (
	DefaultResyncInterval     = 5 * time.Minute
	DefaultMaxWithdrawPerPass = 10000 // what config applies when unset
	DefaultRetryBase          = 100 * time.Millisecond
	DefaultRetryMax           = 30 * time.Second
	DefaultSettleTimeout      = 2 * time.Second
)

// Config tunes the loop. The zero value gives the defaults.
type Config struct {
	// ResyncInterval is the period of the full safety-net pass; default 5m.
	ResyncInterval time.Duration
	// MaxWithdrawPerPass caps orphan withdrawals: a pass that finds more
	// orphans than this withdraws none of them and reports it (Capped), on
	// the grounds that losing most of the desired state at once is more
	// likely a fault than an intent. Retiring rules are not orphans and are
	// never capped. 0 (or negative) means no cap, as in the config file;
	// the config layer applies DefaultMaxWithdrawPerPass when it is unset.
	MaxWithdrawPerPass int
	// RetryBase and RetryMax bound the per-rule exponential backoff after a
	// transient error; defaults 100ms and 30s.
	RetryBase, RetryMax time.Duration
	// SettleTimeout is how long a change the speaker accepted may take to
	// show in the mirror before it is requested again; default 2s.
	SettleTimeout time.Duration
	// AnnounceRate paces re-announcement after a speaker restart or into an
	// empty RIB (paths per second; 0: unpaced). See storm.go.
	AnnounceRate int
	// DryRun computes and reports every pass's plan but changes nothing:
	// no speaker calls and no store writes.
	DryRun bool
	// Recorder, if set, is told about passes, announcements, withdrawals
	// and expiry lateness (metrics).
	Recorder Recorder
	// RuleFailed, if set, is told when the speaker refuses a rule's
	// announcement or withdrawal: on the first failure of a request and
	// when it is given up (terminal), not on every retry. It is called on
	// the loop and must not block (notifications queue it).
	RuleFailed func(id int64, rule string, withdraw bool, err error, terminal bool)
	// Clock is what the loop reads as now and arms its timers on; nil is
	// the system clock. Tests inject a clock.Fake.
	Clock clock.Clock
}

func (c Config) withDefaults() Config {
	if c.ResyncInterval <= 0 {
		c.ResyncInterval = DefaultResyncInterval
	}
	if c.RetryBase <= 0 {
		c.RetryBase = DefaultRetryBase
	}
	if c.RetryMax <= 0 {
		c.RetryMax = DefaultRetryMax
	}
	if c.RetryMax < c.RetryBase {
		c.RetryMax = c.RetryBase
	}
	if c.SettleTimeout <= 0 {
		c.SettleTimeout = DefaultSettleTimeout
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	return c
}

// PassResult summarises one pass.
type PassResult struct {
	Started  time.Time
	Duration time.Duration
	// Added, Updated, Withdrawn (orphans and retiring rules), Adopted and
	// Finished count what the pass did (in a dry run: would do).
	Added, Updated, Withdrawn, Adopted, Finished int
	// Orphans is the number of orphan paths found.
	Orphans int
	// Pending counts changes not requested this pass: waiting for a
	// backoff to expire or for the mirror to show an earlier change.
	Pending int
	// Errors counts failures in this pass: per-rule and store errors.
	Errors int
	// Err says why the pass did less than a full reconcile; "" if it did not.
	Err string
	// Capped is set when the orphan cap stopped all orphan withdrawals.
	Capped bool
	DryRun bool
	// Full is set for a pass that re-read every desired row (the first
	// pass and the periodic resync); other passes read only what changed.
	Full bool
	// Incremental is set for a pass that compared only the Matches that
	// may have changed since the previous pass (Speaker.DrainDirty and the
	// store's changes since the last revision read); others
	// compare every desired rule with every path. Adopted and Orphans
	// still count all Matches adopted and the orphans among those compared.
	Incremental bool
	// Skipped is set for a pass that found the store's revision and the
	// mirror's generation unchanged since a pass with nothing to do, and so
	// did nothing; its counts repeat that pass's.
	Skipped bool

	// partial is set for a pass that could not compare the desired state
	// with the RIB (either unreadable) or was interrupted.
	partial bool
}

// Changed reports whether the pass changed (or in a dry run would change)
// the RIB or the store's final states.
func (p PassResult) Changed() bool {
	return p.Added+p.Updated+p.Withdrawn+p.Finished > 0
}

// DriftCounts counts repairs of the RIB drifting away from what this
// process had seen it hold. A rule's first announcement and an operator's
// change are not drift.
type DriftCounts struct {
	Readded          uint64 // a desired path seen in the RIB went missing and was re-added
	OrphansWithdrawn uint64 // a path nothing desires was withdrawn
	Replaced         uint64 // a desired path's action changed under us and was replaced
	// SpeakerRestarts counts restarts of the embedded speaker seen (its
	// RIB recreated empty); Reannounced the paths announced again after
	// one.
	SpeakerRestarts, Reannounced uint64
	// PeerResets counts upstream peers that reset and came back; GoBGP
	// sends them the whole table again by itself.
	PeerResets uint64
}

// Reconciler keeps the speaker's paths equal to the desired state. Its
// named parts (see the package doc) are owned by the goroutine running
// passes; what other goroutines read is behind mu or atomic.
type Reconciler struct {
	log   hclog.Logger
	d     Desired
	s     Speaker
	cfg   Config
	clock clock.Clock
	wake  signal

	running atomic.Bool
	// settled counts the compactions the settle timer made (Run);
	// rowsCompact says the loop left no rows scattered (source.scattered)
	// after its last pass or compaction, by either kind of compaction.
	settled     atomic.Uint64
	rowsCompact atomic.Bool

	mu   sync.Mutex
	last PassResult

	loaded     chan struct{} // closed by the first complete pass (Loaded)
	loadedOnce sync.Once

	seed *snapshot // the first pass's complete read, if given (Seed)

	early   earlySet // announced ahead of their commit (early.go)
	leaving earlySet // withdrawn ahead of their commit (early.go)

	readded, orphaned, replaced atomic.Uint64
	restarts, reannounced       atomic.Uint64
	changeCount                 atomic.Uint64 // ChangeCount
	statusCount                 atomic.Uint64 // statuses written (WorkCount)

	// The named parts, owned by the goroutine running passes.
	src  source    // desired state: full reads and changes since a revision
	plan planner   // the one comparison of desired with actual state
	work workQueue // attempts, expectations, backoff and storm pacing
	logs passLog   // per-pass log throttling

	// Pass bookkeeping, owned by the same goroutine.
	quiet        quiet
	epoch        uint64 // speaker epoch last seen
	epochKnown   bool
	reannouncing bool // after a speaker restart, until every rule is back
	restarted    bool // a restart seen by a pass that did not get to plan
	// rereadWanted asks for a read of every row after a store error;
	// rereadAt is when one was last attempted.
	rereadWanted bool
	rereadAt     time.Time
	storeFail    int       // consecutive passes with a store error
	storeNext    time.Time // retry after a store error
}

// New returns a reconciler of speaker s to desired state d. It does nothing
// until Run.
func New(log hclog.Logger, d Desired, s Speaker, cfg Config) *Reconciler {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	cfg = cfg.withDefaults()
	r := &Reconciler{
		log:    log,
		d:      d,
		s:      s,
		cfg:    cfg,
		clock:  cfg.Clock,
		wake:   newSignal(),
		work:   newWorkQueue(cfg),
		loaded: make(chan struct{}),
	}
	r.plan = planner{src: &r.src, dirty: make(map[flowspec.Match]struct{}), fullDiff: true}
	return r
}

// now reads the reconciler's clock.
func (r *Reconciler) now() time.Time { return r.clock.Now() }

// Trigger asks for a pass soon. It never blocks and is safe from any
// goroutine; triggers that arrive before the pass starts merge into it.
func (r *Reconciler) Trigger() { r.wake.notify() }

// ChangeCount returns how many paths the passes so far added, updated,
// withdrawn or finished (dry runs count nothing). It only grows, at the
// end of each pass. (Counted as each batch of a pass returned from the
// speaker instead, the burst headroom of main's memory tuning stayed on
// through a whole bulk load: at 100,000 rules through the API the daemon
// used 10.7–11.9 CPU-s instead of 7.7–9.0 and settled 376–391 MB of RSS
// instead of 309–337, two rounds each in turn.)
func (r *Reconciler) ChangeCount() uint64 { return r.changeCount.Load() }

// WorkCount returns ChangeCount plus how many rule statuses the passes
// wrote to the store. It only grows. A load's statuses are written after
// its paths changed (for seconds, at a million rules) and make garbage of
// their own: a caller that waits for the work of a burst to end, not only
// its path changes, watches this count.
func (r *Reconciler) WorkCount() uint64 { return r.changeCount.Load() + r.statusCount.Load() }

// LastPass returns the result of the most recent pass.
func (r *Reconciler) LastPass() PassResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// Drift returns the drift repair counters since New.
func (r *Reconciler) Drift() DriftCounts {
	d := DriftCounts{
		Readded:          r.readded.Load(),
		OrphansWithdrawn: r.orphaned.Load(),
		Replaced:         r.replaced.Load(),
		SpeakerRestarts:  r.restarts.Load(),
		Reannounced:      r.reannounced.Load(),
	}
	d.PeerResets = r.s.PeerReestablished()
	return d
}

// Loaded is closed once a pass has compared the whole desired state with
// the RIB and handed every difference to the speaker (a rule the speaker
// refused aside): the speaker's table is then the desired table, and the
// daemon brings the BGP sessions up (see bgp.Config.HoldPeers).
func (r *Reconciler) Loaded() <-chan struct{} { return r.loaded }

// isLoaded reports whether Loaded is closed.
func (r *Reconciler) isLoaded() bool {
	select {
	case <-r.loaded:
		return true
	default:
		return false
	}
}

// Run runs passes until ctx is done: one at once, then one per wake-up. It
// returns nil when ctx is done.
//
// Wake-ups: a Trigger, a store or mirror change, and three timers on the
// reconciler's clock: the nearest expiry, the nearest retry (backoff,
// expectation, paced batch, early grace, store backoff) and the periodic
// resync. Every pass re-reads what changed; nothing is taken from the
// event itself.
func (r *Reconciler) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("reconcile: Run is already running")
	}
	defer r.running.Store(false)

	storeCh, ribCh := r.d.Changes(), r.s.Changes()
	resync, expiry, retry := r.clock.NewTimer(), r.clock.NewTimer(), r.clock.NewTimer()
	defer resync.Stop()
	defer expiry.Stop()
	defer retry.Stop()
	// settle fires once no pass ran for compactAfter while rows read
	// since the last complete read lie scattered (source.compactRows):
	// the burst that brought them is over.
	settle := r.clock.NewTimer()
	defer settle.Stop()
	resync.Reset(r.cfg.ResyncInterval)

	// The periodic complete re-read runs off the loop (readSums), so
	// drift repair and expiry go on meanwhile; the pass that takes it
	// checks the copy against it (reading every row again, on the loop,
	// if they differ) and compares everything. The first pass reads on
	// the loop, or takes the seed's read.
	snaps := make(chan *snapshot, 1)
	reading := false
	snap := r.seed // the first pass's read, if Seed gave it
	r.seed = nil

	r.Trigger()
	full := true // the first pass reads everything
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake.c:
		case <-storeCh:
			if r.deferWake(retry) {
				continue
			}
		case <-ribCh:
			if r.deferWake(retry) {
				continue
			}
		case <-expiry.C():
		case <-retry.C():
		case <-resync.C():
			resync.Reset(r.cfg.ResyncInterval)
			if !r.src.ok {
				full = true
				break
			}
			if !reading {
				reading = true
				r.src.track(true)
				n, seed := r.src.byID.len(), r.src.sumSeed()
				go func() { snaps <- readSums(ctx, r.d, seed, r.now, n) }()
			}
			continue
		case <-settle.C():
			if r.src.compactRows(true) {
				r.settled.Add(1)
				r.log.Debug("rows read since the last complete read compacted after the burst", "rows", len(r.src.rows))
			}
			r.rowsCompact.Store(!r.src.scattered())
			continue
		case snap = <-snaps:
			reading = false
			if snap.err == nil {
				r.log.Debug("desired state re-read in the background", "rules", len(snap.sums), "took", snap.took)
			}
		}
		nextExpiry, nextRetry := r.runPass(ctx, full, snap)
		full, snap = false, nil
		if !reading {
			r.src.track(false)
		}
		if r.src.scattered() {
			settle.Reset(compactAfter)
		} else {
			settle.Stop()
		}
		r.rowsCompact.Store(!r.src.scattered())
		r.arm(expiry, nextExpiry)
		r.arm(retry, nextRetry)
	}
}

// Seed gives the first pass of Run its complete read of the desired state,
// made by the caller: rev as Revision returned it, then every rule of one
// EachActive walk given to rows.Add. The first pass takes it as it takes a
// background re-read, catching up with what changed since rev
// (EachChangedSince), instead of reading every row again: the daemon reads the
// rules once at start, for the guardrails' check (whose withdrawals the
// catching up then sees) and for this. Seed must be called before Run; a
// walk that failed is not given (the first pass then reads on its own).
func (r *Reconciler) Seed(rev int64, rows *Rows, at time.Time) {
	s := &snapshot{rev: rev, at: at}
	s.index(rows.take())
	r.seed = s
	r.src.track(true)
}

// deferWake leaves a store or mirror wake-up to a later pass while a
// single write made early has not settled (EarlySettleWait): the retry
// timer is armed for it. It reports whether it did.
func (r *Reconciler) deferWake(retry clock.Timer) bool {
	at, ok := r.settling()
	if ok {
		r.arm(retry, earliest(r.nextRetry(r.now()), at))
	}
	return ok
}

// settling reports whether a single write changed on the speaker ahead
// of its commit is expected to settle soon, and until when
// (EarlySettleWait).
func (r *Reconciler) settling() (until time.Time, ok bool) {
	now := r.now()
	a, aok := r.early.settling(now)
	w, wok := r.leaving.settling(now)
	switch {
	case aok && wok:
		return earliest(a, w), true
	case aok:
		return a, true
	case wok:
		return w, true
	}
	return time.Time{}, false
}

// arm sets t to fire at at, or stops it when at is zero.
func (r *Reconciler) arm(t clock.Timer, at time.Time) {
	if at.IsZero() {
		t.Stop()
		return
	}
	t.Reset(max(at.Sub(r.now()), 0))
}
