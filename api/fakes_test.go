package api_test

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// fakeRules is a small in-memory desired state with the store's semantics:
// upsert by match among active rules, stable ids, withdraw sets a flag.
type fakeRules struct {
	mu     sync.Mutex
	rules  map[int64]store.Rule
	events map[int64][]store.Event
	nextID int64
	// panicOnGet makes Get panic for this id, to exercise recovery.
	panicOnGet int64
	// down makes List fail as a store does when its database is unreachable.
	down bool
	// notEarly is EarlyOK's answer when set: the store does not expect a
	// write to commit (a full disk, a failed commit).
	notEarly error
	// rev moves with every change, as the store's revision.
	rev int64
}

// Revision is the store's: it moves with every change.
func (f *fakeRules) Revision(ctx context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev, nil
}

// EarlyOK is the store's preflight: this fake's site is "default", the
// only site it knows.
func (f *fakeRules) EarlyOK(ctx context.Context, in store.Input) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.notEarly != nil {
		return f.notEarly
	}
	for _, s := range in.Sites {
		if s != "default" {
			return fmt.Errorf("site %q: %w", s, store.ErrInvalidInput)
		}
	}
	return nil
}

func newFakeRules() *fakeRules {
	return &fakeRules{rules: map[int64]store.Rule{}, events: map[int64][]store.Event{}}
}

func (f *fakeRules) Upsert(ctx context.Context, in store.Input) (store.Rule, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, created := f.upsert(in)
	return r, created, nil
}

// UpsertMany is all or nothing: it validates every input before storing.
func (f *fakeRules) UpsertMany(ctx context.Context, ins []store.Input) ([]store.Rule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, in := range ins {
		if !in.Rule.IsValid() {
			return nil, fmt.Errorf("store: inputs[%d].rule: invalid: %w", i, store.ErrInvalidInput)
		}
	}
	out := make([]store.Rule, len(ins))
	for i, in := range ins {
		out[i], _ = f.upsert(in)
	}
	return out, nil
}

func (f *fakeRules) History(ctx context.Context, id int64) ([]store.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.rules[id]; !ok {
		return nil, store.ErrNotFound
	}
	return slices.Clone(f.events[id]), nil
}

func (f *fakeRules) record(id int64, kind store.EventKind, actor string) {
	f.rev++
	f.events[id] = append(f.events[id], store.Event{
		ID: int64(len(f.events[id]) + 1), RuleID: id, At: time.Now().UTC(), Kind: kind, Actor: actor,
	})
}

func (f *fakeRules) upsert(in store.Input) (store.Rule, bool) {
	now := time.Now().UTC()
	for id, r := range f.rules {
		if r.State == store.Active && r.Rule.Match == in.Rule.Match {
			r.Rule, r.Text, r.Actor = in.Rule, in.Rule.String(), in.Actor
			r.UpdatedAt, r.WithdrawRequested = now, false
			if in.Keep&store.KeepReason == 0 {
				r.Reason = in.Reason
			}
			if in.Keep&store.KeepExpiry == 0 {
				r.ExpiresAt = in.ExpiresAt
			}
			if in.Keep&store.KeepSites == 0 {
				r.Sites = in.Sites
			}
			f.rules[id] = r
			f.record(id, store.EventUpdated, in.Actor)
			return r, false
		}
	}
	f.nextID++
	r := store.Rule{
		ID: f.nextID, Rule: in.Rule, Text: in.Rule.String(), Reason: in.Reason, Actor: in.Actor,
		Sites: in.Sites, CreatedAt: now, UpdatedAt: now, ExpiresAt: in.ExpiresAt, State: store.Active,
	}
	f.rules[r.ID] = r
	f.record(r.ID, store.EventCreated, in.Actor)
	return r, true
}

// GetBrief is Get: the fake has no columns to leave out.
func (f *fakeRules) GetBrief(ctx context.Context, id int64) (store.Rule, error) {
	return f.Get(ctx, id)
}

func (f *fakeRules) Get(ctx context.Context, id int64) (store.Rule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.panicOnGet != 0 && id == f.panicOnGet {
		panic("fake store exploded")
	}
	r, ok := f.rules[id]
	if !ok {
		return store.Rule{}, store.ErrNotFound
	}
	return r, nil
}

func (f *fakeRules) List(ctx context.Context, state store.State) ([]store.Rule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, fmt.Errorf("store: list rules: database unavailable: connection refused: check the DSN: %w", store.ErrUnavailable)
	}
	var out []store.Rule
	for _, r := range f.rules {
		if state == "" || r.State == state {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b store.Rule) int { return cmp.Compare(b.ID, a.ID) })
	return out, nil
}

