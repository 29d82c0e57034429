package admit_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

var (
	noc  = admit.Actor{Name: "noc", Source: admit.SourceTCP}
	cust = admit.Actor{Name: "cust", Source: admit.SourceTCP, Scope: admit.Scope{
		Prefixes: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}, Actions: []string{"rtbh"}}}
	limiter = admit.Actor{Name: "limiter", Source: admit.SourceTCP, Scope: admit.Scope{Actions: []string{"rate-limit"}}}
)

func openStore(t testing.TB, c clock.Clock) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "rk.db"), Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func req(text string) admit.Request { return admit.Request{Text: text} }

func wantRefusal(t *testing.T, what string, err error, kind admit.Kind, field string, msg ...string) *admit.Refusal {
	t.Helper()
	ref, ok := admit.As(err)
	if !ok {
		t.Fatalf("%s: %v, want a %s refusal", what, err, kind)
	}
	if ref.Kind != kind || ref.Field != field {
		t.Errorf("%s: %s on %q (%s), want %s on %q", what, ref.Kind, ref.Field, ref.Msg, kind, field)
	}
	for _, m := range msg {
		if !strings.Contains(ref.Msg, m) {
			t.Errorf("%s: %q lacks %q", what, ref.Msg, m)
		}
	}
	return ref
}

