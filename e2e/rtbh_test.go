package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// RTBH end to end: "route add PREFIX --blackhole --ttl" puts the prefix in
// BIRD's unicast tables with BLACKHOLE and NO_EXPORT and the site's next
// hop, and the route leaves BIRD when its TTL runs out.
func TestRTBH(t *testing.T) {
	a := startAppliance(t, birdtest.Options{}, "", `[rtbh]
next_hop_ipv4 = "192.0.2.99"
next_hop_ipv6 = "100::99"
`, true)
	out := a.mustCLI("route", "add", "203.0.113.7/32", "--blackhole", "--ttl", "4s", "--reason", "ddos")
	id := strings.TrimSpace(out)
	a.mustCLI("route", "add", "2001:db8::7", "--blackhole", "--ttl", "4s")

	check := func(table, net, nh string) {
		routes := a.bird.WaitRoutes(t, table, 10*time.Second, net+" announced", hasRoute(net))
		r := routes[net]
		t.Logf("BIRD %s: %v", net, r.Attrs)
		if c := r.Attrs["BGP.community"]; !strings.Contains(c, "(65535,666)") || !strings.Contains(c, "(65535,65281)") {
			t.Errorf("%s: communities %q, want BLACKHOLE and NO_EXPORT", net, c)
		}
		if got := r.Attrs["BGP.next_hop"]; !strings.Contains(got, nh) {
			t.Errorf("%s: next hop %q, want %s", net, got, nh)
		}
	}
	check("up4", "203.0.113.7/32", "192.0.2.99")
	check("up6", "2001:db8::7/128", "100::99")

	// The route shows in the rule list and the RIB as a route.
	var rule struct {
		Family, Text, State string
		Announced           bool
	}
	waitFor(t, 5*time.Second, "route announced status", func() bool {
		js := a.mustCLI("rule", "show", id, "--json")
		json.Unmarshal([]byte(js), &rule)
		return rule.Announced
	})
	if rule.Family != "ipv4-unicast" || rule.Text != "route 203.0.113.7/32 then blackhole" {
		t.Errorf("rule show: %+v", rule)
	}
	if rib := a.mustCLI("rib"); !strings.Contains(rib, "ipv4-unicast") || !strings.Contains(rib, "203.0.113.7/32") || !strings.Contains(rib, "blackhole") {
		t.Errorf("rib lacks the route:\n%s", rib)
	}

	a.bird.WaitRoutes(t, "up4", 15*time.Second, "expiry", noRoute("203.0.113.7/32"))
	a.bird.WaitRoutes(t, "up6", 15*time.Second, "expiry", noRoute("2001:db8::7/128"))
	waitFor(t, 5*time.Second, "state expired", func() bool {
		return strings.Contains(a.mustCLI("rule", "show", id), "expired")
	})

	// Shorter than a host route: refused by the default guardrail.
	_, errOut, code := a.cli("route", "add", "203.0.113.0/24", "--blackhole", "--ttl", "1m")
	if code != 1 || !strings.Contains(errOut, "guardrail prefix_length") {
		t.Errorf("route add /24: exit %d, %q", code, errOut)
	}
}
