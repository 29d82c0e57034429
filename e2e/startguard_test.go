package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// A guardrail added while the daemon was down applies before anything is
// announced after the start, although the start reads the rules once for
// the guardrails' check and the reconciler's first pass: the route that
// breaks it never reaches the router, the others do, and the rule says
// why it went.
func TestGuardrailAtStart(t *testing.T) {
	base := "[rtbh]\nnext_hop_ipv4 = \"192.0.2.1\"\n"
	a := startAppliance(t, birdtest.Options{}, "", base, true)
	bad := strings.TrimSpace(a.mustCLI("route", "add", "203.0.113.7/32", "--blackhole", "--ttl", "1h"))
	a.mustCLI("route", "add", "198.51.100.9/32", "--blackhole", "--ttl", "1h")
	a.bird.WaitRoutes(t, "up4", 30*time.Second, "both routes announced", func(m map[string]birdtest.Route) bool {
		return hasRoute("203.0.113.7/32")(m) && hasRoute("198.51.100.9/32")(m)
	})
	a.kill()
	a.bird.WaitRoutes(t, "up4", 60*time.Second, "BIRD flushed the routes of the lost session", func(m map[string]birdtest.Route) bool {
		return len(m) == 0
	})

	a.extra = base + "[guardrails]\nsafelist = [\"203.0.113.0/24\"]\n"
	a.write()
	a.start()
	got := a.bird.WaitRoutes(t, "up4", 60*time.Second, "the route that breaks no guardrail announced after the start", hasRoute("198.51.100.9/32"))
	if hasRoute("203.0.113.7/32")(got) {
		t.Fatalf("the route that breaks the new safelist was announced after the start: %v", got)
	}
	var r struct{ State, Reason, Actor string }
	if err := json.Unmarshal([]byte(a.mustCLI("rule", "show", bad, "--json")), &r); err != nil {
		t.Fatal(err)
	}
	if r.Actor != "guardrail" || !strings.Contains(r.Reason, "safelist") {
		t.Errorf("rule %s after the start: %+v, want withdrawn by the guardrail with the safelist in its reason", bad, r)
	}
	if got, _ := a.bird.Routes("up4"); hasRoute("203.0.113.7/32")(got) {
		t.Errorf("the route that breaks the new safelist is in BIRD: %v", got)
	}
}
