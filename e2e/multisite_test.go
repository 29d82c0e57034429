package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"github.com/ribkeeper/ribkeeper/store/pgtest"
)

// Three appliances share one PostgreSQL, each peering with its own BIRD on
// its own loopback address. A rule entered once reaches every site it
// targets; a site-scoped rule reaches only its site; a withdraw through
// any instance clears all of them.
func TestSitesShareOnePostgres(t *testing.T) {
	birdtest.Binary(t)
	dsn := pgtest.Start(t)
	sites := []string{"ams", "fra", "lon"}
	var (
		ds    []*daemon
		birds []*birdtest.Router
	)
	for i, site := range sites {
		d, b := startPair(t, pair{
			rkAddr: fmt.Sprintf("127.0.1.%d", i+1), birdAddr: fmt.Sprintf("127.0.2.%d", i+1),
			site: site, dir: t.TempDir(),
			store: fmt.Sprintf("[store]\ndriver = \"postgres\"\ndsn = %q\n", dsn),
		})
		ds = append(ds, d)
		birds = append(birds, b)
	}

	all := ds[0].addRule("match destination 203.0.113.10/32 protocol udp then discard")
	allFlow := "flow4 { dst 203.0.113.10/32; proto 17; }"
	for i, b := range birds {
		b.WaitRoutes(t, "ft4", 5*time.Second, "rule for all sites at "+sites[i], has(allFlow, discardExt))
	}

	ds[0].addRule("--sites", "fra", "match destination 203.0.113.20/32 protocol tcp then discard")
	fraFlow := "flow4 { dst 203.0.113.20/32; proto 6; }"
	birds[1].WaitRoutes(t, "ft4", 5*time.Second, "site-scoped rule at fra", has(fraFlow, discardExt))
	// The others must not get it; give them the time the target needed and more.
	time.Sleep(500 * time.Millisecond)
	for _, i := range []int{0, 2} {
		routes, err := birds[i].Routes("ft4")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := routes[fraFlow]; ok {
			t.Errorf("rule scoped to fra reached %s", sites[i])
		}
	}
	if list := ds[2].mustCLI("rule", "list"); !strings.Contains(list, "203.0.113.10/32") {
		t.Errorf("lon's rule list lacks the rule added at ams:\n%s", list)
	}

	ds[2].mustCLI("rule", "withdraw", all)
	for i, b := range birds {
		b.WaitRoutes(t, "ft4", 5*time.Second, "withdrawn rule gone at "+sites[i], lacks(allFlow))
	}
	waitFor(t, 5*time.Second, "rule state withdrawn", func() bool { return ds[1].show(all)["state"] == "withdrawn" })
}
