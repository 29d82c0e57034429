package admit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/guard"
	"github.com/ribkeeper/ribkeeper/store"
)

// Store is the desired state as the gate writes it (implemented by
// *store.Store). The gate is the only caller of its write methods.
type Store interface {
	Upsert(ctx context.Context, in store.Input) (store.Rule, bool, error)
	UpsertMany(ctx context.Context, ins []store.Input) ([]store.Rule, error)
	Withdraw(ctx context.Context, id int64, actor string) (store.Rule, error)
	WithdrawMany(ctx context.Context, items []store.WithdrawItem, actor string) ([]store.Rule, error)
	Get(ctx context.Context, id int64) (store.Rule, error)
	// GetBrief returns a rule without its text, reason, times and
	// status: what a withdrawal checks.
	GetBrief(ctx context.Context, id int64) (store.Rule, error)
	// WithdrawSeen is Withdraw for the rule as the caller saw it (a
	// brief rule), refused with store.ErrChanged, writing nothing, if it
	// is no longer so.
	WithdrawSeen(ctx context.Context, id int64, actor string, seen store.Rule) (store.Rule, error)
	// WithdrawGone is Withdraw (with seen: WithdrawSeen) of a rule whose
	// path this site's speaker already dropped (an early withdrawal it
	// took): the same commit finishes the rule.
	WithdrawGone(ctx context.Context, id int64, actor string, seen *store.Rule) (store.Rule, error)
	// EachActive walks the active rules, brief (no reason or sites), one
	// reused Rule at a time.
	EachActive(ctx context.Context, fn func(*store.Rule) error) error
	// ActiveFrom returns the active rules a configuration declared.
	ActiveFrom(ctx context.Context, origin string) ([]store.Rule, error)
	// Sites returns the sites registered so far, sorted.
	Sites(ctx context.Context) ([]string, error)
	// QuotaCounts answers the quotas' counts (guard.Counter).
	QuotaCounts(ctx context.Context, q store.QuotaQuery) (store.QuotaCounts, error)
	// ActiveMatches looks up active rules by Match, for the checks of an
	// update or withdrawal against the stored rule.
	ActiveMatches(ctx context.Context, matches []flowspec.Match) (map[flowspec.Match]store.Existing, error)
	// Site is this instance's site name.
	Site() string
	// EachSetRule walks the active rules of a declarative set (ApplySet).
	EachSetRule(ctx context.Context, name string, fn func(store.SetMember) error) error
}

// Early changes the speaker ahead of a commit (implemented by
// *reconcile.Reconciler): AnnounceEarly hands a rule to the speaker,
// WithdrawEarly takes a rule's path off it, Settle says the write is done
// (committed or failed) so the reconciler decides from the store again.
// AnnounceEarly and WithdrawEarly report whether the speaker took the
// change before they returned: the write's own commit then records what
// the reconciler would record after it (the status "announced", the
// rule finished), so that no second commit follows a single write.
type Early interface {
	AnnounceEarly(flowspec.Rule) (taken bool)
	WithdrawEarly(flowspec.Match) (gone bool)
	// Settle's applied says the write committed with that outcome
	// recorded: nothing is left for the reconciler to do at once.
	Settle(m flowspec.Match, applied bool)
}

// Config configures a Gate.
type Config struct {
	Store Store
	// Guardrails are the guardrails in force at start ([guardrails]).
	Guardrails config.Guardrails
	Limits     Limits
	// Sendable refuses what the speaker can never carry (bgp.Sendable);
	// nil accepts every valid rule.
	Sendable func(flowspec.Match) error
	// Early, if set, receives single rules ahead of their commit while
	// EarlyReady (nil: always; *store.Store's EarlyOK) says the commit is
	// expected to succeed and makes the rule desired at this site.
	Early      Early
	EarlyReady func(context.Context, store.Input) error
	// EarlyWithdrawReady, likewise, says whether withdrawing the rule as
	// just read (GetBrief) is expected to commit and to take a path of
	// this site off (nil: always; *store.Store's EarlyWithdrawOK); only
	// then does a single withdrawal leave ahead of its commit.
	EarlyWithdrawReady func(store.Rule) error
	// SetChunk is the rules of one transaction of a set's apply (0:
	// 10,000); single writes go between them.
	SetChunk int
	// Changed is called after every write that stored something (the
	// event stream's nudge); nil: nothing.
	Changed func()
	// WriteTimeout bounds a write from its arrival at the gate to its
	// answer, the wait for the gate included ([store] write_timeout;
	// zero: store.DefaultWriteTimeout). See lock.go.
	WriteTimeout time.Duration
	Clock        clock.Clock // nil: the system clock
	Log          hclog.Logger
}

