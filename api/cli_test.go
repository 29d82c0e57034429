package api_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/cli"

	"github.com/ribkeeper/ribkeeper/bgp"
)

// runCLI runs RunCLI against sock and returns the exit code and outputs.
func runCLI(t *testing.T, sock string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Run(context.Background(), sock, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestCLIRuleLifecycle(t *testing.T) {
	ts := startServer(t)

	code, out, errOut := runCLI(t, ts.sock, "rule", "add", "--ttl", "10m", "--reason", "ticket 42", ruleDiscard)
	if code != 0 {
		t.Fatalf("rule add: exit %d, stderr %q", code, errOut)
	}
	id, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil || !strings.HasPrefix(errOut, "created rule ") {
		t.Fatalf("rule add: stdout %q (want the id only), stderr %q", out, errOut)
	}

	// Flags after the text, and unquoted text, reach the same rule; the
	// expiry not given is kept.
	code, out, errOut = runCLI(t, ts.sock, "rule", "add", strings.Fields(ruleLimit)[0], strings.Join(strings.Fields(ruleLimit)[1:], " "), "--reason", "raised")
	if code != 0 || strings.TrimSpace(out) != strconv.FormatInt(id, 10) || !strings.HasPrefix(errOut, "updated rule ") {
		t.Fatalf("rule add (update): exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	code, out, errOut = runCLI(t, ts.sock, "rule", "list")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("rule list: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	header := strings.Fields(lines[0])
	if strings.Join(header, " ") != "ID STATE FAMILY RULE EXPIRES ANNOUNCED REASON" {
		t.Errorf("rule list header %q", lines[0])
	}
	if !strings.HasPrefix(lines[1], strconv.FormatInt(id, 10)+" ") || !strings.Contains(lines[1], "active") ||
		!strings.HasSuffix(lines[1], "raised") || !strings.Contains(lines[1], mustParse(t, ruleLimit).String()) {
		t.Errorf("rule list row %q", lines[1])
	}
	// Columns are aligned: each header starts where its value does.
	if strings.Index(lines[0], "STATE") != strings.Index(lines[1], "active") {
		t.Errorf("columns not aligned:\n%s", out)
	}

	code, out, _ = runCLI(t, ts.sock, "rule", "list", "--json", "--state", "active")
	if code != 0 || len(decode[api.RuleList](t, []byte(out)).Rules) != 1 {
		t.Errorf("rule list --json: exit %d, %q", code, out)
	}

	code, out, _ = runCLI(t, ts.sock, "rule", "show", strconv.FormatInt(id, 10))
	if code != 0 || !strings.Contains(out, "reason:") || !strings.Contains(out, "raised") || strings.Contains(out, "expires:     never") {
		t.Errorf("rule show: exit %d, %q", code, out)
	}
	code, out, _ = runCLI(t, ts.sock, "rule", "show", strconv.FormatInt(id, 10), "--json")
	if code != 0 || decode[api.Rule](t, []byte(out)).ID != id {
		t.Errorf("rule show --json: exit %d, %q", code, out)
	}

	code, out, errOut = runCLI(t, ts.sock, "rule", "withdraw", strconv.FormatInt(id, 10))
	if code != 0 || !strings.Contains(out, api.StateWithdrawing) {
		t.Errorf("rule withdraw: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestCLIServerErrors(t *testing.T) {
	ts := startServer(t)
	code, out, errOut := runCLI(t, ts.sock, "rule", "add", "match destinaton 203.0.113.7/32 then discard")
	if code != 1 || out != "" {
		t.Errorf("bad text: exit %d, stdout %q; want 1 and nothing", code, out)
	}
	if !strings.HasPrefix(errOut, `ribkeeper rule add: rule text: "destinaton" (column 7): `) || strings.Count(errOut, "\n") != 1 {
		t.Errorf("bad text: stderr %q, want one line pointing at the word", errOut)
	}

	code, _, errOut = runCLI(t, ts.sock, "rule", "show", "12345")
	if code != 1 || !strings.HasPrefix(errOut, "ribkeeper rule show: no rule with id 12345") {
		t.Errorf("unknown id: exit %d, stderr %q", code, errOut)
	}
}

// A usage mistake is one line naming the command and the offending word,
// pointing to the command's --help; nothing on stdout; exit 2.
func TestCLIUsage(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, tc := range []struct {
		args      []string
		cmd, word string
	}{
		{[]string{}, "ribkeeper", "missing command"},
		{[]string{"frobnicate"}, "ribkeeper", `"frobnicate"`},
		{[]string{"rule"}, "ribkeeper rule", "missing subcommand"},
		{[]string{"rule", "ad"}, "ribkeeper rule", `"ad"`},
		{[]string{"rule", "add"}, "ribkeeper rule add", "missing the rule text"},
		{[]string{"rule", "add", "--ttl", "-1m", ruleDiscard}, "ribkeeper rule add", `"-1m"`},
		{[]string{"rule", "add", "--bogus", ruleDiscard}, "ribkeeper rule add", "--bogus"},
		{[]string{"rule", "add", ruleDiscard, "--ttl"}, "ribkeeper rule add", "--ttl needs a value"},
		{[]string{"route", "add", "--ttl", "5x", "--blackhole", "203.0.113.7/32"}, "ribkeeper route add", `"5x"`},
		{[]string{"route", "add", "--blackhole", "203.0.113.7/33"}, "ribkeeper route add", `"203.0.113.7/33"`},
		{[]string{"route", "withdraw", "x"}, "ribkeeper route withdraw", `"x"`},
		{[]string{"rule", "list", "--order", "age"}, "ribkeeper rule list", `"age"`},
		{[]string{"rule", "show"}, "ribkeeper rule show", "exactly one rule ID"},
		{[]string{"rule", "show", "x"}, "ribkeeper rule show", `"x"`},
		{[]string{"rule", "withdraw", "1", "2"}, "ribkeeper rule withdraw", "got 2"},
		{[]string{"rib", "extra"}, "ribkeeper rib", `"extra"`},
		{[]string{"status", "--jsn"}, "ribkeeper status", "--jsn"},
	} {
		code, out, errOut := runCLI(t, sock, tc.args...)
		help := "(see '" + tc.cmd + " --help')\n"
		if code != 2 || out != "" || !strings.HasPrefix(errOut, tc.cmd+": ") || !strings.Contains(errOut, tc.word) ||
			!strings.HasSuffix(errOut, help) || strings.Count(errOut, "\n") != 1 || strings.Contains(errOut, "ribkeeper: ribkeeper") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and one line %q...%q...%q", tc.args, code, out, errOut, tc.cmd+": ", tc.word, help)
		}
	}
}

func TestCLIRIB(t *testing.T) {
	ts := startServer(t)
	ts.rib.announce(mustParse(t, ruleDiscard))
	code, out, errOut := runCLI(t, ts.sock, "rib")
	if code != 0 || !strings.HasPrefix(out, "RULE  FAMILY") || !strings.Contains(out, "ipv4-flowspec") {
		t.Errorf("rib: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, ts.sock, "rib", "--json")
	if code != 0 || len(decode[api.PathList](t, []byte(out)).Paths) != 1 {
		t.Errorf("rib --json: exit %d, %q", code, out)
	}
}

// `peers` says why a session is down and what to check, escaped.
func TestCLIPeersExplainsDown(t *testing.T) {
	ts := startServer(t)
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	ts.rib.setPeers([]bgp.PeerStatus{
		{Address: "192.0.2.1", ASN: 64512, State: "established", Uptime: 90 * time.Second, Families: []string{"ipv4-flowspec"}},
		{Address: "192.0.2.2", ASN: 64513, State: "active", Since: at, Flaps: 2, Families: []string{"ipv4-flowspec"},
			LastError: "notification-received cease/administrative shutdown\x1b[2J", LastErrorAt: at},
		{Address: "192.0.2.3", ASN: 64514, State: "active", Families: []string{"ipv4-flowspec"},
			Hint: "no TCP connection has completed: with a TCP MD5 password ..."},
	})
	code, out, errOut := runCLI(t, ts.sock, "peers")
	if code != 0 {
		t.Fatalf("peers: exit %d, %s", code, errOut)
	}
	for _, want := range []string{"FLAPS", "192.0.2.2: active since", "last error: notification-received cease/administrative shutdown", "192.0.2.3: active", "hint: no TCP connection has completed"} {
		if !strings.Contains(out, want) {
			t.Errorf("peers output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") || strings.Contains(out, "192.0.2.1:") {
		t.Errorf("raw escape printed, or an established peer explained:\n%q", out)
	}
	code, out, _ = runCLI(t, ts.sock, "peers", "--json")
	if code != 0 || !strings.Contains(out, `"last_error": "notification-received`) || !strings.Contains(out, `"flaps": 2`) {
		t.Errorf("peers --json: %s", out)
	}
}

// A TTL in days reads the same in the CLI as in the daemon (api.ParseTTL):
// `--ttl 2d` is sent and stored as 48 hours, and the guardrails' maximum
// still applies to it.
func TestCLITTLInDays(t *testing.T) {
	ts := startServer(t)
	before := time.Now()
	code, out, errOut := runCLI(t, ts.sock, "rule", "add", "--ttl", "2d", ruleDiscard)
	if code != 0 {
		t.Fatalf("rule add --ttl 2d: exit %d, stderr %q", code, errOut)
	}
	status, body := ts.do(t, "GET", "/v1/rules/"+strings.TrimSpace(out), "")
	r := decode[api.Rule](t, body)
	if status != 200 || r.ExpiresAt == nil || r.ExpiresAt.Before(before.Add(48*time.Hour)) || r.ExpiresAt.After(time.Now().Add(48*time.Hour)) {
		t.Errorf("rule after --ttl 2d: %d %s", status, body)
	}
	if code, _, errOut := runCLI(t, ts.sock, "rule", "add", "--ttl", "8d", ruleLimit); code != 1 || !strings.Contains(errOut, "max_ttl") {
		t.Errorf("rule add --ttl 8d: exit %d, %q; want the max_ttl guardrail", code, errOut)
	}
	if code, _, errOut := runCLI(t, ts.sock, "rule", "add", "--ttl", "2days", ruleLimit); code != 2 || !strings.Contains(errOut, `"2days"`) {
		t.Errorf("rule add --ttl 2days: exit %d, %q; want a usage error naming it", code, errOut)
	}
}
