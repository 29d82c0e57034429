package api_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/metrics"

	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
)

// fakePasses reports a settable last pass.
type fakePasses struct {
	mu   sync.Mutex
	last reconcile.PassResult
}

func (f *fakePasses) LastPass() reconcile.PassResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *fakePasses) Drift() reconcile.DriftCounts { return reconcile.DriftCounts{} }

func (f *fakePasses) Preview(context.Context) (reconcile.Plan, error) { return reconcile.Plan{}, nil }

func TestStatusCLI(t *testing.T) {
	rules, rib, passes := newFakeRules(), newFakeRIB(), &fakePasses{}
	srv := newAPI(nil, rules, rib, api.WithReconciler(passes))
	sock := filepath.Join(t.TempDir(), "rk.sock")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx, sock) }()
	t.Cleanup(func() { cancel(); <-errc })
	waitListening(t, sock, errc)

	// Before the first pass, with no peers and no rules.
	code, out, errOut := runCLI(t, sock, "status")
	if code != 0 || !strings.Contains(out, "none yet") || !strings.Contains(out, "(none configured)") {
		t.Fatalf("status: exit %d\n%s%s", code, out, errOut)
	}

	rib.setPeers([]bgp.PeerStatus{
		{Address: "192.0.2.1", ASN: 65001, State: "established", Uptime: 90 * time.Minute, Families: []string{"ipv4-flowspec", "ipv6-flowspec"}, Sent: 12},
		{Address: "2001:db8::1", ASN: 4200000001, State: "active", Families: []string{"ipv6-flowspec"}},
	})
	for _, text := range []string{ruleDiscard, ruleOther, "match destination 2001:db8::7/128 then discard"} {
		in := store.Input{Rule: mustParse(t, text), Actor: "cli"}
		if _, _, err := rules.Upsert(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rules.Withdraw(ctx, 2, "cli"); err != nil {
		t.Fatal(err)
	}
	started := time.Now().Add(-3 * time.Second)
	passes.mu.Lock()
	passes.last = reconcile.PassResult{Started: started, Duration: 1500 * time.Microsecond, Added: 2, Adopted: 1, Errors: 1, Err: "RIB mirror not initialised"}
	passes.mu.Unlock()

	code, out, errOut = runCLI(t, sock, "status")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	t.Logf("status:\n%s", out)
	lines := strings.Split(out, "\n")
	// The peer table is aligned: the STATE column starts at the same
	// offset in the header and in both rows.
	var header, row1, row2 string
	for i, l := range lines {
		if strings.Contains(l, "PEER") {
			header, row1, row2 = l, lines[i+1], lines[i+2]
			break
		}
	}
	col := strings.Index(header, "STATE")
	if col < 0 || strings.Index(row1, "established") != col || strings.Index(row2, "active") != col {
		t.Errorf("peer table not aligned:\n%s\n%s\n%s", header, row1, row2)
	}
	for _, want := range []string{"1h30m", "4200000001", "ipv4-flowspec,ipv6-flowspec",
		"result:", "error", "added 2, updated 0", "RIB mirror not initialised"} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q", want)
		}
	}

	rows := map[string]bool{}
	for _, l := range lines {
		rows[strings.Join(strings.Fields(l), " ")] = true
	}
	for _, want := range []string{"active 2", "withdrawing 1", "withdrawn 0", "active ipv6-flowspec 1"} {
		if !rows[want] {
			t.Errorf("status output lacks the row %q", want)
		}
	}

	code, out, errOut = runCLI(t, sock, "status", "--json")
	if code != 0 {
		t.Fatalf("status --json: exit %d: %s", code, errOut)
	}
	var st api.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if len(st.Peers) != 2 || st.Peers[0].Sent != 12 || st.Peers[0].UptimeSeconds != 5400 {
		t.Errorf("peers = %+v", st.Peers)
	}
	if st.Rules == nil || st.Rules.Active != 2 || st.Rules.Withdrawing != 1 || st.Rules.ByFamily["ipv6-flowspec"] != 1 || st.Rules.ByFamily["ipv4-flowspec"] != 2 {
		t.Errorf("rules = %+v", st.Rules)
	}
	if st.LastPass == nil || st.LastPass.Result != "error" || st.LastPass.Added != 2 || !st.LastPass.Started.Equal(started) {
		t.Errorf("last pass = %+v", st.LastPass)
	}

	if code, _, _ := runCLI(t, sock, "status", "extra"); code != 2 {
		t.Errorf("status with an argument: exit %d, want 2", code)
	}
}

// driftPasses is fakePasses with drift counters.
type driftPasses struct {
	fakePasses
	drift reconcile.DriftCounts
}

func (d *driftPasses) Drift() reconcile.DriftCounts { return d.drift }

// status keeps the last pass apart from the totals since start: the
// rules in the RIB as wanted are a level, not a change of the pass, and
// the changes of every pass add up under "Since start".
func TestStatusLastPassAndSinceStart(t *testing.T) {
	rules, rib := newFakeRules(), newFakeRIB()
	passes := &driftPasses{drift: reconcile.DriftCounts{Readded: 4, OrphansWithdrawn: 2, SpeakerRestarts: 1}}
	mx := metrics.New(nil)
	srv := newAPI(nil, rules, rib, api.WithReconciler(passes), api.WithMetrics(nil, mx))
	sock := filepath.Join(t.TempDir(), "rk.sock")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx, sock) }()
	t.Cleanup(func() { cancel(); <-errc })
	waitListening(t, sock, errc)

	// The changes are counted as the speaker accepts each (the
	// reconciler tells the recorder), whether a pass or an early
	// announcement made them.
	for range 7 {
		mx.Announced(flowspec.IPv4, "add")
	}
	mx.Announced(flowspec.IPv4, "update")
	now := time.Now()
	for _, p := range []reconcile.PassResult{
		{Started: now.Add(-2 * time.Second), Added: 5, Adopted: 0},
		{Started: now.Add(-time.Second), Added: 2, Updated: 1, Adopted: 5, Errors: 1, Err: "boom"},
		{Started: now, Finished: 3, Adopted: 7},
	} {
		mx.PassDone(p)
		passes.mu.Lock()
		passes.last = p
		passes.mu.Unlock()
	}
	code, out, errOut := runCLI(t, sock, "status")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	last, since, ok := strings.Cut(out, "Since start")
	if !ok {
		t.Fatalf("no Since start block:\n%s", out)
	}
	for _, want := range []string{"added 0, updated 0, withdrawn 0, finished 3", "in the RIB as wanted:  7"} {
		if !strings.Contains(last, want) {
			t.Errorf("last pass lacks %q:\n%s", want, last)
		}
	}
	if strings.Contains(last, "adopted") {
		t.Errorf("adopted shown among the pass's changes:\n%s", last)
	}
	if !strings.Contains(last, "Sites: default") {
		t.Errorf("status does not list the known sites:\n%s", last)
	}
	for _, want := range []string{"3 (1 with errors)", "added 7, updated 1, withdrawn 0, finished 3", "re-added 4", "orphans withdrawn 2", "speaker 1"} {
		if !strings.Contains(since, want) {
			t.Errorf("since start lacks %q:\n%s", want, since)
		}
	}
	_, out, _ = runCLI(t, sock, "status", "--json")
	var st api.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.SinceStart == nil || st.SinceStart.Added != 7 || st.SinceStart.Readded != 4 || st.LastPass.Adopted != 7 {
		t.Errorf("status --json: %v\n%s", err, out)
	}
}
