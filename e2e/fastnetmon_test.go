package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// notify runs contrib/fastnetmon/ribkeeper-notify.sh as FastNetMon does:
// IP DIRECTION PPS ACTION, with attack details on stdin for ban.
func notify(t *testing.T, d *daemon, env []string, args ...string) (string, int) {
	t.Helper()
	script, err := filepath.Abs("../contrib/fastnetmon/ribkeeper-notify.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script, args...)
	cmd.Env = append(os.Environ(),
		"RIBKEEPER_DEFAULTS=/dev/null",
		"RIBKEEPER_SOCKET="+d.socket,
		"RIBKEEPER_LOG="+filepath.Join(d.dir, "notify.log"))
	cmd.Env = append(cmd.Env, env...)
	if len(args) == 4 && args[3] != "unban" {
		cmd.Stdin = strings.NewReader("IP: " + args[0] + "\nAttack type: syn_flood\nIncoming traffic: 100500 pps\n")
	}
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run notify script: %v", err)
	}
	return string(out), code
}

func notifyLog(d *daemon) string {
	b, _ := os.ReadFile(filepath.Join(d.dir, "notify.log"))
	return string(b)
}

// A FastNetMon ban becomes one discard rule in BIRD however often it is
// repeated; unban withdraws it, and a repeated unban is harmless.
func TestFastNetMonNotify(t *testing.T) {
	d, bird := setup(t)
	const flow = "flow4 { dst 198.51.100.77/32; }"
	env := []string{"RIBKEEPER_TTL=10m"}

	for i := range 2 {
		if out, code := notify(t, d, env, "198.51.100.77", "incoming", "100500", "ban"); code != 0 {
			t.Fatalf("ban %d: exit %d: %s\n%s", i+1, code, out, notifyLog(d))
		}
	}
	routes := bird.WaitRoutes(t, "ft4", 5*time.Second, "banned address filtered", has(flow, discardExt))
	if len(routes) != 1 {
		t.Fatalf("BIRD holds %d flow4 routes after two bans, want 1: %v", len(routes), routes)
	}
	var list struct {
		Rules []struct {
			ID        int64      `json:"id"`
			Actor     string     `json:"actor"`
			Reason    string     `json:"reason"`
			ExpiresAt *time.Time `json:"expires_at"`
		} `json:"rules"`
	}
	if err := json.Unmarshal([]byte(d.mustCLI("rule", "list", "--state", "active", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Rules) != 1 {
		t.Fatalf("%d active rules after two bans, want 1: %+v", len(list.Rules), list.Rules)
	}
	r := list.Rules[0]
	if r.ExpiresAt == nil || time.Until(*r.ExpiresAt) < 9*time.Minute || !strings.Contains(r.Reason, "fastnetmon") || !strings.Contains(r.Reason, "100500") {
		t.Errorf("rule = %+v, want a 10m TTL and a reason naming the attack", r)
	}

	// attack_details only reads its stdin.
	if out, code := notify(t, d, env, "198.51.100.77", "incoming", "100500", "attack_details"); code != 0 {
		t.Fatalf("attack_details: exit %d: %s", code, out)
	}

	for i := range 2 {
		if out, code := notify(t, d, env, "198.51.100.77", "incoming", "0", "unban"); code != 0 {
			t.Fatalf("unban %d: exit %d: %s\n%s", i+1, code, out, notifyLog(d))
		}
	}
	bird.WaitRoutes(t, "ft4", 5*time.Second, "unbanned address gone", lacks(flow))
	waitFor(t, 5*time.Second, "rule withdrawn", func() bool {
		return d.show(strconv.FormatInt(r.ID, 10))["state"] == "withdrawn"
	})

	// The legacy argument order, IPv6, and a rate limit instead of discard.
	env6 := []string{"RIBKEEPER_ACTION=rate-limit 125000", "RIBKEEPER_MATCH=protocol udp"}
	if out, code := notify(t, d, env6, "ban", "2001:db8::77"); code != 0 {
		t.Fatalf("legacy ban: exit %d: %s\n%s", code, out, notifyLog(d))
	}
	flow6 := "flow6 { dst 2001:db8::77/128; next header 17; }"
	bird.WaitRoutes(t, "ft6", 5*time.Second, "banned IPv6 address rate-limited", has(flow6, rate125kExt))
	if out, code := notify(t, d, env6, "unban", "2001:db8::77"); code != 0 {
		t.Fatalf("legacy unban: exit %d: %s", code, out)
	}
	bird.WaitRoutes(t, "ft6", 5*time.Second, "IPv6 rule gone", lacks(flow6))

	// Garbage never reaches the rule text.
	if _, code := notify(t, d, env, "1.2.3.4; rm -rf /", "incoming", "1", "ban"); code != 2 {
		t.Errorf("a non-address was not refused (exit %d)", code)
	}
}
