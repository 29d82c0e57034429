package admit_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
)

// hungStore is a real SQLite store behind a disk that hangs: Upsert
// waits until the test lets it go on. honour says whether it answers at
// its caller's deadline, as the store does (store's deadline.go), or
// hangs past it, as a store without bounded writes did.
type hungStore struct {
	*store.Store
	entered chan struct{}
	release chan struct{}
	honour  bool
}

func (h *hungStore) Upsert(ctx context.Context, in store.Input) (store.Rule, bool, error) {
	h.entered <- struct{}{}
	if h.honour {
		select {
		case <-h.release:
		case <-ctx.Done():
			return store.Rule{}, false, fmt.Errorf("store: upsert rule: database unavailable: %w (the disk hangs, injected)", store.ErrUnavailable)
		}
	} else {
		<-h.release
	}
	return h.Store.Upsert(ctx, in)
}

func newHungRig(t *testing.T, honour bool) (*admit.Gate, *hungStore, *bgp.Speaker, *passCounter) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := hclog.New(&hclog.LoggerOptions{Output: tWriter{t}, Level: hclog.Info})
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(t.TempDir(), "rk.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sp := bgp.New(log.Named("bgp"), bgp.Config{ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: -1})
	if err := sp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sp.Stop)
	passes := &passCounter{wake: make(chan struct{}, 1)}
	rec := reconcile.New(log.Named("reconcile"), st, sp, reconcile.Config{Clock: clock.NewFake(time.Now()), Recorder: passes})
	done := make(chan struct{})
	go func() {
		defer close(done)
		rec.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	h := &hungStore{Store: st, entered: make(chan struct{}, 4), release: make(chan struct{}), honour: honour}
	g := admit.New(admit.Config{Store: h, Early: rec, EarlyReady: h.EarlyOK, EarlyWithdrawReady: h.EarlyWithdrawOK,
		WriteTimeout: 300 * time.Millisecond, Log: log.Named("admit")})
	return g, h, sp, passes
}

// answer waits for a write's answer; a write still waiting after 30 s
// waits for the hung disk.
func answer(t *testing.T, what string, c <-chan error) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no answer within 30 s: it waits behind the hung disk", what)
		return nil
	}
}

// A write whose commit hangs is answered 503 at its deadline, and the
// path announced ahead of its commit leaves again: a write that was not
// stored never stays on a router.
func TestHungCommitAnswersAtTheDeadlineAndWithdraws(t *testing.T) {
	g, h, sp, passes := newHungRig(t, true)
	rule := mustParse(t, "match destination 203.0.113.9/32 then discard")
	done := make(chan error, 1)
	go func() {
		_, _, err := g.Add(context.Background(), noc, req(rule.String()))
		done <- err
	}()
	<-h.entered
	wantRefusal(t, "the write whose commit hangs", answer(t, "the write whose commit hangs", done), admit.KindUnavailable, "")
	limit := time.NewTimer(30 * time.Second)
	defer limit.Stop()
	for {
		_, present, _ := sp.Path(rule.Match)
		if !present {
			break
		}
		select {
		case <-passes.wake:
		case <-limit.C:
			t.Fatal("the path announced ahead of a commit that timed out is still in the RIB after 30 s")
		}
	}
	close(h.release)
}

// A write behind a hung one is answered by its own deadline, with a 503
// that says why and names the setting, instead of waiting for the gate
// as long as the disk hangs; reads go on.
func TestWriteBehindAHungOneIsNotBlocked(t *testing.T) {
	g, h, _, _ := newHungRig(t, false)
	first := make(chan error, 1)
	go func() {
		_, _, err := g.Add(context.Background(), noc, req("match destination 203.0.113.10/32 then discard"))
		first <- err
	}()
	<-h.entered // the first write holds the gate, its disk hung past every deadline
	second := make(chan error, 1)
	go func() {
		_, _, err := g.Add(context.Background(), noc, req("match destination 203.0.113.11/32 then discard"))
		second <- err
	}()
	ref := wantRefusal(t, "the write behind the hung one", answer(t, "the write behind the hung one", second), admit.KindUnavailable, "")
	if !strings.Contains(ref.Msg, "write_timeout") || !strings.Contains(ref.Msg, "nothing was stored") {
		t.Errorf("refusal %q does not say that nothing was stored and name [store] write_timeout", ref.Msg)
	}
	if _, err := g.Validate(context.Background(), noc, req("match destination 203.0.113.12/32 then discard")); err != nil {
		t.Errorf("a check while a write hangs: %v", err)
	}
	if _, err := h.List(context.Background(), ""); err != nil {
		t.Errorf("a read while a write hangs: %v", err)
	}
	close(h.release)
	if err := answer(t, "the first write", first); err != nil {
		t.Logf("the first write, once the disk answered: %v", err)
	}
	rs, err := h.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Rule.Match == mustParse(t, "match destination 203.0.113.11/32 then discard").Match {
			t.Fatalf("the write answered 503 was stored: %+v", r)
		}
	}
}

// losingStore is a real SQLite store whose files are deleted while a
// write is on its way (after the gate's early-announcement check): its
// commit is refused (store lost), and every read fails from then on.
type losingStore struct {
	*store.Store
	path string
}