// Gate is the admission gate. It is safe for concurrent use; writes are
// serialized.
type Gate struct {
	cfg    Config
	guard  *guard.Guard
	limits atomic.Pointer[Limits]
	mu     writeLock // serializes check-and-store (lock.go)
	rates  actorRates
	// setMu serializes the applies and deletions of declarative sets,
	// which hold mu only chunk by chunk (sets.go).
	setMu sync.Mutex
	// seen keeps the rules single Adds stored, for their withdrawal
	// (seen.go).
	seen seenRules
}

// New returns a gate over cfg.Store.
func New(cfg Config) *Gate {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = store.DefaultWriteTimeout
	}
	g := &Gate{cfg: cfg, mu: newWriteLock(), guard: guard.New(cfg.Guardrails).WithClock(cfg.Clock.Now)}
	g.SetLimits(cfg.Limits)
	return g
}

// SetLimits replaces the input bounds (on reload).
func (g *Gate) SetLimits(l Limits) {
	l = withDefaults(l)
	g.limits.Store(&l)
}

// Limits returns the input bounds in force.
func (g *Gate) Limits() Limits { return *g.limits.Load() }

func (g *Gate) now() time.Time { return g.cfg.Clock.Now() }

func (g *Gate) changed() {
	if g.cfg.Changed != nil {
		g.cfg.Changed()
	}
}

// Add stores one rule for a (upsert by match): created reports a new rule.
func (g *Gate) Add(ctx context.Context, a Actor, req Request) (r store.Rule, created bool, err error) {
	if ref := writable(a); ref != nil {
		return store.Rule{}, false, ref
	}
	l := g.Limits()
	p, ref := g.parse(req, -1, l, a.Name)
	if ref != nil {
		return store.Rule{}, false, ref
	}
	ctx, cancel := g.deadline(ctx, 1)
	defer cancel()
	if err := g.mu.lockBy(ctx, g.cfg.WriteTimeout); err != nil {
		return store.Rule{}, false, err
	}
	defer g.mu.Unlock()
	ins := []parsed{p}
	if err := g.admit(ctx, a, ins, false); err != nil {
		return store.Rule{}, false, err
	}
	in := ins[0].in
	early := g.cfg.Early != nil && g.earlyReady(ctx, in)
	if early {
		// From here the rule is on its way to the routers: the commit
		// must not be abandoned because the client went away, or an
		// announced rule would be withdrawn for a write that may yet
		// land.
		in.Announced = g.cfg.Early.AnnounceEarly(in.Rule)
		var cancel context.CancelFunc
		ctx, cancel = keepDeadline(ctx)
		defer cancel()
	}
	r, created, err = g.cfg.Store.Upsert(ctx, in)
	if early {
		if err != nil && !errors.Is(err, store.ErrOutcomePending) {
			// Not stored: the path announced ahead of the commit is
			// taken off now, by the gate, not left to the next pass,
			// which withdraws no orphan while the store cannot be read
			// (a commit refused because the file was lost or found
			// corrupt).
			g.cfg.Early.WithdrawEarly(in.Rule.Match)
		}
		g.cfg.Early.Settle(in.Rule.Match, err == nil && r.Announced)
	}
	if err != nil {
		return store.Rule{}, false, fromStore(err, 0)
	}
	g.seen.put(r)
	g.changed()
	return r, created, nil
}

