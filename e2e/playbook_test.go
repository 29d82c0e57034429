package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// The daemon runs the playbook engine: its incidents (in the store's
// incidents table, created by the migration at start) are listed by the
// CLI; a reload takes new playbooks, and refuses a file whose playbook
// would write outside its source's scope, changing nothing.
func TestPlaybookWiring(t *testing.T) {
	const source = `
[[source]]
name = "fnm"
kind = "webhook"
secret = "0123456789abcdef0123456789abcdef"
prefixes = ["198.51.100.0/24"]
actions = ["discard", "rate-limit"]
`
	const playbook = `
[[playbook]]
name = "%s"
[[playbook.step]]
rules = ["match destination {target} then discard"]
ttl = "1h"
`
	pb := func(name string) string { return strings.Replace(playbook, "%s", name, 1) }
	a := startAppliance(t, birdtest.Options{}, "", source+pb("one"), false)
	if out := a.mustCLI("incidents"); out != "no incidents\n" {
		t.Fatalf("incidents: %q", out)
	}
	if out := a.mustCLI("incidents", "--json"); !strings.Contains(out, `"incidents": []`) {
		t.Fatalf("incidents --json: %q", out)
	}
	if _, errOut, code := a.cli("incidents", "show", "1"); code != 1 || !strings.Contains(errOut, "no incident with id 1") {
		t.Fatalf("incidents show 1: exit %d, %q", code, errOut)
	}

	a.reload(source + pb("one") + pb("two"))
	waitFor(t, 30*time.Second, "the reload with two playbooks", func() bool { return a.logCount(`configuration reloaded.*playbooks=2`) == 1 })

	a.reload(source + pb("one") + "[[playbook]]\nname = \"ban\"\n[[playbook.step]]\nrtbh = true\nttl = \"1h\"\n")
	waitFor(t, 30*time.Second, "the refused reload", func() bool {
		return a.logCount(`reload refused.*playbook\[2\]\.step\[1\].*may not use action rtbh`) == 1
	})
	if n := a.logCount(`configuration reloaded`); n != 1 {
		t.Fatalf("%d reloads applied, want 1 (the refused one changes nothing)", n)
	}
}
