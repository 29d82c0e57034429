package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// notify runs contrib/fastnetmon/ribkeeper-notify.sh as FastNetMon does:
// IP DIRECTION PPS ACTION, with attack details on stdin for ban and
// attack_details.
func notify(t *testing.T, d *daemon, env []string, args ...string) (string, int) {
	t.Helper()
	script, err := filepath.Abs("../contrib/fastnetmon/ribkeeper-notify.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script, args...)
	cmd.Env = append(os.Environ(),
		"RIBKEEPER_DEFAULTS=/dev/null",
		"RIBKEEPER_LOG="+filepath.Join(d.dir, "notify.log"))
	cmd.Env = append(cmd.Env, env...)
	if len(args) == 4 && args[3] != "unban" {
		cmd.Stdin = strings.NewReader("IP: " + args[0] + "\nAttack type: syn_flood\nAttack protocol: tcp\nIncoming traffic: 100500 pps\n\"quoted\" \\ \x1b[31m\n")
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

// The notify script forwards FastNetMon's calls to the "fastnetmon"
// source, over TCP with the secret from a file or over the control
// socket: ban is a start signal with what the details say, and the
// playbook's rule reaches BIRD; unban is an end, and the rule is withdrawn
// after the hold-down; garbage and a wrong secret are refused and nothing
// is recorded as accepted.
func TestFastNetMonNotify(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl not found but CI is set")
		}
		t.Skip("curl not found")
	}
	d, bird, addr := signalsPair(t)
	secretFile := filepath.Join(d.dir, "fnm.secret")
	if err := os.WriteFile(secretFile, []byte(fnmSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tcp := []string{"RIBKEEPER_URL=http://" + addr, "RIBKEEPER_SECRET_FILE=" + secretFile}
	if out, code := notify(t, d, tcp, "198.51.100.77", "incoming", "100500", "ban"); code != 0 {
		t.Fatalf("ban: exit %d: %s\n%s", code, out, notifyLog(d))
	}
	if out, code := notify(t, d, tcp, "198.51.100.77", "incoming", "90000", "attack_details"); code != 0 {
		t.Fatalf("attack_details: exit %d: %s\n%s", code, out, notifyLog(d))
	}
	const flow = "flow4 { dst 198.51.100.77/32; }"
	bird.WaitRoutes(t, "ft4", 60*time.Second, "the banned address discarded at BIRD", has(flow, discardExt))
	socket := []string{"RIBKEEPER_SOCKET=" + d.socket, "RIBKEEPER_SECRET=" + fnmSecret}
	if out, code := notify(t, d, socket, "198.51.100.77", "incoming", "0", "unban"); code != 0 {
		t.Fatalf("unban over the socket: exit %d: %s\n%s", code, out, notifyLog(d))
	}
	bird.WaitRoutes(t, "ft4", 60*time.Second, "the rule withdrawn after the unban and the hold-down", lacks(flow))
	// The argument order of FastNetMon Advanced's JSON mode, IPv6.
	if out, code := notify(t, d, tcp, "ban", "2001:db8::77"); code != 0 {
		t.Fatalf("ban IP: exit %d: %s\n%s", code, out, notifyLog(d))
	}
	// Garbage never leaves the script; a wrong secret is refused.
	if _, code := notify(t, d, tcp, "1.2.3.4; rm -rf /", "incoming", "1", "ban"); code != 2 {
		t.Errorf("a non-address was not refused (exit %d)", code)
	}
	wrong := []string{"RIBKEEPER_URL=http://" + addr, "RIBKEEPER_SECRET=wrong-secret-0123456789"}
	if _, code := notify(t, d, wrong, "198.51.100.78", "incoming", "1", "ban"); code != 1 || !strings.Contains(notifyLog(d), "wrong bearer token") {
		t.Errorf("wrong secret: exit %d, log:\n%s", code, notifyLog(d))
	}

	sigs := d.signals() // newest first
	if len(sigs) != 5 {
		t.Fatalf("ring = %+v, want 5 records", sigs)
	}
	want := []struct {
		target, state string
		accepted      bool
	}{
		{"", "", false},
		{"2001:db8::77/128", "start", true},
		{"198.51.100.77/32", "end", true},
		{"198.51.100.77/32", "ongoing", true},
		{"198.51.100.77/32", "start", true},
	}
	for i, w := range want {
		s := sigs[i]
		if s.Source != "fastnetmon" || s.Via != "fastnetmon" || s.Target != w.target || s.State != w.state || s.Accepted != w.accepted {
			t.Errorf("record %d = %+v, want %+v", i, s, w)
		}
	}
	ban := sigs[4]
	if ban.PPS != 100500 || ban.Protocol != "" || !strings.Contains(ban.Detail, "syn_flood") || !strings.Contains(ban.Detail, "protocol tcp") {
		t.Errorf("ban = %+v, want its rate, and the attack type and protocol in its detail", ban)
	}
}
