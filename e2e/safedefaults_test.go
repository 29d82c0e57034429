package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// With the shipped guardrails (no [guardrails] section), the rules that
// would cut the network or the appliance's own sessions are refused,
// naming the guardrail, and not one UPDATE for them reaches BIRD; a rule
// without a TTL gets the default one; dry runs name the guardrail and
// warn.
func TestSafeDefaults(t *testing.T) {
	a := startApplianceAs(t, &appliance{routerID: "10.255.255.1",
		families: `"ipv4-flowspec", "ipv6-flowspec", "ipv4-unicast", "ipv6-unicast"`}, birdtest.Options{}, true)

	for _, c := range []struct {
		args      []string
		guardrail string
	}{
		{[]string{"rule", "add", "--ttl", "10m", "match destination 0.0.0.0/0 then discard"}, "protected_address"}, // it covers 127.0.0.1
		{[]string{"rule", "add", "--ttl", "10m", "match destination ::/0 then discard"}, "prefix_length"},
		{[]string{"rule", "add", "--ttl", "10m", "match protocol udp then discard"}, "destination_required"},
		{[]string{"rule", "add", "--ttl", "10m", "match destination-port ==179 protocol tcp then discard"}, "bgp_session"},
		{[]string{"route", "add", "127.0.0.2/32", "--blackhole", "--ttl", "10m"}, "protected_address"},    // the router's peering address
		{[]string{"route", "add", "10.255.255.1/32", "--blackhole", "--ttl", "10m"}, "protected_address"}, // the appliance's router id
		{[]string{"rule", "add", "--ttl", "never", "match destination 198.51.100.8/32 then discard"}, "never_expire"},
	} {
		out, errOut, code := a.cli(c.args...)
		if code != 1 || !strings.Contains(errOut, "violates guardrail "+c.guardrail) {
			t.Errorf("%s: exit %d, %q %q; want exit 1 naming guardrail %s", strings.Join(c.args, " "), code, out, errOut, c.guardrail)
		}
	}
	if _, errOut, _ := a.cli("route", "add", "10.255.255.1/32", "--blackhole", "--ttl", "10m"); !strings.Contains(errOut, "own address 10.255.255.1") {
		t.Errorf("the router id's refusal does not say what it protects: %q", errOut)
	}

	// Dry runs say which guardrail would refuse, and warn.
	out, errOut, code := a.cli("rule", "add", "--dry-run", "match destination 0.0.0.0/0 then discard")
	if code != 1 || !strings.Contains(errOut, "refused by guardrail protected_address") || strings.Contains(errOut, "valid") {
		t.Errorf("dry run of 0.0.0.0/0: exit %d, %q %q", code, out, errOut)
	}
	_, errOut, code = a.cli("rule", "validate", "--ttl", "72h", "match destination 198.51.100.0/24 then discard")
	if code != 0 || !strings.Contains(errOut, "warning: the rule lives 72h0m0s, longer than a day") {
		t.Errorf("validate of a 72h rule: exit %d, %q", code, errOut)
	}
	_, errOut, code = a.cli("rule", "add", "--dry-run", "match destination 198.51.100.7/32 protocol udp then discard")
	if code != 0 || !strings.Contains(errOut, ", the default TTL)") {
		t.Errorf("dry run without a ttl: exit %d, %q", code, errOut)
	}

	// A rule without a TTL gets the default hour.
	before := time.Now()
	id := a.addRule("match destination 198.51.100.7/32 protocol udp then discard")
	s, _ := a.show(id)["expires_at"].(string)
	if exp, err := time.Parse(time.RFC3339Nano, s); err != nil {
		t.Errorf("rule without a ttl: expires_at %q (%v), want an hour from now", s, err)
	} else if exp.Before(before.Add(time.Hour-time.Second)) || exp.After(time.Now().Add(time.Hour)) {
		t.Errorf("rule without a ttl expires at %v, want an hour after %v", exp, before)
	}

	// One allowed rule per family after the refusals: once each is in
	// BIRD, BIRD has received nothing else, not even an announcement
	// withdrawn again.
	a.addRule("--ttl", "10m", "match destination 2001:db8::7/128 then discard")
	a.mustCLI("route", "add", "203.0.113.7/32", "--blackhole", "--ttl", "10m")
	a.mustCLI("route", "add", "2001:db8::8/128", "--blackhole", "--ttl", "10m")
	one := func(m map[string]birdtest.Route) bool { return len(m) == 1 }
	for _, table := range []string{"ft4", "ft6", "up4", "up6"} {
		a.bird.WaitRoutes(t, table, 30*time.Second, "the allowed rule in "+table, one)
	}
	for _, ch := range []string{"flow4", "flow6", "ipv4", "ipv6"} {
		up, down, err := a.bird.ImportStats(0, ch)
		if err != nil {
			t.Fatal(err)
		}
		if up != 1 || down != 0 {
			t.Errorf("BIRD received %d updates and %d withdrawals on %s, want the one allowed rule", up, down, ch)
		}
	}
	var list struct{ Rules []json.RawMessage }
	if err := json.Unmarshal([]byte(a.mustCLI("rule", "list", "--json")), &list); err != nil || len(list.Rules) != 4 {
		t.Errorf("stored %d rules (%v), want the 4 allowed", len(list.Rules), err)
	}
}
