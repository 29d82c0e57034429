package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// appliance is a ribkeeper whose configuration a test writes and rewrites
// (then reloads with SIGHUP), peering with one BIRD on 127.0.0.2.
type appliance struct {
	*daemon
	bird   *birdtest.Router
	rkPort int
	extra  string // sections after [[neighbor]]: [rtbh], [guardrails] ...
	nb     string // extra keys of the [[neighbor]] table
	// routerID and families are [bgp] router_id and the neighbor's
	// families; startAppliance sets 127.0.0.1 and IPv4 FlowSpec with
	// both unicast families.
	routerID, families string
}

// startAppliance starts BIRD (with o's password) and ribkeeper with the
// neighbor keys nb and the extra sections, waiting for the session unless
// wait is false.
func startAppliance(t *testing.T, o birdtest.Options, nb, extra string, wait bool) *appliance {
	t.Helper()
	return startApplianceAs(t, &appliance{extra: extra, nb: nb,
		routerID: "127.0.0.1", families: `"ipv4-flowspec", "ipv4-unicast", "ipv6-unicast"`}, o, wait)
}

// startApplianceAs is startAppliance with a's router id, families, nb and
// extra.
func startApplianceAs(t *testing.T, a *appliance, o birdtest.Options, wait bool) *appliance {
	t.Helper()
	birdtest.Binary(t)
	dir := t.TempDir()
	a.rkPort = birdtest.FreePort(t, "127.0.0.1")
	o.Address, o.ASN = "127.0.0.2", 65001
	o.Port = birdtest.FreePort(t, o.Address)
	o.Peers = []birdtest.Peer{{Address: "127.0.0.1", Port: a.rkPort, ASN: 65000}}
	a.bird = birdtest.Start(t, o)
	a.daemon = &daemon{t: t, dir: dir, conf: filepath.Join(dir, "ribkeeper.toml"), socket: filepath.Join(dir, "rk.sock")}
	a.write()
	t.Cleanup(a.stop)
	a.start()
	if wait {
		waitFor(t, 30*time.Second, "BGP session established", func() bool { return a.bird.Established(0) })
	}
	return a
}

func (a *appliance) write() {
	a.t.Helper()
	conf := fmt.Sprintf(`site = "op"
[log]
level = "debug"
[bgp]
asn = 65000
router_id = %q
listen_addresses = ["127.0.0.1"]
listen_port = %d
[[neighbor]]
address = "127.0.0.2"
asn = 65001
port = %d
local_address = "127.0.0.1"
multihop_ttl = 2
families = [%s]
%s
[store]
path = %q
[api]
socket = %q
%s`, a.routerID, a.rkPort, a.bird.Port, a.families, a.nb, filepath.Join(a.dir, "rk.db"), a.socket, a.extra)
	if err := os.WriteFile(a.conf, []byte(conf), 0o600); err != nil {
		a.t.Fatal(err)
	}
}

// reload rewrites the configuration with extra and sends SIGHUP.
func (a *appliance) reload(extra string) {
	a.t.Helper()
	a.extra = extra
	a.write()
	if err := a.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		a.t.Fatal(err)
	}
}

func hasRoute(net string) func(map[string]birdtest.Route) bool {
	return func(m map[string]birdtest.Route) bool { _, ok := m[net]; return ok }
}

func noRoute(net string) func(map[string]birdtest.Route) bool {
	return func(m map[string]birdtest.Route) bool { _, ok := m[net]; return !ok }
}
