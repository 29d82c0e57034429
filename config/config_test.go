package config

import (
	"errors"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

func TestExampleLoads(t *testing.T) {
	cfg, err := Load("../config.example.toml")
	if err != nil {
		t.Fatalf("config.example.toml: %v", err)
	}
	if cfg.BGP.ASN != 65000 || cfg.BGP.ListenPort != 1790 || cfg.BGP.RouterID != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("bgp = %+v", cfg.BGP)
	}
	if len(cfg.Neighbors) != 1 || cfg.Neighbors[0].Address != netip.MustParseAddr("127.0.0.2") || cfg.Neighbors[0].Port != 1790 {
		t.Fatalf("neighbors = %+v", cfg.Neighbors)
	}
	if got := cfg.Neighbors[0].Families; len(got) != 3 || got[0] != flowspec.IPv4 || got[1] != flowspec.IPv6 || got[2] != flowspec.IPv4Unicast {
		t.Errorf("families = %v", got)
	}
	if cfg.Store.Driver != "sqlite" || !strings.HasPrefix(cfg.Store.Path, "./data/") || !strings.HasPrefix(cfg.API.Socket, "./data/") {
		t.Errorf("store/api = %+v %+v", cfg.Store, cfg.API)
	}
	if cfg.Reconcile.ResyncInterval != 5*time.Minute || cfg.Site != "lab" {
		t.Errorf("reconcile/site = %+v %q", cfg.Reconcile, cfg.Site)
	}
	if n := cfg.Neighbors[0]; n.HoldTime != 90*time.Second || n.KeepaliveInterval != 30*time.Second || n.MultihopTTL != 2 || n.GracefulRestart {
		t.Errorf("neighbor session = %+v", n.Session)
	}
	if cfg.RTBH.NextHopIPv4 != DefaultNextHopIPv4 || cfg.RTBH.NextHopIPv6 != DefaultNextHopIPv6 {
		t.Errorf("rtbh = %+v", cfg.RTBH)
	}
	if g := cfg.Guardrails; len(g.Safelist) != 0 || g.TTLMax() != DefaultMaxTTL || g.TTLDefault() != DefaultRuleTTL || g.AllowNeverExpire || g.AllowNoDestination ||
		g.PrefixLengths[flowspec.IPv4Unicast] != (Range{Min: 32, Max: 32}) || g.PrefixLengths[flowspec.IPv4] != (Range{Min: 8, Max: 32}) || g.PrefixLengths[flowspec.IPv6] != (Range{Min: 32, Max: 128}) {
		t.Errorf("guardrails = %+v", g)
	}
}

const minimal = `
[bgp]
asn = 65000
router_id = "192.0.2.1"
`