// A scoped token acts only on what its scope covers, also when it updates
// or withdraws: "rtbh" is a blackhole exactly, a rate-limit token cannot
// withdraw the operator's blackhole nor turn the operator's discard into a
// rate limit, and nobody scoped touches another actor's rule without
// others_rules.
func TestScopeMeansWhatItSays(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, nil)
	g := admit.New(admit.Config{Store: st})

	_, _, err := g.Add(ctx, cust, req("route 198.51.100.8/32 then community 64500:100 next-hop 203.0.113.99"))
	wantRefusal(t, "rtbh token with communities", err, admit.KindForbidden, "text", `may not use action route`, `"rtbh" allows "route PREFIX then blackhole" exactly`)
	_, _, err = g.Add(ctx, cust, req("route 198.51.100.8/32 then blackhole community 64500:100"))
	wantRefusal(t, "rtbh token with an extra community", err, admit.KindForbidden, "text", `action route`)
	if _, created, err := g.Add(ctx, cust, req("route 198.51.100.8/32 then blackhole")); err != nil || !created {
		t.Fatalf("plain blackhole: %v", err)
	}

	bh, _, err := g.Add(ctx, noc, req("route 203.0.113.44/32 then blackhole"))
	if err != nil {
		t.Fatal(err)
	}
	disc, _, err := g.Add(ctx, noc, req("match destination 203.0.113.45/32 then discard"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.WithdrawMatch(ctx, limiter, "route 203.0.113.44/32 then blackhole")
	wantRefusal(t, "rate-limit token withdrawing a blackhole by text", err, admit.KindForbidden, "text", "uses action rtbh")
	_, err = g.Withdraw(ctx, limiter, bh.ID)
	wantRefusal(t, "rate-limit token withdrawing a blackhole by id", err, admit.KindForbidden, "id", "uses action rtbh")
	_, _, err = g.Add(ctx, limiter, req("match destination 203.0.113.45/32 then rate-limit 1e12"))
	wantRefusal(t, "rate-limit token turning a discard into a rate limit", err, admit.KindForbidden, "text", "uses action discard")
	for _, id := range []int64{bh.ID, disc.ID} {
		r, err := st.Get(ctx, id)
		if err != nil || r.WithdrawRequested || r.Rule.Action.String() == "rate-limit 1e+12" || r.Actor != "noc" {
			t.Errorf("rule %d changed by refused writes: %+v %v", id, r, err)
		}
	}

	// Another actor's rule inside the scope: refused, unless others_rules.
	mine, _, err := g.Add(ctx, limiter, req("match destination 192.0.2.1/32 then rate-limit 1000"))
	if err != nil {
		t.Fatal(err)
	}
	other := admit.Actor{Name: "other", Source: admit.SourceTCP, Scope: limiter.Scope}
	_, _, err = g.Add(ctx, other, req("match destination 192.0.2.1/32 then rate-limit 5"))
	wantRefusal(t, "another actor's rule", err, admit.KindForbidden, "text", `written by "limiter"`, "others_rules")
	_, err = g.Withdraw(ctx, other, mine.ID)
	wantRefusal(t, "withdraw another actor's rule", err, admit.KindForbidden, "id", `written by "limiter"`)
	other.Scope.OthersRules = true
	if _, _, err := g.Add(ctx, other, req("match destination 192.0.2.1/32 then rate-limit 5")); err != nil {
		t.Errorf("with others_rules: %v", err)
	}

	// Another scope's rule, by id: exactly an unknown id.
	_, errOther := g.Withdraw(ctx, cust, disc.ID)
	_, errNone := g.Withdraw(ctx, cust, 999999)
	r1 := wantRefusal(t, "another scope's rule", errOther, admit.KindNotFound, "id")
	r2 := wantRefusal(t, "unknown rule", errNone, admit.KindNotFound, "id")
	if strings.ReplaceAll(r2.Msg, "999999", fmt.Sprint(disc.ID)) != r1.Msg || strings.Contains(r1.Msg, "203.0.113") {
		t.Errorf("another scope's rule %q differs from an unknown one %q", r1.Msg, r2.Msg)
	}
	// A read-only actor writes nothing.
	_, _, err = g.Add(ctx, admit.Actor{Name: "view", Source: admit.SourceTCP, ReadOnly: true}, req("route 198.51.100.9/32 then blackhole"))
	wantRefusal(t, "read-only actor", err, admit.KindForbidden, "", "may only read")
}

// Everything a request may ask of the daemon is bounded, and the refusal
// names the setting that changes the bound.
func TestInputBounds(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, nil)
	g := admit.New(admit.Config{Store: st, Limits: admit.Limits{MaxBatchRules: 3, MaxSitesPerRule: 2, MaxSiteNameBytes: 8, MaxTextBytes: 80}})
	sites := func(s ...string) admit.Request {
		r := req("route 198.51.100.1/32 then blackhole")
		r.Sites, r.AllowUnknownSites = &s, true
		return r
	}
	_, _, err := g.Add(ctx, noc, sites("a", "b", "c"))
	wantRefusal(t, "three sites", err, admit.KindInvalidInput, "sites", "max_sites_per_rule")
	_, _, err = g.Add(ctx, noc, sites(strings.Repeat("x", 9)))
	wantRefusal(t, "long site name", err, admit.KindInvalidInput, "sites", "max_site_name_bytes")
	_, _, err = g.Add(ctx, noc, req("match destination 203.0.113.7/32 protocol udp destination-port ==53 source-port ==1234 packet-length >=1000 then discard"))
	wantRefusal(t, "long text", err, admit.KindInvalidRule, "text", "max_text_bytes")
	batch := []admit.Request{req("route 198.51.100.1/32 then blackhole"), req("route 198.51.100.2/32 then blackhole"),
		req("route 198.51.100.3/32 then blackhole"), req("route 198.51.100.4/32 then blackhole")}
	_, err = g.AddMany(ctx, noc, batch)
	wantRefusal(t, "four rules", err, admit.KindTooLarge, "rules", "max_batch_rules", "at most 3")
	_, err = g.AddMany(ctx, noc, []admit.Request{batch[0], req("route 198.51.100.2/32 then nonsense")})
	if ref := wantRefusal(t, "bad second rule", err, admit.KindInvalidRule, "text"); ref.Index != 1 {
		t.Errorf("index %d, want 1", ref.Index)
	}
	if _, err := g.AddMany(ctx, noc, batch[:3]); err != nil {
		t.Fatalf("three rules: %v", err)
	}
	if _, _, err := g.Add(ctx, noc, sites("a", "b")); err != nil {
		t.Errorf("two sites: %v", err)
	}
}

