package e2e

import (
	"os"
	"strings"
	"testing"
	"time"
)

// The control socket of a running daemon deleted from under it (a
// cleanup of /run, an operator's rm) is recreated within seconds, with a
// log line, and the CLI reaches the daemon again.
func TestControlSocketRecreated(t *testing.T) {
	d, _ := setup(t)
	d.mustCLI("rule", "add", "match destination 203.0.113.9/32 then discard", "--ttl", "1h")
	if err := os.Remove(d.socket); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the log line saying the control socket was recreated", func() bool {
		return strings.Contains(d.logTail(200), "control socket file was removed; recreated it")
	})
	out := d.mustCLI("rule", "list")
	if !strings.Contains(out, "203.0.113.9/32") {
		t.Errorf("rule list over the recreated socket lacks the rule:\n%s", out)
	}
}