func (l *losingStore) Upsert(ctx context.Context, in store.Input) (store.Rule, bool, error) {
	for _, p := range []string{l.path, l.path + "-wal", l.path + "-shm"} {
		os.Remove(p)
	}
	return l.Store.Upsert(ctx, in)
}

// A write announced ahead of its commit, whose commit is refused because
// the store was lost meanwhile, leaves the routers at once, although the
// reconciler, which cannot read the store any more, withdraws no orphan.
func TestEarlyAnnouncedWriteRefusedByALostStoreIsWithdrawn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := hclog.New(&hclog.LoggerOptions{Output: tWriter{t}, Level: hclog.Info})
	path := filepath.Join(t.TempDir(), "rk.db")
	st, err := store.Open(ctx, store.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sp := bgp.New(log.Named("bgp"), bgp.Config{ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: -1})
	if err := sp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sp.Stop)
	passes := &passCounter{wake: make(chan struct{}, 1)}
	rec := reconcile.New(log.Named("reconcile"), st, sp, reconcile.Config{Clock: clock.NewFake(time.Now()), Recorder: passes})
	done := make(chan struct{})
	go func() {
		defer close(done)
		rec.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	l := &losingStore{Store: st, path: path}
	announced := make(chan struct{}, 1)
	g := admit.New(admit.Config{Store: l, Early: &watchEarly{Early: rec, announced: announced}, EarlyReady: l.EarlyOK,
		EarlyWithdrawReady: l.EarlyWithdrawOK, Log: log.Named("admit")})
	rule := mustParse(t, "match destination 203.0.113.13/32 then discard")
	_, _, err = g.Add(ctx, noc, req(rule.String()))
	wantRefusal(t, "a write to a store lost meanwhile", err, admit.KindUnavailable, "")
	select {
	case <-announced:
	default:
		t.Fatal("the write was not announced ahead of its commit: the test does not test the withdrawal")
	}
	limit := time.NewTimer(30 * time.Second)
	defer limit.Stop()
	for {
		if _, present, _ := sp.Path(rule.Match); !present {
			break
		}
		select {
		case <-passes.wake:
		case <-limit.C:
			t.Fatal("the path of a write the lost store refused is still in the RIB after 30 s")
		}
	}
}

// watchEarly says when the gate announced ahead of a commit.
type watchEarly struct {
	admit.Early
	announced chan struct{}
}

func (w *watchEarly) AnnounceEarly(r flowspec.Rule) bool {
	taken := w.Early.AnnounceEarly(r)
	select {
	case w.announced <- struct{}{}:
	default:
	}
	return taken
}

// slowReads is a real store whose reads of the checks (quotas, the
// stored rule) hang until their caller's deadline, as on a hung disk or
// a PostgreSQL server that went away.
type slowReads struct{ *store.Store }

func (s slowReads) QuotaCounts(ctx context.Context, q store.QuotaQuery) (store.QuotaCounts, error) {
	<-ctx.Done()
	return store.QuotaCounts{}, fmt.Errorf("store: count rules for quotas: %w", ctx.Err())
}

// A write whose checks cannot read the store before its deadline is
// answered 503 (KindUnavailable, naming write_timeout), not an internal
// error: seen in CI on a frozen disk and during a PostgreSQL failover.
func TestChecksCutShortByTheDeadlineAreUnavailable(t *testing.T) {
	st := openStore(t, nil)
	g := admit.New(admit.Config{Store: slowReads{st}, WriteTimeout: 50 * time.Millisecond})
	_, _, err := g.Add(context.Background(), noc, req("match destination 203.0.113.9/32 then discard"))
	wantRefusal(t, "a write whose checks timed out", err, admit.KindUnavailable, "")
	if !strings.Contains(err.Error(), "write_timeout") {
		t.Errorf("the refusal %q does not name write_timeout", err)
	}
	// The client's own cancellation is not the store's fault.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := g.Add(ctx, noc, req("match destination 203.0.113.9/32 then discard")); err == nil || strings.Contains(err.Error(), "write_timeout") {
		t.Errorf("a cancelled client's write: %v, want its cancellation", err)
	}
}

// slowWrites is a real store whose commit outlasts its caller's
// deadline and answers with that deadline, as the store does for a write
// whose deadline passed inside it on PostgreSQL (its wrap names the
// caller's own context error).
type slowWrites struct{ *store.Store }

func (s slowWrites) Upsert(ctx context.Context, in store.Input) (store.Rule, bool, error) {
	<-ctx.Done()
	return store.Rule{}, false, fmt.Errorf("store: upsert rule: %w", ctx.Err())
}

// Such a write is a 503 that says it may or may not be stored, not an
// internal error (CI: writes during the PostgreSQL failover got 500).
func TestStoreCutShortByTheDeadlineIsUnavailable(t *testing.T) {
	st := openStore(t, nil)
	g := admit.New(admit.Config{Store: slowWrites{st}, WriteTimeout: 50 * time.Millisecond})
	_, _, err := g.Add(context.Background(), noc, req("match destination 203.0.113.9/32 then discard"))
	wantRefusal(t, "a write whose commit timed out", err, admit.KindUnavailable, "")
	if !strings.Contains(err.Error(), "may or may not be stored") {
		t.Errorf("the refusal %q does not say the outcome is unknown", err)
	}
}
