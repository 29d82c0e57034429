package e2e

import (
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// Static rules ([[rule]]) appear in BIRD, survive a reload, change with
// the file on SIGHUP, cannot be withdrawn through the API, and
// check-config refuses one that breaks a guardrail.
func TestStaticRules(t *testing.T) {
	const (
		ruleA = "[[rule]]\ntext = \"match destination 198.51.100.10/32 protocol udp then discard\"\nreason = \"infrastructure\"\n"
		ruleB = "[[rule]]\ntext = \"match destination 198.51.100.20/32 protocol tcp then discard\"\n"
		flowA = "flow4 { dst 198.51.100.10/32; proto 17; }"
		flowB = "flow4 { dst 198.51.100.20/32; proto 6; }"
	)
	a := startAppliance(t, birdtest.Options{}, "", ruleA, true)
	a.bird.WaitRoutes(t, "ft4", 10*time.Second, "static rule A announced", has(flowA, discardExt))

	var list struct {
		Rules []struct {
			ID            int64
			Actor, Origin string
			State, Reason string
			ExpiresAt     *time.Time `json:"expires_at"`
		}
	}
	if err := json.Unmarshal([]byte(a.mustCLI("rule", "list", "--json")), &list); err != nil || len(list.Rules) != 1 {
		t.Fatalf("rule list: %v %+v", err, list)
	}
	ra := list.Rules[0]
	if ra.Actor != "config" || ra.Origin != "config:op" || ra.ExpiresAt != nil || ra.Reason != "infrastructure" {
		t.Errorf("static rule %+v: want actor config, origin config:op, no expiry", ra)
	}
	id := func(n int64) string { return strconv.FormatInt(n, 10) }
	_, errOut, code := a.cli("rule", "withdraw", id(ra.ID))
	if code != 1 || !strings.Contains(errOut, "comes from the configuration") {
		t.Errorf("rule withdraw of a static rule: exit %d, %q", code, errOut)
	}

	// A reload adding B keeps A (same rule, same id) and announces B.
	a.reload(ruleA + ruleB)
	a.bird.WaitRoutes(t, "ft4", 10*time.Second, "static rule B announced after the reload", func(m map[string]birdtest.Route) bool {
		return has(flowA, discardExt)(m) && has(flowB, discardExt)(m)
	})
	json.Unmarshal([]byte(a.mustCLI("rule", "list", "--json", "--state", "active")), &list)
	if len(list.Rules) != 2 {
		t.Fatalf("after the reload: %+v", list.Rules)
	}
	for _, r := range list.Rules {
		if strings.Contains(a.mustCLI("rule", "show", id(r.ID)), "198.51.100.10/32") && r.ID != ra.ID {
			t.Errorf("static rule A got a new id %d (was %d)", r.ID, ra.ID)
		}
	}
	// A reload without A withdraws it, by actor config.
	a.reload(ruleB)
	a.bird.WaitRoutes(t, "ft4", 10*time.Second, "static rule A withdrawn", func(m map[string]birdtest.Route) bool {
		_, okA := m[flowA]
		return !okA && has(flowB, discardExt)(m)
	})
	if h := a.mustCLI("rule", "history", id(ra.ID)); !strings.Contains(h, "withdraw-requested") || !strings.Contains(h, "config") {
		t.Errorf("history of the undeclared rule:\n%s", h)
	}

	// check-config refuses a static rule inside the safelist.
	bad := a.conf + ".bad"
	a.extra = ruleB + "[guardrails]\nsafelist = [\"198.51.100.0/24\"]\n"
	conf := a.conf
	a.conf = bad
	a.write()
	a.conf = conf
	out, err := exec.Command(binary, "check-config", "--config", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "rule[1].text") || !strings.Contains(string(out), "safelist") {
		t.Errorf("check-config with a static rule in the safelist: %v\n%s", err, out)
	}
}
