package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

const (
	hookSecret = "hook-secret-e2e-0123456789"
	amSecret   = "alertmanager-secret-e2e-0123456789"
	fnmSecret  = "fastnetmon-secret-e2e-0123456789"
)

// signalsPair starts BIRD and a ribkeeper whose TCP listener has the
// sources of the README's recipes: "hook" (webhook), "alertmanager" and
// "fastnetmon", and playbooks for the alerts and the bans. It returns the listener's
// address (host:port).
func signalsPair(t *testing.T) (*daemon, *birdtest.Router, string) {
	t.Helper()
	birdtest.Binary(t)
	dir := t.TempDir()
	port := birdtest.FreePort(t, "127.0.0.1")
	// The pair's store text follows the [api] section's socket key.
	extra := fmt.Sprintf(`listen = "127.0.0.1:%d"
[store]
path = %q
[[source]]
name = "hook"
kind = "webhook"
secret = %q
[[source]]
name = "alertmanager"
kind = "alertmanager"
secret = %q
[[source]]
name = "fastnetmon"
kind = "fastnetmon"
secret = %q
# Alerts become a discard rule for their target, withdrawn 2 s after the
# alert is resolved.
[[playbook]]
name = "alerts"
sources = ["alertmanager"]
hold_down = "2s"
[[playbook.step]]
rules = ["match destination {target} then discard"]
ttl = "10m"
# So do FastNetMon's bans, until 2 s after the unban.
[[playbook]]
name = "bans"
sources = ["fastnetmon"]
hold_down = "2s"
[[playbook.step]]
rules = ["match destination {target} then discard"]
ttl = "10m"
`, port, filepath.Join(dir, "rk.db"), hookSecret, amSecret, fnmSecret)
	d, bird := startPair(t, pair{rkAddr: "127.0.0.1", birdAddr: "127.0.0.2", site: "e2e", dir: dir, store: extra})
	return d, bird, fmt.Sprintf("127.0.0.1:%d", port)
}

// signals returns what `ribkeeper signals --json` shows.
func (d *daemon) signals() []api.Signal {
	d.t.Helper()
	var l api.SignalList
	out := d.mustCLI("signals", "--json", "--limit", "1000")
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		d.t.Fatalf("signals --json: %v: %s", err, out)
	}
	return l.Signals
}