func TestDefaults(t *testing.T) {
	cfg, err := Parse("m.toml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BGP.ListenPort != 179 || cfg.Store.Driver != "sqlite" || cfg.Site != DefaultSite ||
		cfg.Log.Level != "info" || cfg.Log.Format != "text" || cfg.Reconcile.MaxWithdrawPerPass != DefaultMaxWithdraw ||
		cfg.Store.HistoryRetention != 90*24*time.Hour {
		t.Errorf("defaults: %+v", cfg)
	}
}

// Each bad file must fail with an error naming the key and its line.
func TestErrorsNameKeyAndLine(t *testing.T) {
	cases := []struct {
		name, text, key string
		line            int
		msg             string
	}{
		{"unknown top key", "sitee = \"x\"\n" + minimal, "sitee", 1, "unknown key"},
		{"unknown nested key", minimal + "listen_prot = 1\n", "bgp.listen_prot", 5, "unknown key"},
		{"unknown neighbor key", minimal + "[[neighbor]]\naddress = \"127.0.0.2\"\nasn = 1\nasnn = 2\n", "neighbor.0.asnn", 8, "unknown key"},
		{"bad asn", "[bgp]\nasn = 4294967296\nrouter_id = \"1.1.1.1\"\n", "bgp.asn", 2, "AS number"},
		{"as_trans", "[bgp]\nasn = 23456\nrouter_id = \"1.1.1.1\"\n", "bgp.asn", 2, "AS_TRANS"},
		{"missing asn", "[bgp]\nrouter_id = \"1.1.1.1\"\n", "bgp.asn", 1, "missing"},
		{"bad router id", "[bgp]\nasn = 1\nrouter_id = \"::1\"\n", "bgp.router_id", 3, "IPv4"},
		{"bad port", minimal + "listen_port = 70000\n", "bgp.listen_port", 5, "TCP port"},
		{"bad neighbor address", minimal + "[[neighbor]]\naddress = \"10.0.0.300\"\nasn = 1\n", "neighbor.0.address", 6, "not an IP address"},
		{"duplicate neighbor", minimal + "[[neighbor]]\naddress = \"127.0.0.2\"\nasn = 1\n[[neighbor]]\naddress = \"127.0.0.2\"\nasn = 2\n", "neighbor.1.address", 9, "twice"},
		{"bad family", minimal + "[[neighbor]]\naddress = \"127.0.0.2\"\nasn = 1\nfamilies = [\"l2vpn\"]\n", "neighbor.0.families", 8, "family"},
		{"bad driver", minimal + "[store]\ndriver = \"mysql\"\n", "store.driver", 6, "store driver"},
		{"bad duration", minimal + "[reconcile]\nresync_interval = \"soon\"\n", "reconcile.resync_interval", 6, "duration"},
		{"negative orphan cap", minimal + "[reconcile]\nmax_withdraw_per_pass = -1\n", "reconcile.max_withdraw_per_pass", 6, "-1 is negative: use 0 for no cap"},
		{"negative announce rate", minimal + "[reconcile]\nannounce_rate = -5\n", "reconcile.announce_rate", 6, "-5 is negative: use 0 for unpaced"},
		{"negative compact_after", minimal + "compact_after = -1\n", "bgp.compact_after", 5, "-1 is negative: use 0 to never compact"},
		{"bad retention", minimal + "[store]\nhistory_retention = \"90 days\"\n", "store.history_retention", 6, "90d"},
		{"short retention", minimal + "[store]\nhistory_retention = \"5m\"\n", "store.history_retention", 6, "shorter than 1h"},
		{"bad default ttl", minimal + "[guardrails]\ndefault_ttl = \"forever\"\n", "guardrails.default_ttl", 6, "\"never\""},
		{"bad max ttl", minimal + "[guardrails]\nmax_ttl = \"never\"\n", "guardrails.max_ttl", 6, "\"none\""},
		{"default above max", minimal + "[guardrails]\ndefault_ttl = \"2d\"\nmax_ttl = \"24h\"\n", "guardrails.default_ttl", 6, "raise max_ttl"},
		{"default above default max", minimal + "[guardrails]\ndefault_ttl = \"8d\"\n", "guardrails.default_ttl", 6, "longer than max_ttl 168h"},
		{"wrong type", "[bgp]\nasn = \"x\"\n", "bgp.asn", 2, "a number is expected"},
		{"syntax", "[bgp\nasn = 1\n", "", 2, "table name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("f.toml", []byte(c.text))
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("err = %v, want Errors", err)
			}
			var hit *Error
			for _, e := range es {
				if e.Key == c.key || c.key == "" {
					hit = e
					break
				}
			}
			if hit == nil {
				t.Fatalf("no error for key %q in:\n%v", c.key, err)
			}
			if hit.Line != c.line {
				t.Errorf("line = %d, want %d (%v)", hit.Line, c.line, hit)
			}
			if !strings.Contains(hit.Error(), c.msg) || !strings.HasPrefix(hit.Error(), "f.toml:") {
				t.Errorf("message %q lacks %q", hit.Error(), c.msg)
			}
		})
	}
}