// A scoped token creates at most its rate of new rules a minute (by
// default [limits] scoped_new_rules_per_minute), so churn cannot force
// the speaker into compactions; updates are free and the window slides.
func TestScopedRateOfNewRules(t *testing.T) {
	ctx := context.Background()
	fc := clock.NewFake(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	st := openStore(t, fc)
	g := admit.New(admit.Config{Store: st, Clock: fc, Limits: admit.Limits{ScopedNewRulesPerMinute: 3}})
	add := func(i int) error {
		_, _, err := g.Add(ctx, cust, admit.Request{Text: fmt.Sprintf("route 198.51.100.%d/32 then blackhole", i), TTL: ptr("10m")})
		return err
	}
	for i := range 3 {
		if err := add(i + 1); err != nil {
			t.Fatal(err)
		}
		fc.Advance(10 * time.Second)
	}
	if err := add(1); err != nil {
		t.Errorf("an update counts as new: %v", err)
	}
	// Add/withdraw cycles create new rules each time: still capped.
	if _, err := g.WithdrawMatch(ctx, cust, "route 198.51.100.1/32 then blackhole"); err != nil {
		t.Fatal(err)
	}
	ref := wantRefusal(t, "fourth new rule", add(4), admit.KindRateLimited, "text", "scoped_new_rules_per_minute")
	if ref.RetryAfter != 30*time.Second {
		t.Errorf("retry after %s, want 30s (the first rule leaves the window)", ref.RetryAfter)
	}
	// An unscoped operator is not limited by it.
	for i := range 5 {
		if _, _, err := g.Add(ctx, noc, req(fmt.Sprintf("route 203.0.113.%d/32 then blackhole", i+1))); err != nil {
			t.Fatal(err)
		}
	}
	fc.Advance(30 * time.Second)
	if err := add(4); err != nil {
		t.Errorf("after the window slid: %v", err)
	}
	// The token's own setting wins over the default; -1 is no cap.
	free := cust
	free.Scope.MaxNewPerMinute = -1
	for i := range 5 {
		if _, _, err := g.Add(ctx, free, req(fmt.Sprintf("route 198.51.100.%d/32 then blackhole", 100+i))); err != nil {
			t.Fatalf("no cap: %v", err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// early records what the gate announced ahead of commits, and what the
// store had seen by then.
type early struct {
	mu        sync.Mutex
	announced []flowspec.Match
	withdrawn []flowspec.Match
	settled   []flowspec.Match
	// notify, if set, receives each announced Match.
	notify chan flowspec.Match
}

func (e *early) AnnounceEarly(r flowspec.Rule) bool {
	e.mu.Lock()
	e.announced = append(e.announced, r.Match)
	notify := e.notify
	e.mu.Unlock()
	if notify != nil {
		notify <- r.Match
	}
	return false // no speaker holds it
}

func (e *early) WithdrawEarly(m flowspec.Match) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.withdrawn = append(e.withdrawn, m)
	return false
}

func (e *early) Settle(m flowspec.Match, _ bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settled = append(e.settled, m)
}

// failing is a store whose Upsert blocks until released, then fails or
// succeeds as told, and records the context it ran with.
type failing struct {
	*store.Store
	release chan struct{}
	err     error
	ctxErr  error
}

func (f *failing) Upsert(ctx context.Context, in store.Input) (store.Rule, bool, error) {
	if f.release != nil {
		<-f.release
	}
	f.ctxErr = ctx.Err()
	if f.err != nil {
		return store.Rule{}, false, f.err
	}
	return f.Store.Upsert(ctx, in)
}

// A single rule for every site goes to the speaker before its commit only
// when everything passed and the store is ready; once sent, the commit is
// not abandoned with the client; a failed commit settles at once.
func TestEarlyAnnouncement(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, nil)
	e := &early{}
	var notReady error
	fs := &failing{Store: st}
	ready := func(_ context.Context, in store.Input) error {
		if len(in.Sites) > 0 && in.Sites[0] != st.Site() {
			return fmt.Errorf("not this site: %w", store.ErrNotEarly)
		}
		return notReady
	}
	g := admit.New(admit.Config{Store: fs, Early: e, EarlyReady: ready,
		Guardrails: config.Guardrails{Safelist: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}})

	if _, _, err := g.Add(ctx, noc, req("match destination 203.0.113.7/32 then discard")); err != nil {
		t.Fatal(err)
	}
	if len(e.announced) != 1 || len(e.settled) != 1 {
		t.Fatalf("ready store: announced %v settled %v", e.announced, e.settled)
	}
	_, _, err := g.Add(ctx, noc, req("match destination 192.0.2.1/32 then discard"))
	wantRefusal(t, "safelisted", err, admit.KindGuardrail, "text", "safelist")
	s := []string{"fra1"}
	if _, _, err := g.Add(ctx, noc, admit.Request{Text: "match destination 203.0.113.8/32 then discard", Sites: &s, AllowUnknownSites: true}); err != nil {
		t.Fatal(err)
	}
	notReady = errors.New("disk full")
	if _, _, err := g.Add(ctx, noc, req("match destination 203.0.113.9/32 then discard")); err != nil {
		t.Fatal(err)
	}
	if len(e.announced) != 1 {
		t.Fatalf("refused, sited or unready writes were announced early: %v", e.announced)
	}
	notReady = nil

	// The client goes away while the commit runs: it still lands.
	fs.release = make(chan struct{})
	e.mu.Lock()
	e.notify = make(chan flowspec.Match, 1)
	e.mu.Unlock()
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, _, err := g.Add(cctx, noc, req("match destination 203.0.113.10/32 then discard"))
		done <- err
	}()
	<-e.notify // announced; the commit is held
	e.mu.Lock()
	e.notify = nil
	e.mu.Unlock()
	cancel()
	close(fs.release)
	if err := <-done; err != nil || fs.ctxErr != nil {
		t.Fatalf("abandoned write: %v (store context %v)", err, fs.ctxErr)
	}
	// A commit that fails after the announcement settles at once and
	// reports the store's error.
	fs.release, fs.err = nil, fmt.Errorf("disk I/O error: %w", store.ErrUnavailable)
	_, _, err = g.Add(ctx, noc, req("match destination 203.0.113.11/32 then discard"))
	wantRefusal(t, "failed commit", err, admit.KindUnavailable, "")
	if len(e.announced) != 3 || len(e.settled) != 3 || e.settled[2] != e.announced[2] {
		t.Errorf("failed commit: announced %v settled %v", e.announced, e.settled)
	}
}

// Every write that stored something wakes Changed (the event stream);
// a refused one does not.
func TestChangedAfterEveryWrite(t *testing.T) {
	ctx := context.Background()
	n := 0
	g := admit.New(admit.Config{Store: openStore(t, nil), Changed: func() { n++ }})
	r, _, err := g.Add(ctx, noc, req("route 203.0.113.1/32 then blackhole"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.AddMany(ctx, noc, []admit.Request{req("route 203.0.113.2/32 then blackhole")}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.WithdrawMatch(ctx, noc, "route 203.0.113.2/32 then blackhole"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Withdraw(ctx, noc, r.ID); err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Fatalf("Changed called %d times for 4 writes", n)
	}
	if _, _, err := g.Add(ctx, noc, req("route 203.0.113.0/24 then blackhole")); err == nil {
		t.Fatal("a /24 blackhole passed the default prefix lengths")
	}
	if n != 4 {
		t.Errorf("a refused write woke Changed")
	}
}

// Static rules are the configuration's: stored by actor "config", withdrawn
// when no longer declared, refused to any other actor.
func TestSyncStatic(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, nil)
	g := admit.New(admit.Config{Store: st})
	a := mustParse(t, "match destination 203.0.113.1/32 then discard")
	b := mustParse(t, "match destination 203.0.113.2/32 then discard")
	if err := g.SyncStatic(ctx, []config.StaticRule{{Rule: a, Text: a.String()}, {Rule: b, Text: b.String()}}); err != nil {
		t.Fatal(err)
	}
	_, _, err := g.Add(ctx, noc, req(a.String()))
	wantRefusal(t, "changing a static rule", err, admit.KindDeclared, "text")
	if err := g.SyncStatic(ctx, []config.StaticRule{{Rule: a, Text: a.String()}}); err != nil {
		t.Fatal(err)
	}
	rules, err := st.ActiveFrom(ctx, admit.StaticOrigin(st.Site()))
	if err != nil {
		t.Fatal(err)
	}
	live := 0
	for _, r := range rules {
		if !r.WithdrawRequested {
			live++
			if r.Rule.Match != a.Match || r.Actor != admit.ConfigActor {
				t.Errorf("static rule %+v", r)
			}
		}
	}
	if live != 1 {
		t.Errorf("%d static rules live, want 1", live)
	}
}

// Enforce withdraws, as actor "guardrail", what breaks the guardrails in
// force after they change; nothing else.
func TestEnforce(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, nil)
	g := admit.New(admit.Config{Store: st})
	keep, _, err := g.Add(ctx, noc, admit.Request{Text: "match destination 198.51.100.1/32 then discard", TTL: ptr("10m")})
	if err != nil {
		t.Fatal(err)
	}
	bad, _, err := g.Add(ctx, noc, admit.Request{Text: "match destination 203.0.113.7/32 then discard", TTL: ptr("10m")})
	if err != nil {
		t.Fatal(err)
	}
	g.SetGuardrails(config.Guardrails{Safelist: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}})
	ws, err := g.Enforce(ctx)
	if err != nil || len(ws) != 1 || ws[0].Rule.ID != bad.ID {
		t.Fatalf("enforce: %+v %v", ws, err)
	}
	for id, want := range map[int64]bool{keep.ID: false, bad.ID: true} {
		r, _ := st.Get(ctx, id)
		if r.WithdrawRequested != want || want && r.Actor != admit.GuardrailActor {
			t.Errorf("rule %d: withdrawn %v by %q", id, r.WithdrawRequested, r.Actor)
		}
	}
	if ws, err := g.Enforce(ctx); err != nil || len(ws) != 0 {
		t.Errorf("second enforce: %+v %v", ws, err)
	}
}

func mustParse(t *testing.T, text string) flowspec.Rule {
	t.Helper()
	r, err := flowspec.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A single withdrawal goes to the speaker before its commit only for an
// active rule of this site whose withdrawal is not requested yet, and
// only while the store expects the commit to succeed; it always settles.
func TestEarlyWithdrawalOnlyWhenReady(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, nil)
	e := &early{}
	var notReady error
	ready := func(r store.Rule) error {
		if notReady != nil {
			return notReady
		}
		return st.EarlyWithdrawOK(r)
	}
	g := admit.New(admit.Config{Store: st, Early: e, EarlyWithdrawReady: ready})
	add := func(r admit.Request) store.Rule {
		t.Helper()
		stored, _, err := g.Add(ctx, noc, r)
		if err != nil {
			t.Fatal(err)
		}
		return stored
	}
	withdrawn := func() []flowspec.Match {
		e.mu.Lock()
		defer e.mu.Unlock()
		return slices.Clone(e.withdrawn)
	}

	a := add(req("match destination 203.0.113.30/32 then discard"))
	notReady = fmt.Errorf("the last commit failed: %w", store.ErrNotEarly)
	if _, err := g.Withdraw(ctx, noc, a.ID); err != nil {
		t.Fatal(err)
	}
	if w := withdrawn(); len(w) != 0 {
		t.Fatalf("withdrawn early while the store did not expect the commit: %v", w)
	}
	notReady = nil

	b := add(req("match destination 203.0.113.31/32 then discard"))
	settled := len(e.settled)
	if _, err := g.Withdraw(ctx, noc, b.ID); err != nil {
		t.Fatal(err)
	}
	if w := withdrawn(); len(w) != 1 || w[0] != b.Rule.Match || len(e.settled) != settled+1 || e.settled[settled] != b.Rule.Match {
		t.Fatalf("ready store: withdrawn early %v, settled %v", w, e.settled)
	}
	// Already on its way out: nothing leaves again.
	if _, err := g.Withdraw(ctx, noc, b.ID); err != nil {
		t.Fatal(err)
	}
	// A rule for another site has no path here.
	other := []string{"fra1"}
	c := add(admit.Request{Text: "match destination 203.0.113.32/32 then discard", Sites: &other, AllowUnknownSites: true})
	if _, err := g.WithdrawMatch(ctx, noc, c.Rule.String()); err != nil {
		t.Fatal(err)
	}
	if w := withdrawn(); len(w) != 1 {
		t.Fatalf("a repeated withdrawal or another site's rule was withdrawn early: %v", w)
	}
}

func TestParseTTL(t *testing.T) {
	for in, want := range map[string]time.Duration{"90s": 90 * time.Second, "30m": 30 * time.Minute, "1h30m": 90 * time.Minute, "2d": 48 * time.Hour, "30d": 720 * time.Hour} {
		if got, err := admit.ParseTTL(in); err != nil || got != want {
			t.Errorf("ParseTTL(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "0d", "-1m", "d", "2days", "1.5d", "123456d", "never"} {
		if got, err := admit.ParseTTL(in); err == nil {
			t.Errorf("ParseTTL(%q) = %v, want an error", in, got)
		}
	}
}

// EnforceAmong checks the rules of a reading made by the caller (the
// daemon's start shares it with the reconciler) and withdraws those that
// break the guardrails, leaving a rule changed since that reading for
// the next check.
func TestEnforceAmong(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, nil)
	g := admit.New(admit.Config{Store: st})
	add := func(text string) store.Rule {
		t.Helper()
		r, _, err := g.Add(ctx, noc, admit.Request{Text: text, TTL: ptr("10m")})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	keep := add("match destination 198.51.100.1/32 then discard")
	bad := add("match destination 203.0.113.7/32 then discard")
	changed := add("match destination 203.0.113.8/32 then discard")
	rows, err := st.ActiveRules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// After the reading: withdrawn by someone else.
	if _, err := g.Withdraw(ctx, noc, changed.ID); err != nil {
		t.Fatal(err)
	}
	g.SetGuardrails(config.Guardrails{Safelist: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}})
	ws, err := g.EnforceAmong(ctx, rows)
	if err != nil || len(ws) != 1 || ws[0].Rule.ID != bad.ID {
		t.Fatalf("enforce among the rows read: %+v %v", ws, err)
	}
	for id, want := range map[int64]bool{keep.ID: false, bad.ID: true, changed.ID: false} {
		r, _ := st.Get(ctx, id)
		if r.WithdrawRequested != (want || id == changed.ID) || (r.Actor == admit.GuardrailActor) != want {
			t.Errorf("rule %d: withdrawn %v by %q", id, r.WithdrawRequested, r.Actor)
		}
	}
}

// A large batch is parsed on every CPU, and still refused for its first
// bad rule, whichever part of the batch it is in, and then stores
// nothing.
func TestLargeBatchRefusedForItsFirstBadRule(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	ctx := context.Background()
	st := openStore(t, nil)
	g := admit.New(admit.Config{Store: st})
	const n = 5000
	batch := make([]admit.Request, n)
	for i := range batch {
		batch[i] = req(fmt.Sprintf("route 10.%d.%d.%d/32 then blackhole", i>>16&255, i>>8&255, i&255))
	}
	for _, bad := range [][]int{{n - 1}, {4000, 1300}, {2600, 2500, 0}} {
		b := slices.Clone(batch)
		for _, i := range bad {
			b[i] = req("route 10.0.0.1/32 then nonsense")
		}
		_, err := g.AddMany(ctx, noc, b)
		if ref := wantRefusal(t, fmt.Sprint("bad rules ", bad), err, admit.KindInvalidRule, "text"); ref.Index != slices.Min(bad) {
			t.Errorf("bad rules %v: refused for index %d, want %d", bad, ref.Index, slices.Min(bad))
		}
	}
	if rs, err := st.List(ctx, store.Active); err != nil || len(rs) != 0 {
		t.Fatalf("after refused batches: %d rules stored (%v), want none", len(rs), err)
	}
	out, err := g.AddMany(ctx, noc, batch)
	if err != nil || len(out) != n {
		t.Fatalf("good batch: %d rules, %v", len(out), err)
	}
	for i, r := range out {
		if want := batch[i].Text; r.Text != want {
			t.Fatalf("rule %d stored as %q, want %q", i, r.Text, want)
		}
	}
}
