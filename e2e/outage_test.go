package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"github.com/ribkeeper/ribkeeper/store/pgtest"
)

// PostgreSQL stops for 10 s under a steady stream of API writes, then comes
// back: every acknowledged rule survives and reaches BIRD exactly once, the
// API answers errors (not hangs) while the database is away, and everything
// resumes by itself.
func TestPostgresOutage(t *testing.T) {
	birdtest.Binary(t)
	srv := pgtest.StartServer(t)
	dsn := srv.NewDatabase(t)
	d, bird := startPair(t, pair{
		rkAddr: "127.0.3.1", birdAddr: "127.0.3.2", site: "outage", dir: t.TempDir(),
		store: fmt.Sprintf("[store]\ndriver = \"postgres\"\ndsn = %q\n", dsn),
	})

	type ack struct{ id, flow string }
	var (
		acked   []ack
		failed  []string
		slowest time.Duration
	)
	write := func(i int) {
		text := fmt.Sprintf("match destination 198.18.%d.%d/32 protocol udp then discard", i/250, i%250+1)
		start := time.Now()
		out, errOut, code := d.cli("rule", "add", text)
		if el := time.Since(start); el > slowest {
			slowest = el
		}
		if code == 0 {
			acked = append(acked, ack{strings.TrimSpace(out), fmt.Sprintf("flow4 { dst 198.18.%d.%d/32; proto 17; }", i/250, i%250+1)})
		} else {
			failed = append(failed, strings.TrimSpace(errOut))
		}
	}

	i := 0
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); i++ {
		write(i)
	}
	srv.Halt()
	haltedAt := len(acked)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); i++ {
		write(i)
		time.Sleep(50 * time.Millisecond)
	}
	if err := srv.Resume(); err != nil {
		t.Fatalf("restart PostgreSQL: %v", err)
	}
	duringOutage := len(acked) - haltedAt
	// Writes resume by themselves once the database is back.
	waitFor(t, 30*time.Second, "API writes succeed again after PostgreSQL restarted", func() bool {
		n := len(acked)
		write(i)
		i++
		return len(acked) > n
	})
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); i++ {
		write(i)
	}

	t.Logf("%d writes: %d acknowledged (%d during the outage), %d refused; slowest call %v", i, len(acked), duringOutage, len(failed), slowest)
	if len(failed) > 0 {
		t.Logf("first refusal: %s", failed[0])
	}
	if len(failed) == 0 {
		t.Fatalf("no write failed while PostgreSQL was stopped for 10s")
	}
	if duringOutage != 0 {
		t.Errorf("%d writes were acknowledged while PostgreSQL was down", duringOutage)
	}
	if !strings.Contains(strings.ToLower(failed[0]), "unavailable") && !strings.Contains(strings.ToLower(failed[0]), "database") {
		t.Errorf("outage error does not say the database is unavailable: %q", failed[0])
	}
	if slowest > 15*time.Second {
		t.Errorf("an API call took %v during the outage; it should fail fast, not hang", slowest)
	}

	// Every acknowledged rule is stored once and announced once.
	var list struct{ Rules []map[string]any }
	if err := json.Unmarshal([]byte(d.mustCLI("rule", "list", "--json", "--state", "active")), &list); err != nil {
		t.Fatal(err)
	}
	rules := list.Rules
	stored := map[string]int{}
	for _, r := range rules {
		stored[fmt.Sprint(r["match"])]++
	}
	for m, n := range stored {
		if n > 1 {
			t.Errorf("match %s stored %d times", m, n)
		}
	}
	ids := map[string]bool{}
	for _, r := range rules {
		ids[fmt.Sprint(r["id"])] = true
	}
	for _, a := range acked {
		if !ids[a.id] {
			t.Errorf("acknowledged rule %s is not active in the store", a.id)
		}
	}
	routes := bird.WaitRoutes(t, "ft4", 30*time.Second, "every acknowledged rule announced", func(m map[string]birdtest.Route) bool {
		for _, a := range acked {
			if _, ok := m[a.flow]; !ok {
				return false
			}
		}
		return true
	})
	if len(routes) != len(rules) {
		t.Errorf("BIRD holds %d routes for %d active rules", len(routes), len(rules))
	}
}