func TestPostgresDSNFromEnv(t *testing.T) {
	t.Setenv(DSNEnv, "postgres://x@127.0.0.1/rk")
	cfg, err := Parse("p.toml", []byte(minimal+"[store]\ndriver = \"postgres\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store.DSN != "postgres://x@127.0.0.1/rk" {
		t.Errorf("dsn = %q", cfg.Store.DSN)
	}
	os.Unsetenv(DSNEnv)
}

func TestMissingFile(t *testing.T) {
	_, err := Load("/nonexistent/ribkeeper.toml")
	if err == nil || !strings.Contains(err.Error(), "--config") {
		t.Fatalf("err = %v", err)
	}
}

func TestHistoryRetention(t *testing.T) {
	for text, want := range map[string]time.Duration{"30d": 30 * 24 * time.Hour, "720h": 720 * time.Hour, "0": 0} {
		cfg, err := Parse("m.toml", []byte(minimal+"[store]\nhistory_retention = \""+text+"\"\n"))
		if err != nil || cfg.Store.HistoryRetention != want {
			t.Errorf("history_retention %q: %v, %v; want %v", text, cfg, err, want)
		}
	}
}

// [[rule]] entries: parsed, one per match (the guardrails are
// guard.CheckStatic's, tested there and in main).
func TestStaticRules(t *testing.T) {
	good := minimal + `[guardrails]
require_ttl = true
safelist = ["192.0.2.0/24"]
[[rule]]
text = "match destination 203.0.113.7/32 protocol udp then discard"
[[rule]]
text = "match destination 198.51.100.0/24 then rate-limit 1000"
sites = ["fra1"]
reason = "infrastructure filter"
`
	cfg, err := Parse("s.toml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Rules) != 2 || cfg.Rules[1].Reason != "infrastructure filter" || cfg.Rules[1].Sites[0] != "fra1" || !cfg.Rules[0].Rule.IsValid() {
		t.Fatalf("rules %+v", cfg.Rules)
	}
	for name, c := range map[string]struct{ text, key, msg string }{
		"syntax":    {"[[rule]]\ntext = \"match destinaton 203.0.113.7/32 then discard\"\n", "rule.0.text", "destinaton"},
		"duplicate": {"[[rule]]\ntext = \"match destination 10.0.0.1/32 then discard\"\n[[rule]]\ntext = \"match destination 10.0.0.1/32 then rate-limit 5\"\n", "rule.1.text", "twice"},
		"no text":   {"[[rule]]\nsites = [\"a\"]\n", "rule.0.text", "missing"},
		"bad site":  {"[[rule]]\ntext = \"match destination 10.0.0.1/32 then discard\"\nsites = [\" a\"]\n", "rule.0.sites", "site name"},
	} {
		_, err := Parse("s.toml", []byte(minimal+c.text))
		var es Errors
		if !errors.As(err, &es) {
			t.Errorf("%s: err = %v", name, err)
			continue
		}
		found := false
		for _, e := range es {
			found = found || e.Key == c.key && strings.Contains(e.Error(), c.msg)
		}
		if !found {
			t.Errorf("%s: no error for %s with %q in %v", name, c.key, c.msg, err)
		}
	}
}

// [guardrails] ships safe: a default TTL of 1h, a maximum of 7 days,
// rules that never expire and FlowSpec rules without a destination
// refused; each opens with its setting.
func TestGuardrailDefaults(t *testing.T) {
	cfg, err := Parse("m.toml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.Guardrails
	if g.TTLDefault() != time.Hour || g.TTLMax() != 7*24*time.Hour || g.AllowNeverExpire || g.AllowNoDestination || g.RequireTTL {
		t.Errorf("defaults: %+v", g)
	}
	if z := (Guardrails{}); z.TTLDefault() != g.TTLDefault() || z.TTLMax() != g.TTLMax() {
		t.Errorf("the zero Guardrails are not the shipped defaults: %v %v", z.TTLDefault(), z.TTLMax())
	}
	cfg, err = Parse("m.toml", []byte(minimal+`[guardrails]
default_ttl = "never"
max_ttl = "none"
allow_never_expire = true
allow_no_destination = true
`))
	if err != nil {
		t.Fatal(err)
	}
	g = cfg.Guardrails
	if g.TTLDefault() != 0 || g.TTLMax() != 0 || !g.AllowNeverExpire || !g.AllowNoDestination {
		t.Errorf("opened: %+v", g)
	}
	cfg, err = Parse("m.toml", []byte(minimal+"[guardrails]\ndefault_ttl = \"15m\"\nmax_ttl = \"2d\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if g := cfg.Guardrails; g.TTLDefault() != 15*time.Minute || g.TTLMax() != 48*time.Hour {
		t.Errorf("set: %v %v", g.TTLDefault(), g.TTLMax())
	}
}

// What the guardrails protect comes from [bgp] and the neighbors: the
// router id, listen and local addresses, neighbors, dynamic neighbors'
// prefixes, and every BGP port.
func TestProtected(t *testing.T) {
	cfg, err := Parse("p.toml", []byte(`[bgp]
asn = 65000
router_id = "10.255.255.1"
listen_addresses = ["0.0.0.0", "192.0.2.1", "2001:db8::1"]
listen_port = 1790
[[neighbor]]
address = "192.0.2.2"
asn = 65001
local_address = "192.0.2.1"
[[neighbor]]
address = "2001:db8::2"
asn = 65002
port = 11179
local_address = "2001:db8::11"
[[peer_group]]
name = "edge"
asn = 65010
[[dynamic_neighbor]]
prefix = "10.99.0.0/24"
peer_group = "edge"
`))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Guardrails.Protected
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	if !slices.Equal(p.Own, addrs("10.255.255.1", "192.0.2.1", "2001:db8::1", "2001:db8::11")) {
		t.Errorf("own %v", p.Own)
	}
	if !slices.Equal(p.Neighbors, addrs("192.0.2.2", "2001:db8::2")) {
		t.Errorf("neighbors %v", p.Neighbors)
	}
	if len(p.NeighborPrefixes) != 1 || p.NeighborPrefixes[0] != netip.MustParsePrefix("10.99.0.0/24") {
		t.Errorf("dynamic %v", p.NeighborPrefixes)
	}
	if !slices.Equal(p.Ports, []uint16{179, 1790, 11179}) {
		t.Errorf("ports %v", p.Ports)
	}
}
