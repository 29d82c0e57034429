package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// A reload that adds a guardrail withdraws the active rules that now break
// it, with the reason in the rule and its history, leaves the others
// announced, keeps the BGP session up, and applies a new RTBH next hop
// (attribute drift the reconciler repairs).
func TestGuardrailReload(t *testing.T) {
	base := "[rtbh]\nnext_hop_ipv4 = \"192.0.2.1\"\n"
	a := startAppliance(t, birdtest.Options{}, "", base, true)
	bh := strings.TrimSpace(a.mustCLI("route", "add", "203.0.113.7/32", "--blackhole", "--ttl", "1h", "--reason", "ticket 42"))
	fs := a.addRule("--ttl", "1h", "match destination 198.51.100.0/24 protocol udp then discard")
	a.bird.WaitRoutes(t, "up4", 10*time.Second, "blackhole announced", hasRoute("203.0.113.7/32"))
	a.bird.WaitRoutes(t, "ft4", 10*time.Second, "flowspec announced", func(m map[string]birdtest.Route) bool { return len(m) == 1 })
	// A reset session shows a later "since": the reconnection takes a
	// second or more (birdtest.SameSince).
	before, err := a.bird.Since(0)
	if err != nil {
		t.Fatal(err)
	}

	a.reload(`[rtbh]
next_hop_ipv4 = "192.0.2.2"
[guardrails]
safelist = ["203.0.113.0/24"]
`)
	a.bird.WaitRoutes(t, "up4", 10*time.Second, "blackhole withdrawn by the guardrail", noRoute("203.0.113.7/32"))
	var r struct {
		State, Reason, Actor string
	}
	waitFor(t, 10*time.Second, "rule withdrawn", func() bool {
		json.Unmarshal([]byte(a.mustCLI("rule", "show", bh, "--json")), &r)
		return r.State == "withdrawn"
	})
	if !strings.Contains(r.Reason, "ticket 42") || !strings.Contains(r.Reason, "withdrawn by guardrail safelist") || r.Actor != "guardrail" {
		t.Errorf("withdrawn rule: %+v", r)
	}
	if h := a.mustCLI("rule", "history", bh); !strings.Contains(h, "guardrail") || !strings.Contains(h, "withdraw-requested") {
		t.Errorf("history:\n%s", h)
	}
	if !strings.Contains(a.mustCLI("rule", "show", fs), "active") {
		t.Error("the FlowSpec rule outside the safelist was touched")
	}
	if got, err := a.bird.Since(0); err != nil || !birdtest.SameSince(before, got) {
		t.Errorf("the reload restarted the unchanged session:\n before %s\n after  %s (%v)", before, got, err)
	}

	// The new guardrail refuses new rules too, and the new next hop is used.
	_, errOut, code := a.cli("route", "add", "203.0.113.9/32", "--blackhole", "--ttl", "1m")
	if code != 1 || !strings.Contains(errOut, "guardrail safelist") {
		t.Errorf("route add into the safelist: exit %d %q", code, errOut)
	}
	a.mustCLI("route", "add", "198.51.100.77/32", "--blackhole", "--ttl", "1h")
	routes := a.bird.WaitRoutes(t, "up4", 10*time.Second, "new blackhole", hasRoute("198.51.100.77/32"))
	if nh := routes["198.51.100.77/32"].Attrs["BGP.next_hop"]; nh != "192.0.2.2" {
		t.Errorf("next hop after reload = %q, want 192.0.2.2", nh)
	}

	// Changing the next hop again moves the announced route (drift repair).
	a.reload(`[rtbh]
next_hop_ipv4 = "192.0.2.3"
[guardrails]
safelist = ["203.0.113.0/24"]
`)
	a.bird.WaitRoutes(t, "up4", 10*time.Second, "next hop 192.0.2.3", func(m map[string]birdtest.Route) bool {
		return m["198.51.100.77/32"].Attrs["BGP.next_hop"] == "192.0.2.3"
	})

	// A broken file changes nothing and the daemon keeps running.
	a.reload("[guardrails]\nsafelist = [\"nonsense\"]\n")
	waitFor(t, 30*time.Second, "the log line of the refused reload", func() bool {
		return strings.Contains(a.logTail(200), "reload refused")
	})
	if _, _, code := a.cli("rule", "list"); code != 0 {
		t.Fatal("daemon gone after a bad reload")
	}
}
