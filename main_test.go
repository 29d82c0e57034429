package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ribkeeper.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// check-config: 0 for a good file, 1 with every error (file:line: key:
// message) for a bad one, 2 for a usage mistake.
func TestCheckConfigExitCodes(t *testing.T) {
	code, out, errOut := runMain(t, "check-config", "--config", "config.example.toml")
	if code != 0 || !strings.Contains(out, "config.example.toml: ok") {
		t.Errorf("example: exit %d, %q %q", code, out, errOut)
	}

	bad := writeFile(t, `[bgp]
asn = 23456
router_id = "192.0.2.1"

[[neighbor]]
address = "127.0.0.2"
asn = 65001
hold_time = "1s"
password = "a"
password_file = "/x"

[[dynamic_neighbor]]
prefix = "10.0.0.0/8"
peer_group = "nope"

[guardrails]
safelist = ["192.0.2.1/24"]
frobnicate = true
`)
	code, out, errOut = runMain(t, "check-config", "--config", bad)
	if code != 1 || out != "" {
		t.Fatalf("bad file: exit %d, stdout %q", code, out)
	}
	for _, want := range []string{
		":2: bgp.asn: ", ":8: neighbor[1].hold_time: ", ":9: neighbor[1].password: ",
		":14: dynamic_neighbor[1].peer_group: ", ":17: guardrails.safelist: ", ":18: guardrails.frobnicate: unknown key",
	} {
		if !strings.Contains(errOut, bad+want) {
			t.Errorf("stderr lacks %q:\n%s", bad+want, errOut)
		}
	}
	if n := strings.Count(strings.TrimSpace(errOut), "\n") + 1; n != 6 {
		t.Errorf("%d error lines, want 6:\n%s", n, errOut)
	}

	if code, _, _ := runMain(t, "check-config"); code != 2 {
		t.Errorf("no --config: exit %d, want 2", code)
	}
	if code, _, _ := runMain(t, "check-config", "--config", bad, "extra"); code != 2 {
		t.Errorf("extra argument: exit %d, want 2", code)
	}
	if code, _, errOut := runMain(t, "check-config", "--config", "/nonexistent.toml"); code != 1 || !strings.Contains(errOut, "--config") {
		t.Errorf("missing file: exit %d, %q", code, errOut)
	}
}

// route commands are client commands: without a daemon they fail with 1,
// with bad usage with 2, before touching the socket.
func TestRouteCommand(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	if code, _, _ := runMain(t, "route", "--socket", sock, "add", "203.0.113.7/32"); code != 2 {
		t.Errorf("route add without --blackhole: exit %d, want 2", code)
	}
	if code, _, errOut := runMain(t, "route", "--socket", sock, "add", "203.0.113.7/32", "--blackhole"); code != 1 || !strings.Contains(errOut, sock) {
		t.Errorf("no daemon: exit %d, %q", code, errOut)
	}
}