// waitSignal waits until the ring shows a signal for which ok is true.
func (d *daemon) waitSignal(t *testing.T, what string, ok func(api.Signal) bool) api.Signal {
	t.Helper()
	var found api.Signal
	waitFor(t, 60*time.Second, what, func() bool {
		for _, s := range d.signals() {
			if ok(s) {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

// recipe returns the code block of the README that follows the marker
// "<!-- recipe: NAME".
func recipe(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- recipe: " + regexp.QuoteMeta(name) + "[^\n]*-->\n```[a-z]*\n(.*?)```")
	m := re.FindSubmatch(b)
	if m == nil {
		t.Fatalf("README.md has no recipe %q", name)
	}
	return string(m[1])
}

// replaceOnce replaces old in s, which must hold it once.
func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if n := strings.Count(s, old); n != 1 {
		t.Fatalf("the recipe holds %q %d times, want once:\n%s", old, n, s)
	}
	return strings.Replace(s, old, new, 1)
}

// The README's webhook recipe (openssl and curl) is accepted; sent again
// as it was, it is a replay and refused; signed with another secret it is
// refused. The ring shows each.
func TestWebhookRecipe(t *testing.T) {
	for _, tool := range []string{"curl", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s not found but CI is set", tool)
			}
			t.Skipf("%s not found", tool)
		}
	}
	d, _, addr := signalsPair(t)
	script := recipe(t, "webhook")
	script = replaceOnce(t, script, "URL=http://127.0.0.1:8080 SECRET=$(cat /etc/ribkeeper/hook.secret)", "URL=http://"+addr)
	run := func(secret, ts string) (string, error) {
		s := script
		if ts != "" {
			s = replaceOnce(t, s, "TS=$(date +%s)", "TS="+ts)
		}
		cmd := exec.Command("sh", "-ec", s)
		cmd.Env = append(os.Environ(), "SECRET="+secret)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	ts := fmt.Sprint(time.Now().Unix())
	if out, err := run(hookSecret, ts); err != nil || !strings.Contains(out, `"accepted":1`) {
		t.Fatalf("the recipe: %v: %s", err, out)
	}
	s := d.waitSignal(t, "the recipe's signal", func(s api.Signal) bool { return s.Source == "hook" && s.Accepted })
	if s.Target != "192.0.2.10/32" || s.State != "start" || s.Protocol != "udp" || s.PPS != 250000 || s.Via != "webhook" {
		t.Errorf("signal = %+v", s)
	}
	if out, err := run(hookSecret, ts); err == nil || !strings.Contains(out, "replay") {
		t.Errorf("the same request again: %v: %s", err, out)
	}
	if out, err := run("another-secret-0123456789", ""); err == nil || !strings.Contains(out, "wrong signature") {
		t.Errorf("another secret: %v: %s", err, out)
	}
	sigs := d.signals()
	if len(sigs) != 3 || sigs[0].Accepted || sigs[1].Accepted || !strings.Contains(sigs[1].Reason, "replay") {
		t.Errorf("ring = %+v, want the signal, then a replay and a wrong signature refused", sigs)
	}
}

// alertmanagerBinary is Debian's prometheus-alertmanager.
func alertmanagerBinary(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"prometheus-alertmanager", "alertmanager"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("prometheus-alertmanager not found but CI is set: .ci/run must install Debian's prometheus-alertmanager")
	}
	t.Skip("prometheus-alertmanager not found (apt-get install prometheus-alertmanager)")
	return ""
}

// startAlertmanager runs Alertmanager with the README's receiver pointed
// at addr (ribkeeper's listener), on its own loopback port, storage and
// log, without clustering, and waits until it is ready. It returns its
// URL.
func startAlertmanager(t *testing.T, addr string) string {
	t.Helper()
	bin := alertmanagerBinary(t)
	dir := t.TempDir()
	secret := filepath.Join(dir, "ribkeeper.secret")
	if err := os.WriteFile(secret, []byte(amSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := recipe(t, "alertmanager")
	conf = replaceOnce(t, conf, "127.0.0.1:8080", addr)
	conf = replaceOnce(t, conf, "/etc/prometheus/ribkeeper.secret", secret)
	// Notify at once, and flush a resolved alert within a second.
	conf = replaceOnce(t, conf, "group_wait: 10s", "group_wait: 100ms")
	conf = replaceOnce(t, conf, "group_interval: 1m", "group_interval: 1s")
	if err := os.WriteFile(filepath.Join(dir, "alertmanager.yml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	port := birdtest.FreePort(t, "127.0.0.1")
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	logf, err := os.Create(filepath.Join(dir, "alertmanager.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "alertmanager.yml"),
		"--storage.path="+filepath.Join(dir, "data"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--cluster.listen-address=", "--log.level=debug")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("alertmanager log:\n%s", b)
		}
	})
	waitFor(t, 60*time.Second, "Alertmanager ready", func() bool {
		select {
		case <-exited:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("alertmanager exited:\n%s", b)
		default:
		}
		resp, err := http.Get(url + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return url
}

// postAlert posts one alert to Alertmanager's API v2.
func postAlert(t *testing.T, amURL string, labels map[string]string, startsAt, endsAt time.Time) {
	t.Helper()
	alert := map[string]any{"labels": labels, "annotations": map[string]string{"summary": "UDP flood"},
		"startsAt": startsAt.UTC().Format(time.RFC3339Nano)}
	if !endsAt.IsZero() {
		alert["endsAt"] = endsAt.UTC().Format(time.RFC3339Nano)
	}
	body, _ := json.Marshal([]any{alert})
	resp, err := http.Post(amURL+"/api/v2/alerts", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("posting the alert: %s: %s", resp.Status, b)
	}
}

// Debian's Alertmanager, configured with the README's receiver: an alert
// posted to it becomes a start signal of source "alertmanager" for the
// alert's target, and the playbook's discard rule for it reaches BIRD,
// written by the source; resolving the alert (endsAt in the past) is an
// end signal, and the rule is withdrawn from BIRD after the hold-down.
func TestAlertmanagerSignals(t *testing.T) {
	d, bird, addr := signalsPair(t)
	amURL := startAlertmanager(t, addr)
	labels := map[string]string{"alertname": "DDoS", "target": "192.0.2.10", "protocol": "udp", "dst_port": "53", "pps": "250000"}
	start := time.Now().Add(-time.Minute) // endsAt must not be before it
	postAlert(t, amURL, labels, start, time.Time{})
	s := d.waitSignal(t, "the firing alert's start signal", func(s api.Signal) bool {
		return s.Source == "alertmanager" && s.State == "start"
	})
	if !s.Accepted || s.Target != "192.0.2.10/32" || s.Protocol != "udp" || len(s.DstPorts) != 1 || s.DstPorts[0] != 53 ||
		s.PPS != 250000 || s.Detail != "UDP flood" || s.Via != "alertmanager" || s.AttackID == "" {
		t.Errorf("start signal = %+v", s)
	}
	const flow = "flow4 { dst 192.0.2.10/32; }"
	bird.WaitRoutes(t, "ft4", 60*time.Second, "the alert's discard rule at BIRD", has(flow, discardExt))
	var list struct {
		Rules []struct {
			Actor, Reason, Text string
		} `json:"rules"`
	}
	if err := json.Unmarshal([]byte(d.mustCLI("rule", "list", "--state", "active", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Rules) != 1 || list.Rules[0].Actor != "alertmanager" || !strings.Contains(list.Rules[0].Reason, "alerts") {
		t.Errorf("active rules = %+v, want one by actor alertmanager naming the playbook", list.Rules)
	}
	postAlert(t, amURL, labels, start, time.Now().Add(-time.Second))
	e := d.waitSignal(t, "the resolved alert's end signal", func(s api.Signal) bool {
		return s.Source == "alertmanager" && s.State == "end"
	})
	if !e.Accepted || e.Target != "192.0.2.10/32" || e.AttackID != s.AttackID {
		t.Errorf("end signal = %+v, want the same target and attack id as %+v", e, s)
	}
	bird.WaitRoutes(t, "ft4", 60*time.Second, "the rule withdrawn after the hold-down", lacks(flow))
	for _, s := range d.signals() {
		if !s.Accepted {
			t.Errorf("a refused signal: %+v", s)
		}
	}
}