// AddMany stores every request for a in one transaction, all or none,
// and returns the rules in request order. Refusals carry the index of the
// request at fault.
func (g *Gate) AddMany(ctx context.Context, a Actor, reqs []Request) ([]store.Rule, error) {
	if ref := writable(a); ref != nil {
		return nil, ref
	}
	l := g.Limits()
	switch {
	case len(reqs) == 0:
		return nil, refuse(KindInvalidInput, -1, "rules", "rules is empty: send at least one rule")
	case len(reqs) > l.MaxBatchRules:
		return nil, refuse(KindTooLarge, -1, "rules",
			"%d rules in one request, more than the %d allowed ([limits] max_batch_rules): split it into requests of at most %d",
			len(reqs), l.MaxBatchRules, l.MaxBatchRules)
	}
	ps, ref := g.parseAll(reqs, l, a.Name)
	if ref != nil {
		return nil, ref
	}
	ctx, cancel := g.deadline(ctx, len(ps))
	defer cancel()
	if err := g.mu.lockBy(ctx, g.cfg.WriteTimeout); err != nil {
		return nil, err
	}
	defer g.mu.Unlock()
	if err := g.admit(ctx, a, ps, true); err != nil {
		return nil, err
	}
	ins := make([]store.Input, len(ps))
	for i := range ps {
		ins[i] = ps[i].in
	}
	g.seen.clear() // the batch may change rules kept there
	out, err := g.cfg.Store.UpsertMany(ctx, ins)
	if err != nil {
		return nil, fromStore(err, 0)
	}
	g.changed()
	return out, nil
}

// Verdict is what Validate decided: the rule as it would be stored, or
// the refusal a write of it would get now, and, for a rule a write would
// take, its expiry and the warnings about what is allowed but dangerous.
type Verdict struct {
	Rule      flowspec.Rule
	ExpiresAt time.Time // zero: never expires
	// DefaultTTL says ExpiresAt is [guardrails] default_ttl from now;
	// KeepsExpiry that the rule is active and keeps its own.
	DefaultTTL  bool
	KeepsExpiry bool
	Refusal     *Refusal
	Warnings    []string
}

// Validate checks req for a exactly as Add would, storing nothing and
// counting nothing against the rate limits. A refusal of the rule is the
// Verdict's Refusal; the error is for a failure to check (the store
// cannot answer).
func (g *Gate) Validate(ctx context.Context, a Actor, req Request) (Verdict, error) {
	if ref := writable(a); ref != nil {
		return Verdict{Refusal: ref}, nil
	}
	p, ref := g.parse(req, -1, g.Limits(), a.Name)
	if ref != nil {
		return Verdict{Refusal: ref}, nil
	}
	v := Verdict{Rule: p.in.Rule}
	ps := []parsed{p}
	ds, err := g.check(ctx, a, ps, false, true)
	if err == nil {
		err = g.knownSites(ctx, ps[0].in)
	}
	if err != nil {
		if ref, ok := As(err); ok && ref.Kind != KindUnavailable {
			v.Refusal = ref
			return v, nil
		}
		return Verdict{}, err
	}
	d := ds[0]
	v.ExpiresAt, v.DefaultTTL, v.KeepsExpiry, v.Warnings = d.ExpiresAt, d.DefaultTTL, d.KeepExpiry, d.Warnings
	return v, nil
}

// earlyReady asks the store whether in's commit is expected to succeed
// now and to make the rule desired at this site.
func (g *Gate) earlyReady(ctx context.Context, in store.Input) bool {
	if g.cfg.EarlyReady == nil {
		return true
	}
	err := g.cfg.EarlyReady(ctx, in)
	if err != nil {
		g.cfg.Log.Debug("no early announcement: the store may refuse the write; announcing after the commit", "error", err)
	}
	return err == nil
}

// writable refuses every write of a read-only actor.
func writable(a Actor) *Refusal {
	if a.ReadOnly {
		return refuse(KindForbidden, -1, "", "%s may only read: use a token with role \"write\"", a.who())
	}
	if a.Name == "" {
		return refuse(KindForbidden, -1, "", "a write needs an actor: this is a bug in the caller")
	}
	return nil
}

// knownSites refuses sites no appliance registered, as the store does
// when it stores the rule.
func (g *Gate) knownSites(ctx context.Context, in store.Input) error {
	if len(in.Sites) == 0 || in.AllowUnknownSites {
		return nil
	}
	known, err := g.cfg.Store.Sites(ctx)
	if err != nil {
		return fromStore(err, 0)
	}
	for _, site := range in.Sites {
		if contains(known, site) {
			continue
		}
		list := "none yet"
		if len(known) > 0 {
			list = fmt.Sprint(known)
		}
		return refuse(KindInvalidInput, -1, "sites",
			"unknown site %q: the known sites are %s; check the spelling, or allow unknown sites (CLI --allow-unknown-sites, JSON allow_unknown_sites) for a site not started yet",
			site, list)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