func (f *fakeRules) ListPage(ctx context.Context, p store.Page) ([]store.Rule, error) {
	all, err := f.List(ctx, p.State)
	if err != nil {
		return nil, err
	}
	var out []store.Rule
	for _, r := range all {
		if (p.After == 0 || r.ID < p.After) && (p.WithdrawRequested == nil || r.WithdrawRequested == *p.WithdrawRequested) && len(out) < p.Limit {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeRules) Withdraw(ctx context.Context, id int64, actor string) (store.Rule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.rules[id]
	if !ok {
		return store.Rule{}, store.ErrNotFound
	}
	if r.State == store.Active && !r.WithdrawRequested {
		r.WithdrawRequested, r.Actor, r.UpdatedAt = true, actor, time.Now().UTC()
		f.rules[id] = r
		f.record(id, store.EventWithdrawRequested, actor)
	}
	return r, nil
}

// WithdrawSeen is Withdraw if rule id is still as seen (what a
// withdrawal checks), store.ErrChanged otherwise.
func (f *fakeRules) WithdrawSeen(ctx context.Context, id int64, actor string, seen store.Rule) (store.Rule, error) {
	f.mu.Lock()
	r, ok := f.rules[id]
	f.mu.Unlock()
	if ok && (r.Rule != seen.Rule || r.Actor != seen.Actor || r.Origin != seen.Origin || !slices.Equal(r.Sites, seen.Sites) ||
		r.State != seen.State || r.WithdrawRequested != seen.WithdrawRequested) {
		return store.Rule{}, store.ErrChanged
	}
	return f.Withdraw(ctx, id, actor)
}

// WithdrawGone is WithdrawSeen (seen nil: Withdraw), then the rule
// finished as withdrawn in the same step.
func (f *fakeRules) WithdrawGone(ctx context.Context, id int64, actor string, seen *store.Rule) (store.Rule, error) {
	var (
		r   store.Rule
		err error
	)
	if seen != nil {
		r, err = f.WithdrawSeen(ctx, id, actor, *seen)
	} else {
		r, err = f.Withdraw(ctx, id, actor)
	}
	if err != nil || r.State != store.Active {
		return r, err
	}
	f.finish(id, store.Withdrawn)
	return f.Get(ctx, id)
}

// finish ends rule id in state st (withdrawn or expired), as the
// reconciler does once its path is gone.
func (f *fakeRules) finish(id int64, st store.State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.rules[id]
	r.State, r.WithdrawRequested = st, false
	f.rules[id] = r
	f.record(id, store.EventKind(st), "reconciler")
}

func (f *fakeRules) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.rules)
}

// fakeRIB is a RIB mirror holding whatever paths the test put in it.
type fakeRIB struct {
	mu    sync.Mutex
	ready bool
	paths map[flowspec.Match]flowspec.Action
	peers []bgp.PeerStatus
	made  time.Time
}

// Delivery: every established peer has every path of the RIB (one family).
func (f *fakeRIB) Delivery(m flowspec.Match) (peers []string, total int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, in := f.paths[m]
	for _, p := range f.peers {
		total++
		if in && p.State == "established" {
			peers = append(peers, p.Address)
		}
	}
	return peers, total
}

// NotSent: no router profile holds anything back.
func (f *fakeRIB) NotSent(flowspec.Match) []string { return nil }

// PathAges: every path was announced when the fake was made.
func (f *fakeRIB) PathAges(context.Context) (map[flowspec.Match]time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[flowspec.Match]time.Time{}
	for m := range f.paths {
		out[m] = f.made
	}
	return out, nil
}

func newFakeRIB() *fakeRIB {
	return &fakeRIB{ready: true, paths: map[flowspec.Match]flowspec.Action{}, made: time.Now()}
}

func (f *fakeRIB) Paths(fn func(flowspec.Match, flowspec.Action)) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ready {
		return false
	}
	for m, a := range f.paths {
		fn(m, a)
	}
	return true
}

func (f *fakeRIB) Peers(ctx context.Context) ([]bgp.PeerStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.peers), nil
}

func (f *fakeRIB) announce(r flowspec.Rule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paths[r.Match] = r.Action
}

func (f *fakeRIB) setReady(ready bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ready = ready
}

func (f *fakeRIB) setPeers(p []bgp.PeerStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.peers = p
}

func (f *fakeRules) Counts(ctx context.Context) ([]store.Count, error) {
	rules, err := f.List(ctx, "")
	if err != nil {
		return nil, err
	}
	var out []store.Count
	for _, r := range rules {
		out = append(out, store.Count{Family: r.Rule.Match.Family(), State: r.State,
			WithdrawRequested: r.WithdrawRequested, Announced: r.Announced, N: 1})
	}
	return out, nil
}

func (f *fakeRules) DestinationCounts(ctx context.Context) ([]store.DestinationCount, error) {
	rules, err := f.List(ctx, "")
	if err != nil {
		return nil, err
	}
	var out []store.DestinationCount
	for _, r := range rules {
		d, _ := r.Rule.Match.Destination()
		out = append(out, store.DestinationCount{Destination: d, Count: store.Count{Family: r.Rule.Match.Family(), State: r.State,
			WithdrawRequested: r.WithdrawRequested, Announced: r.Announced, N: 1}})
	}
	return out, nil
}

