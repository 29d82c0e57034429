package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// The scope leaks of issue 18, through the built binary and a real BIRD:
// an "rtbh" token cannot send a route with its own communities and next
// hop (BIRD received a plain unicast route), and a "rate-limit" token can
// neither withdraw the operator's blackhole nor turn the operator's
// discard into "rate-limit 1e12" by posting the same match. Each refusal
// is checked at BIRD: a marker rule written after it reaches BIRD, and by
// then BIRD still holds exactly the operator's routes.
func TestScopeLeaksClosed(t *testing.T) {
	birdtest.Binary(t)
	apiPort := birdtest.FreePort(t, "127.0.0.1")
	a := startAppliance(t, birdtest.Options{}, "", fmt.Sprintf(`listen = "127.0.0.1:%d"
[[api.token]]
name = "cust"
role = "write"
token = "cust-secret-0123456789abcdef"
prefixes = ["198.51.100.0/24"]
actions = ["rtbh"]
[[api.token]]
name = "limiter"
role = "write"
token = "limiter-secret-0123456789ab"
actions = ["rate-limit"]
[rtbh]
next_hop_ipv4 = "192.0.2.99"
`, apiPort), true)
	url := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	post := func(secret, path, body string) (int, string) {
		t.Helper()
		return tokenRequest(t, url, secret, "POST", path, body)
	}
	const cust, limiter = "cust-secret-0123456789abcdef", "limiter-secret-0123456789ab"

	a.addRule("--ttl", "10m", "route 203.0.113.44/32 then blackhole")
	a.addRule("--ttl", "10m", "match destination 203.0.113.45/32 then discard")
	a.bird.WaitRoutes(t, "up4", 30*time.Second, "the operator's blackhole", hasRoute("203.0.113.44/32"))
	a.bird.WaitRoutes(t, "ft4", 30*time.Second, "the operator's discard", has("flow4 { dst 203.0.113.45/32; }", discardExt))

	for _, c := range []struct {
		what, secret, path, body, want string
	}{
		{"rtbh token with its own communities and next hop", cust, "/v1/rules",
			`{"text":"route 198.51.100.8/32 then community 64500:100 next-hop 203.0.113.99","ttl":"10m"}`, "may not use action route"},
		{"rate-limit token withdrawing the operator's blackhole", limiter, "/v1/rules/withdraw",
			`{"text":"route 203.0.113.44/32 then blackhole"}`, "uses action rtbh"},
		{"rate-limit token turning the operator's discard into a rate limit", limiter, "/v1/rules",
			`{"text":"match destination 203.0.113.45/32 then rate-limit 1e12","ttl":"10m"}`, "uses action discard"},
	} {
		code, body := post(c.secret, c.path, c.body)
		if code != http.StatusForbidden || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want 403 saying %q", c.what, code, body, c.want)
		}
	}
	// A marker after the refusals: once it is in BIRD, anything the
	// refused writes had sent would be there too.
	if code, body := post(cust, "/v1/rules", `{"text":"route 198.51.100.9/32 then blackhole","ttl":"10m"}`); code != http.StatusCreated {
		t.Fatalf("the rtbh token's plain blackhole: %d %s", code, body)
	}
	up4 := a.bird.WaitRoutes(t, "up4", 30*time.Second, "the marker blackhole", hasRoute("198.51.100.9/32"))
	if r, ok := up4["198.51.100.8/32"]; ok {
		t.Errorf("the refused route reached BIRD: %v", r.Attrs)
	}
	if c := up4["198.51.100.9/32"].Attrs["BGP.community"]; !strings.Contains(c, "(65535,666)") || !strings.Contains(c, "(65535,65281)") {
		t.Errorf("the rtbh token's route: communities %q, want BLACKHOLE and NO_EXPORT", c)
	}
	if _, ok := up4["203.0.113.44/32"]; !ok {
		t.Error("the operator's blackhole left BIRD")
	}
	ft4 := a.bird.WaitRoutes(t, "ft4", 30*time.Second, "flowspec table", func(map[string]birdtest.Route) bool { return true })
	if !has("flow4 { dst 203.0.113.45/32; }", discardExt)(ft4) {
		t.Errorf("the operator's discard changed at BIRD: %v", ft4["flow4 { dst 203.0.113.45/32; }"].Attrs)
	}
	// BIRD's own counters: exactly the accepted updates, no flap.
	updates, withdraws := 0, 0
	for _, ch := range []string{"ipv4", "flow4"} {
		u, w, err := a.bird.ImportStats(0, ch)
		if err != nil {
			t.Fatal(err)
		}
		updates, withdraws = updates+u, withdraws+w
	}
	if updates != 3 || withdraws != 0 {
		t.Errorf("BIRD received %d updates and %d withdrawals, want 3 and 0 (the operator's two, the marker)", updates, withdraws)
	}
}
