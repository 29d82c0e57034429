package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// rib shows, for each path, the rule that asks for it, how long ago it
// was announced and which peers hold it; route withdraw refuses the id of
// a FlowSpec rule and leaves it announced.
func TestRIBShowsRuleAgeAndPeers(t *testing.T) {
	start := time.Now().Add(-time.Second)
	d, bird := setup(t)
	id := d.addRule("--ttl", "1h", ruleText(7))
	bird.WaitRoutes(t, "ft4", 10*time.Second, "rule in BIRD", func(m map[string]birdtest.Route) bool { _, ok := m[driftFlow(7)]; return ok })

	var pl api.PathList
	waitFor(t, 30*time.Second, "rib shows the rule held by BIRD", func() bool {
		pl = api.PathList{}
		if err := json.Unmarshal([]byte(d.mustCLI("rib", "--json")), &pl); err != nil {
			t.Fatal(err)
		}
		return len(pl.Paths) == 1 && len(pl.Paths[0].Peers) == 1
	})
	p := pl.Paths[0]
	if want := id; p.RuleID == 0 || strings.TrimSpace(want) != jsonInt(p.RuleID) {
		t.Errorf("rib path of rule %s says rule %d", id, p.RuleID)
	}
	if p.Since == nil || p.Since.Before(start) {
		t.Errorf("rib path announced at %v, before the test started (%v)", p.Since, start)
	}
	if p.AnnouncedTo != "1/1" || p.Peers[0] != "127.0.0.2" {
		t.Errorf("rib path held by %q %v, want 1/1 127.0.0.2", p.AnnouncedTo, p.Peers)
	}
	out := d.mustCLI("rib")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "RULE") || !strings.HasPrefix(lines[1], id+" ") ||
		!strings.Contains(lines[1], "1/1 127.0.0.2") || !strings.Contains(lines[0], "AGE") {
		t.Errorf("rib:\n%s", out)
	}
	if f := strings.Fields(lines[1]); len(f) < 3 || !strings.HasSuffix(f[2], "s") && !strings.HasSuffix(f[2], "m") {
		t.Errorf("rib age column reads %q, want seconds or minutes:\n%s", f, out)
	}

	// route withdraw of a FlowSpec rule's id: refused, nothing withdrawn.
	stdout, stderr, code := d.cli("route", "withdraw", id)
	if code == 0 || !strings.Contains(stderr, "not a route") || !strings.Contains(stderr, "ribkeeper rule withdraw "+id) {
		t.Errorf("route withdraw %s: exit %d, %q %q", id, code, stdout, stderr)
	}
	if st := d.show(id)["state"]; st != "active" {
		t.Errorf("after a refused route withdraw the rule is %v", st)
	}
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
