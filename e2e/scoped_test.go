package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// A scoped API token ([[api.token]] with prefixes, actions and
// max_active_rules) adds a rule inside its prefix that reaches BIRD, and
// is refused, with a 403 naming its prefix, for a rule outside it and
// for an action it may not use; it lists only its own scope's rules.
func TestScopedTokenReachesBIRD(t *testing.T) {
	birdtest.Binary(t)
	apiPort := birdtest.FreePort(t, "127.0.0.1")
	tokFile := filepath.Join(t.TempDir(), "cust.token")
	if err := os.WriteFile(tokFile, []byte("cust-secret-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startAppliance(t, birdtest.Options{}, "", fmt.Sprintf(`listen = "127.0.0.1:%d"
[[api.token]]
name = "cust"
role = "write"
token_file = %q
prefixes = ["198.51.100.0/24"]
actions = ["discard", "rtbh"]
max_active_rules = 2
`, apiPort, tokFile), true)
	url := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	tcpCLI := func(args ...string) (string, string, int) {
		cmd := exec.Command(binary, append(append([]string{args[0]}, "--url", url, "--token-file", tokFile), args[1:]...)...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("run ribkeeper: %v", err)
		}
		return o.String(), e.String(), code
	}

	// In scope: stored with the token's name as actor and announced.
	out, errOut, code := tcpCLI("rule", "add", "--ttl", "10m", "match destination 198.51.100.7/32 protocol udp then discard")
	if code != 0 {
		t.Fatalf("in-scope rule add: exit %d: %s%s", code, errOut, out)
	}
	id := strings.TrimSpace(out)
	a.bird.WaitRoutes(t, "ft4", 10*time.Second, "the scoped token's rule in BIRD",
		has("flow4 { dst 198.51.100.7/32; proto 17; }", discardExt))
	if r := a.show(id); r["actor"] != "cust" {
		t.Errorf("actor of the scoped token's rule = %v, want cust", r["actor"])
	}

	// Out of scope, or an action it may not use: refused, nothing stored.
	for _, c := range []struct{ text, want string }{
		{"match destination 203.0.113.7/32 then discard", "outside them"},
		{"match destination 198.51.0.0/16 then discard", "destination 198.51.0.0/16, outside them"},
		{"match destination 198.51.100.8/32 then rate-limit 1000", "may not use action rate-limit"},
	} {
		_, errOut, code := tcpCLI("rule", "add", "--ttl", "10m", c.text)
		if code != 1 || !strings.Contains(errOut, "198.51.100.0/24") && !strings.Contains(errOut, "discard, rtbh") || !strings.Contains(errOut, c.want) {
			t.Errorf("rule add %q: exit %d, %q; want exit 1 naming the prefix or the actions and %q", c.text, code, errOut, c.want)
		}
	}
	// The local operator adds a rule elsewhere: the token does not see it.
	opID := a.addRule("--ttl", "10m", "match destination 203.0.113.9/32 then discard")
	a.bird.WaitRoutes(t, "ft4", 10*time.Second, "the operator's rule in BIRD", func(m map[string]birdtest.Route) bool { return len(m) == 2 })
	all := a.mustCLI("rule", "list", "--state", "active")
	if strings.Contains(all, "203.0.113.7") || strings.Contains(all, "198.51.0.0") || strings.Contains(all, "198.51.100.8") {
		t.Errorf("a refused rule was stored:\n%s", all)
	}
	out, errOut, code = tcpCLI("rule", "list")
	if code != 0 || !strings.Contains(out, "198.51.100.7/32") || strings.Contains(out, "203.0.113.9") {
		t.Errorf("the scoped token's rule list: exit %d %s\n%s", code, errOut, out)
	}
	// The operator's rule is, for the scoped token, a rule that does not
	// exist; its own is withdrawn.
	_, errOut, code = tcpCLI("rule", "withdraw", opID)
	if code != 1 || errOut != "ribkeeper rule withdraw: no rule with id "+opID+"\n" {
		t.Errorf("withdraw another scope's rule: exit %d %q", code, errOut)
	}
	if _, errOut, code := tcpCLI("rule", "withdraw", id); code != 0 {
		t.Fatalf("withdraw its own rule: exit %d %q", code, errOut)
	}
	a.bird.WaitRoutes(t, "ft4", 10*time.Second, "the scoped token's rule withdrawn",
		func(m map[string]birdtest.Route) bool {
			_, ok := m["flow4 { dst 198.51.100.7/32; proto 17; }"]
			return !ok && len(m) == 1
		})
}