func (f *fakeRules) Sites(ctx context.Context) ([]string, error) { return []string{"default"}, nil }

// QuotaCounts counts like the store: active rules not on their way out.
func (f *fakeRules) QuotaCounts(ctx context.Context, q store.QuotaQuery) (store.QuotaCounts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := store.QuotaCounts{ByDestination: map[netip.Prefix]int{}, Existing: map[flowspec.Match]store.Existing{}}
	for _, d := range q.Destinations {
		out.ByDestination[d] = 0
	}
	for _, r := range f.rules {
		if r.State != store.Active || r.WithdrawRequested {
			continue
		}
		out.Active++
		if q.Actor != "" && r.Actor == q.Actor {
			out.ByActor++
		}
		if d, ok := r.Rule.Match.Destination(); ok {
			if _, asked := out.ByDestination[d]; asked {
				out.ByDestination[d]++
			}
		}
		if slices.Contains(q.Matches, r.Rule.Match) {
			out.Existing[r.Rule.Match] = store.Existing{ID: r.ID, Match: r.Rule.Match, Actor: r.Actor,
				ExpiresAt: r.ExpiresAt, Action: r.Rule.Action, Origin: r.Origin}
		}
	}
	return out, nil
}

// WithdrawMany withdraws each item's rule that is still active.
func (f *fakeRules) WithdrawMany(ctx context.Context, items []store.WithdrawItem, actor string) ([]store.Rule, error) {
	var out []store.Rule
	for _, it := range items {
		r, err := f.Withdraw(ctx, it.ID, actor)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ActiveRules returns the active rules, oldest first.
func (f *fakeRules) ActiveRules(ctx context.Context) ([]store.Rule, error) {
	rules, err := f.List(ctx, store.Active)
	slices.Reverse(rules)
	return rules, err
}

// EachActive walks the active rules, oldest first.
func (f *fakeRules) EachActive(ctx context.Context, fn func(*store.Rule) error) error {
	rules, err := f.ActiveRules(ctx)
	if err != nil {
		return err
	}
	for i := range rules {
		if err := fn(&rules[i]); err != nil {
			return err
		}
	}
	return nil
}

// ActiveFrom returns the active rules origin declared.
func (f *fakeRules) ActiveFrom(ctx context.Context, origin string) ([]store.Rule, error) {
	rules, err := f.ActiveRules(ctx)
	return slices.DeleteFunc(rules, func(r store.Rule) bool { return r.Origin != origin }), err
}

func (f *fakeRules) Site() string { return "default" }

// testStore is what a test server reads and what its gate writes.
type testStore interface {
	api.Rules
	admit.Store
}

// newGate is the admission gate over st with cfg's other settings.
func newGate(st admit.Store, cfg admit.Config) *admit.Gate {
	cfg.Store = st
	return admit.New(cfg)
}

// newAPI is a Server over st, written through a default gate.
func newAPI(log hclog.Logger, st testStore, rib api.RIB, opts ...api.Option) *api.Server {
	return api.New(log, st, newGate(st, admit.Config{}), rib, opts...)
}

// ActiveMatches looks up the active rules with the given Matches, as the
// store does.
func (f *fakeRules) ActiveMatches(ctx context.Context, matches []flowspec.Match) (map[flowspec.Match]store.Existing, error) {
	c, err := f.QuotaCounts(ctx, store.QuotaQuery{Matches: matches})
	return c.Existing, err
}

// EachSetRule walks the active rules of set name, oldest first.
func (f *fakeRules) EachSetRule(ctx context.Context, name string, fn func(store.SetMember) error) error {
	rules, err := f.ActiveRules(ctx)
	if err != nil {
		return err
	}
	for _, r := range rules {
		if r.Set != name {
			continue
		}
		if err := fn(store.SetMember{ID: r.ID, Rule: r.Rule, Reason: r.Reason, Actor: r.Actor, Sites: r.Sites,
			ExpiresAt: r.ExpiresAt, WithdrawRequested: r.WithdrawRequested}); err != nil {
			return err
		}
	}
	return nil
}

// SetCounts counts the active rules of each set per last writer.
func (f *fakeRules) SetCounts(ctx context.Context) ([]store.SetCount, error) {
	rules, err := f.ActiveRules(ctx)
	if err != nil {
		return nil, err
	}
	var out []store.SetCount
	for _, r := range rules {
		if r.Set == "" || r.WithdrawRequested {
			continue
		}
		i := slices.IndexFunc(out, func(c store.SetCount) bool { return c.Name == r.Set && c.Actor == r.Actor })
		if i < 0 {
			out = append(out, store.SetCount{Name: r.Set, Actor: r.Actor})
			i = len(out) - 1
		}
		out[i].Active++
	}
	slices.SortFunc(out, func(a, b store.SetCount) int {
		return strings.Compare(a.Name+"\x00"+a.Actor, b.Name+"\x00"+b.Actor)
	})
	return out, nil
}
