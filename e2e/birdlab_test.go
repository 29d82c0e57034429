package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"github.com/ribkeeper/ribkeeper/e2e/porttest"
)

// contrib/routers/bird/bird-lab.conf works as shipped with the example
// configuration's lab setup (ribkeeper 127.0.0.1:1790, AS 65000; the
// router 127.0.0.2:1790, AS 65001), whichever of the two starts first:
// the session comes up and a rule reaches BIRD.
func TestBIRDLabConfigAsShipped(t *testing.T) {
	birdtest.Binary(t)
	if !porttest.Take(t, 1790) {
		if os.Getenv("CI") != "" {
			t.Fatal("port 1790, the lab setup's, is in use")
		}
		t.Skip("port 1790, the lab setup's, is in use (a `make run`?)")
	}
	for _, birdFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("bird first %v", birdFirst), func(t *testing.T) {
			dir := t.TempDir()
			d := &daemon{t: t, dir: dir, conf: filepath.Join(dir, "ribkeeper.toml"), socket: filepath.Join(dir, "rk.sock")}
			conf := fmt.Sprintf(`[bgp]
asn = 65000
router_id = "127.0.0.1"
listen_addresses = ["127.0.0.1"]
listen_port = 1790
[[neighbor]]
address = "127.0.0.2"
asn = 65001
port = 1790
local_address = "127.0.0.1"
profile = "bird"
[api]
socket = %q
[store]
path = %q
`, d.socket, filepath.Join(dir, "rk.db"))
			if err := os.WriteFile(d.conf, []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(d.stop)
			var bird *birdtest.Router
			startBird := func() {
				bird = birdtest.StartConfig(t, filepath.Join("..", "contrib", "routers", "bird", "bird-lab.conf"), birdtest.Options{Address: "127.0.0.2"})
			}
			if birdFirst {
				startBird()
				d.start()
			} else {
				d.start()
				startBird()
			}
			waitFor(t, 60*time.Second, "the lab session established", func() bool {
				out, err := bird.Birdc("show", "protocols", "ribkeeper")
				return err == nil && strings.Contains(out, "Established")
			})
			d.addRule("--ttl", "10m", ruleText(1))
			bird.WaitRoutes(t, "ft4", 30*time.Second, "the rule in BIRD", func(m map[string]birdtest.Route) bool {
				_, ok := m[driftFlow(1)]
				return ok
			})
			if out := d.mustCLI("peers"); !strings.Contains(out, "established") {
				t.Errorf("peers:\n%s", out)
			}
		})
	}
}
