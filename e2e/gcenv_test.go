package e2e

import (
	"strings"
	"testing"
)

// TestServesWithOperatorGCSettings: an operator's GOGC or GOMEMLIMIT
// leaves ribkeeper's own collector tuning alone (memory.go), and the
// daemon keeps serving. It used to stop a millisecond after it started,
// with exit status 0: the part that tunes the heap floor returned at
// once, and a part that returns stops the daemon.
func TestServesWithOperatorGCSettings(t *testing.T) {
	for _, env := range []string{"GOMEMLIMIT=1GiB", "GOGC=150"} {
		t.Run(env, func(t *testing.T) {
			b := startBare(t, "", []string{"env", env})
			out, code := b.cliWithin(t, "rule", "add", "destination 192.0.2.1/32 protocol ==17 destination-port ==53 then discard")
			if code != 0 {
				t.Fatalf("rule add with %s: exit %d: %s\nlog:\n%s", env, code, out, b.logTail(40))
			}
			out, code = b.cliWithin(t, "rule", "list")
			if code != 0 || !strings.Contains(out, "192.0.2.1/32") {
				t.Fatalf("rule list with %s: exit %d: %s\nlog:\n%s", env, code, out, b.logTail(40))
			}
			select {
			case err := <-b.exited:
				b.exited = nil
				t.Fatalf("ribkeeper with %s exited while serving (%v); log:\n%s", env, err, b.logTail(40))
			default:
			}
		})
	}
}
