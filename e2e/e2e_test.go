// Package e2e runs the built ribkeeper binary against a real BIRD 2 over
// loopback and checks, through birdc, what the router actually received.
package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

const (
	dnsRule    = "match destination 203.0.113.7/32 protocol udp source-port ==53 then discard"
	dnsFlow    = "flow4 { dst 203.0.113.7/32; proto 17; sport 53; }"
	discardExt = "(generic, 0x80060000, 0x0)"
	// 125000 bytes/s as an IEEE-754 float32 is 0x47f42400.
	rate125kExt = "(generic, 0x80060000, 0x47f42400)"
)

func has(net, ext string) func(map[string]birdtest.Route) bool {
	return func(m map[string]birdtest.Route) bool {
		r, ok := m[net]
		return ok && r.Attrs["BGP.ext_community"] == ext
	}
}

func lacks(net string) func(map[string]birdtest.Route) bool {
	return func(m map[string]birdtest.Route) bool { _, ok := m[net]; return !ok }
}

// A rule added with the CLI reaches BIRD with the right components and
// action; the same match added again updates it in place; withdraw
// removes it, and the row becomes withdrawn once the path is gone.
func TestAddUpdateWithdraw(t *testing.T) {
	d, bird := setup(t)

	id := d.addRule("--reason", "e2e dns amplification", dnsRule)
	bird.WaitRoutes(t, "ft4", 5*time.Second, "discard rule", has(dnsFlow, discardExt))

	id2 := d.addRule(strings.Replace(dnsRule, "discard", "rate-limit 125000", 1))
	if id2 != id {
		t.Fatalf("same match added twice created rule %s beside %s; want an update", id2, id)
	}
	routes := bird.WaitRoutes(t, "ft4", 5*time.Second, "rate-limit replaces discard", has(dnsFlow, rate125kExt))
	if len(routes) != 1 {
		t.Fatalf("BIRD holds %d flow4 routes, want 1: %v", len(routes), routes)
	}

	v6 := d.addRule("match destination 2001:db8::1/128 protocol udp destination-port ==53 then discard")
	bird.WaitRoutes(t, "ft6", 5*time.Second, "IPv6 rule", has("flow6 { dst 2001:db8::1/128; next header 17; dport 53; }", discardExt))

	d.mustCLI("rule", "withdraw", id)
	bird.WaitRoutes(t, "ft4", 5*time.Second, "withdrawn rule gone", lacks(dnsFlow))
	waitFor(t, 5*time.Second, "rule state withdrawn", func() bool { return d.show(id)["state"] == "withdrawn" })
	if d.show(v6)["state"] != "active" {
		t.Errorf("IPv6 rule changed state: %v", d.show(v6))
	}

	list := d.mustCLI("rule", "list")
	if !strings.Contains(list, "2001:db8::1/128") {
		t.Errorf("rule list lacks the IPv6 rule:\n%s", list)
	}
	rib := d.mustCLI("rib")
	if !strings.Contains(rib, "2001:db8::1/128") || strings.Contains(rib, "203.0.113.7/32") {
		t.Errorf("rib does not match what is announced:\n%s", rib)
	}
}

// Bad rule text gets a one-line error naming the offending word and
// stores nothing.
func TestBadRuleText(t *testing.T) {
	d, _ := setup(t)
	before := d.mustCLI("rule", "list", "--json")
	_, errOut, code := d.cli("rule", "add", "match destination 203.0.113.7/32 protocl udp then discard")
	if code != 1 {
		t.Fatalf("exit code %d, want 1 (stderr %q)", code, errOut)
	}
	if !strings.Contains(errOut, "protocl") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Errorf("error should be one line naming the word: %q", errOut)
	}
	if after := d.mustCLI("rule", "list", "--json"); after != before {
		t.Errorf("a rejected rule changed the store:\nbefore %s\nafter  %s", before, after)
	}
}

// A rule with a 3 s TTL leaves BIRD within 1 s of its expiry.
func TestExpiry(t *testing.T) {
	d, bird := setup(t)
	id := d.addRule("--ttl", "3s", dnsRule)
	bird.WaitRoutes(t, "ft4", 5*time.Second, "rule with TTL announced", has(dnsFlow, discardExt))
	exp, err := time.Parse(time.RFC3339Nano, d.show(id)["expires_at"].(string))
	if err != nil {
		t.Fatalf("expires_at: %v", err)
	}
	bird.WaitRoutes(t, "ft4", time.Until(exp)+5*time.Second, "expired rule gone", lacks(dnsFlow))
	late := time.Since(exp)
	t.Logf("rule left BIRD %v after expires_at (includes birdc polling)", late)
	if late > time.Second {
		t.Errorf("expired rule left BIRD %v after its expiry; want within 1s", late)
	}
	waitFor(t, 5*time.Second, "rule state expired", func() bool { return d.show(id)["state"] == "expired" })
}

// After kill -9 and a restart the active rules are back in BIRD, and a rule
// whose TTL passed while the process was down is never announced.
func TestCrashRestart(t *testing.T) {
	d, bird := setup(t)
	keep := d.addRule(dnsRule)
	short := d.addRule("--ttl", "2s", "match destination 198.51.100.9/32 protocol tcp destination-port ==443 then discard")
	shortFlow := "flow4 { dst 198.51.100.9/32; proto 6; dport 443; }"
	bird.WaitRoutes(t, "ft4", 5*time.Second, "both rules announced", func(m map[string]birdtest.Route) bool {
		return has(dnsFlow, discardExt)(m) && has(shortFlow, discardExt)(m)
	})
	exp, err := time.Parse(time.RFC3339Nano, d.show(short)["expires_at"].(string))
	if err != nil {
		t.Fatal(err)
	}

	d.kill()
	bird.WaitRoutes(t, "ft4", 10*time.Second, "routes flushed after the session dropped", func(m map[string]birdtest.Route) bool { return len(m) == 0 })
	time.Sleep(time.Until(exp) + 500*time.Millisecond)

	d.start()
	waitFor(t, 20*time.Second, "session re-established", func() bool { return bird.Established(0) })
	bird.WaitRoutes(t, "ft4", 10*time.Second, "active rule back", has(dnsFlow, discardExt))
	// Watch a while longer: the expired rule must never show up.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		routes, err := bird.Routes("ft4")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := routes[shortFlow]; ok {
			t.Fatalf("rule that expired while ribkeeper was down was announced after restart")
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitFor(t, 5*time.Second, "expired rule's state", func() bool { return d.show(short)["state"] == "expired" })
	if st := d.show(keep)["state"]; st != "active" {
		t.Errorf("kept rule state %v", st)
	}
}
