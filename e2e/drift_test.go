package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	gobgpapi "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"github.com/ribkeeper/ribkeeper/flowspec"
)

// driftFlow is BIRD's text of ruleText(i).
func driftFlow(i int) string {
	return fmt.Sprintf("flow4 { dst 10.%d.%d.%d/32; proto 17; dport 53; }", i>>16&255, i>>8&255, i&255)
}

// apiPath is r as a path of GoBGP's gRPC API, as the stock gobgp CLI
// would send it.
func apiPath(t *testing.T, r flowspec.Rule, withdraw bool) *gobgpapi.Path {
	t.Helper()
	n := nativePath(r, withdraw)
	p, err := apiutil.NewPath(n.Family, n.Nlri, withdraw, n.Attrs, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// withConfig rewrites the daemon's config with extra keys after line
// `after` and restarts it.
func withConfig(t *testing.T, d *daemon, bird *birdtest.Router, after, extra string) {
	t.Helper()
	b, err := os.ReadFile(d.conf)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?m)^" + regexp.QuoteMeta(after) + ".*$")
	loc := re.FindIndex(b)
	if loc == nil {
		t.Fatalf("no line %q in the config", after)
	}
	conf := string(b[:loc[1]]) + "\n" + extra + string(b[loc[1]:])
	if err := os.WriteFile(d.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	d.stop()
	d.start()
	// BIRD may not have seen the old daemon's session close yet: ask the
	// new daemon too.
	waitFor(t, 30*time.Second, "BGP session back", func() bool {
		return bird.Established(0) && strings.Contains(d.mustCLI("peers"), "established")
	})
}

// explainDrift logs, once a drift subtest failed, what the speaker's RIB
// held as GoBGP's own gRPC API lists it (the door the drift went in by)
// and what BIRD had: it tells a drift that never reached the daemon's
// speaker from one the reconciler did not repair.
func explainDrift(t *testing.T, d *daemon, gc gobgpapi.GoBgpServiceClient, bird *birdtest.Router) {
	if !t.Failed() {
		return
	}
	t.Logf("drift counters (readded, orphans, replaced, speaker restarts, peer resets): %v", driftOf(d.sinceStart()))
	if b, err := os.ReadFile(d.dir + "/ribkeeper.log"); err == nil {
		var lines []string
		for l := range strings.SplitSeq(string(b), "\n") {
			if strings.Contains(l, "ribkeeper.reconcile") || strings.Contains(l, "rule changed") {
				lines = append(lines, l)
			}
		}
		t.Logf("the reconciler's log and the rule changes:\n%s", strings.Join(lines, "\n"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := gc.ListPath(ctx, &gobgpapi.ListPathRequest{TableType: gobgpapi.TableType_TABLE_TYPE_GLOBAL,
		Family: &gobgpapi.Family{Afi: gobgpapi.Family_AFI_IP, Safi: gobgpapi.Family_SAFI_FLOW_SPEC_UNICAST}})
	if err != nil {
		t.Logf("speaker's RIB over gRPC: %v", err)
	} else {
		var paths []string
		for {
			r, err := st.Recv()
			if err != nil {
				break
			}
			for _, p := range r.Destination.Paths {
				paths = append(paths, fmt.Sprintf("%s %v", r.Destination.Prefix, p.Pattrs))
			}
		}
		t.Logf("speaker's RIB over gRPC (%d paths):\n%s", len(paths), strings.Join(paths, "\n"))
	}
	m, err := bird.Routes("ft4")
	t.Logf("BIRD's ft4 (%v): %v", err, m)
}

// logCount counts the log lines of the daemon that match re.
func (d *daemon) logCount(re string) int {
	b, _ := os.ReadFile(d.dir + "/ribkeeper.log")
	return len(regexp.MustCompile(re).FindAll(b, -1))
}

// sinceStart reads the totals since start from status --json (the
// console's "Since start" and the drift metrics read the same counters).
func (d *daemon) sinceStart() api.Totals {
	d.t.Helper()
	var st api.Status
	out := d.mustCLI("status", "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.SinceStart == nil {
		d.t.Fatalf("status --json: %v: %s", err, out)
	}
	return *st.SinceStart
}

// driftOf is the drift part of t.
func driftOf(t api.Totals) [5]uint64 {
	return [5]uint64{t.Readded, t.OrphansWithdrawn, t.Replaced, t.SpeakerRestarts, t.PeerResets}
}

// expectDrift waits until the drift counters are want (readded, orphans
// withdrawn, replaced, speaker restarts, peer resets) and fails if they
// pass it.
func expectDrift(t *testing.T, d *daemon, what string, want [5]uint64) {
	t.Helper()
	var got [5]uint64
	waitFor(t, 30*time.Second, what+": drift counters "+fmt.Sprint(want), func() bool {
		got = driftOf(d.sinceStart())
		for i := range got {
			if got[i] > want[i] {
				t.Fatalf("%s: drift counters (readded, orphans, replaced, speaker restarts, peer resets) = %v, want %v", what, got, want)
			}
		}
		return got == want
	})
}

// Every kind of drift, injected for real through GoBGP's gRPC API (the
// stock gobgp CLI's way in) or at BIRD, is repaired and checked in BIRD,
// and counted once under its own kind; an operator's own add, update and
// withdrawal and a peer's first session count as no drift.
func TestDriftRepairedInBIRD(t *testing.T) {
	d, bird := setup(t)
	grpcPort := birdtest.FreePort(t, "127.0.0.1")
	withConfig(t, d, bird, "listen_port", fmt.Sprintf("grpc_listen = \"127.0.0.1:%d\"\ncompact_after = 20", grpcPort))

	// The session that just came up is the daemon's first with BIRD.
	expectDrift(t, d, "first session", [5]uint64{})
	t.Run("operator's own changes", func(t *testing.T) {
		id := d.addRule("--ttl", "1h", ruleText(50))
		bird.WaitRoutes(t, "ft4", 10*time.Second, "added", func(m map[string]birdtest.Route) bool { return m[driftFlow(50)].Attrs != nil })
		d.mustCLI("rule", "add", "--ttl", "1h", strings.Replace(ruleText(50), "discard", "rate-limit 1000", 1))
		bird.WaitRoutes(t, "ft4", 10*time.Second, "updated", func(m map[string]birdtest.Route) bool {
			r, ok := m[driftFlow(50)]
			return ok && r.Attrs["BGP.ext_community"] != discardExt
		})
		d.mustCLI("rule", "withdraw", id)
		bird.WaitRoutes(t, "ft4", 10*time.Second, "withdrawn", func(m map[string]birdtest.Route) bool { return len(m) == 0 })
		waitFor(t, 30*time.Second, "rule withdrawn", func() bool { return d.show(id)["state"] == "withdrawn" })
		tot := d.sinceStart()
		if tot.Added != 1 || tot.Updated != 1 || tot.Withdrawn != 1 {
			t.Errorf("since start: added %d, updated %d, withdrawn %d; want 1 each", tot.Added, tot.Updated, tot.Withdrawn)
		}
		expectDrift(t, d, "add, update, withdraw", [5]uint64{})
	})

	conn, err := grpc.Dial(fmt.Sprintf("127.0.0.1:%d", grpcPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gc := gobgpapi.NewGoBgpServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var ids []string
	for i := range 3 {
		ids = append(ids, d.addRule("--ttl", "1h", ruleText(i)))
	}
	all := func(m map[string]birdtest.Route) bool {
		for i := range 3 {
			if r, ok := m[driftFlow(i)]; !ok || r.Attrs["BGP.ext_community"] != discardExt {
				return false
			}
		}
		return len(m) == 3
	}
	bird.WaitRoutes(t, "ft4", 10*time.Second, "three rules", all)

	t.Run("delivery", func(t *testing.T) {
		waitFor(t, 5*time.Second, "rule show lists the peer", func() bool {
			return strings.Contains(d.mustCLI("rule", "show", ids[0]), "1/1 peers: 127.0.0.2")
		})
		if out := d.mustCLI("rule", "list"); strings.Count(out, "announced 1/1") != 3 {
			t.Errorf("rule list:\n%s", out)
		}
		if out := d.mustCLI("diff"); !strings.Contains(out, "nothing to change (3 rules") {
			t.Errorf("diff when converged:\n%s", out)
		}
	})

	t.Run("withdrawn behind our back", func(t *testing.T) {
		defer explainDrift(t, d, gc, bird)
		r0, _ := flowspec.Parse(ruleText(0))
		if _, err := gc.DeletePath(ctx, &gobgpapi.DeletePathRequest{TableType: gobgpapi.TableType_TABLE_TYPE_GLOBAL, Family: apiPath(t, r0, true).Family, Path: apiPath(t, r0, true)}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "re-add logged", func() bool { return d.logCount(`op=readd`) >= 1 })
		bird.WaitRoutes(t, "ft4", 10*time.Second, "rule 0 back", all)
		expectDrift(t, d, "re-added", [5]uint64{1, 0, 0, 0, 0})
	})

	t.Run("foreign path", func(t *testing.T) {
		defer explainDrift(t, d, gc, bird)
		foreign, _ := flowspec.Parse(ruleText(77))
		if _, err := gc.AddPath(ctx, &gobgpapi.AddPathRequest{TableType: gobgpapi.TableType_TABLE_TYPE_GLOBAL, Path: apiPath(t, foreign, false)}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "orphan withdrawal logged", func() bool { return d.logCount(`op=orphan`) >= 1 })
		bird.WaitRoutes(t, "ft4", 10*time.Second, "only our three rules", all)
		expectDrift(t, d, "orphan", [5]uint64{1, 1, 0, 0, 0})
	})

	t.Run("action changed", func(t *testing.T) {
		defer explainDrift(t, d, gc, bird)
		r1, _ := flowspec.Parse(ruleText(1))
		r1.Action = flowspec.RateLimit(125000)
		if _, err := gc.AddPath(ctx, &gobgpapi.AddPathRequest{TableType: gobgpapi.TableType_TABLE_TYPE_GLOBAL, Path: apiPath(t, r1, false)}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "replace logged", func() bool { return d.logCount(`op=replace`) >= 1 })
		bird.WaitRoutes(t, "ft4", 10*time.Second, "discard again", all)
		expectDrift(t, d, "replaced", [5]uint64{1, 1, 1, 0, 0})
	})

	t.Run("peer reset", func(t *testing.T) {
		if _, err := bird.Birdc("restart", "up0"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "session back", func() bool { return bird.Established(0) })
		bird.WaitRoutes(t, "ft4", 10*time.Second, "full table again after the reset", all)
		expectDrift(t, d, "peer reset", [5]uint64{1, 1, 1, 0, 1})
	})

	t.Run("speaker restarted", func(t *testing.T) {
		// Churn enough distinct rules through to pass compact_after = 20:
		// the compactor restarts the embedded speaker.
		var churn []string
		for i := 100; i < 125; i++ {
			churn = append(churn, d.addRule("--ttl", "1h", ruleText(i)))
		}
		bird.WaitRoutes(t, "ft4", 20*time.Second, "churn announced", func(m map[string]birdtest.Route) bool { return len(m) == 28 })
		for _, id := range churn {
			d.mustCLI("rule", "withdraw", id)
		}
		waitFor(t, 30*time.Second, "speaker restart logged", func() bool { return d.logCount(`speaker restarted`) >= 1 })
		waitFor(t, 30*time.Second, "session back", func() bool { return bird.Established(0) })
		bird.WaitRoutes(t, "ft4", 20*time.Second, "everything announced again", all)
		// The new server was loaded with what the old one held before
		// the session came back: nothing had to be announced again.
		if n := d.logCount(`op=reannounce`); n != 0 {
			t.Errorf("%d re-announcements logged after the compaction, want 0", n)
		}
		// The compaction's restart is counted as one; the sessions it
		// brings up again on the new speaker are not peer resets.
		expectDrift(t, d, "speaker restarted", [5]uint64{1, 1, 1, 1, 1})
	})
}

// dry_run: the loop runs and reports but BIRD gets nothing; diff shows
// what a real pass would do.
func TestDryRunEndToEnd(t *testing.T) {
	d, bird := setup(t)
	b, err := os.ReadFile(d.conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.conf, append(b, "\n[reconcile]\ndry_run = true\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	d.stop()
	d.start()
	waitFor(t, 30*time.Second, "BGP session back", func() bool { return bird.Established(0) })
	id := d.addRule(ruleText(5))
	waitFor(t, 5*time.Second, "diff shows the addition", func() bool {
		out := d.mustCLI("diff")
		return strings.Contains(out, "add") && strings.Contains(out, "10.0.0.5/32")
	})
	time.Sleep(2 * time.Second)
	if n, err := bird.Count("ft4"); err != nil || n != 0 {
		t.Fatalf("dry run announced: BIRD has %d routes (%v)", n, err)
	}
	if r := d.show(id); r["announced"] != false {
		t.Errorf("dry run wrote status: %v", r)
	}
}
