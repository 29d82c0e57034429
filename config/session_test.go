package config

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

const full = minimal + `
[[neighbor]]
address = "127.0.0.2"
asn = 65001
port = 1790
local_address = "127.0.0.1"
families = ["ipv4-flowspec", "ipv4-unicast", "ipv6-unicast"]
passive = true
description = "edge"
hold_time = "30s"
keepalive_interval = "5s"
multihop_ttl = 2
password_env = "RK_TEST_PW"
graceful_restart = true
restart_time = "60s"
connect_retry = "10s"
max_prefixes = 500

[[neighbor]]
address = "2001:db8::2"
asn = 65002
password_file = "PWFILE"
graceful_restart = true

[[peer_group]]
name = "edge"
asn = 65010
families = ["ipv4-flowspec"]
password = "s3cret"
max_prefixes = 0

[[dynamic_neighbor]]
prefix = "10.0.0.0/24"
peer_group = "edge"

[rtbh]
next_hop_ipv4 = "192.0.2.66"
next_hop_ipv6 = "2001:db8::66"

[guardrails]
safelist = ["192.0.2.0/24", "2001:db8:ffff::/48", "198.51.100.1"]
require_ttl = true
default_ttl = "30m"
max_ttl = "24h"
allow_never_expire = true
allow_no_destination = true
max_active_rules = 1000
max_rules_per_destination = 5
max_new_rules_per_minute = 60

[guardrails.prefix_lengths]
ipv4_flowspec = [16, 32]
ipv4_unicast = [24, 32]
`

func TestEveryKnob(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RK_TEST_PW", "from-env")
	cfg, err := Parse("full.toml", []byte(strings.Replace(full, "PWFILE", pw, 1)))
	if err != nil {
		t.Fatal(err)
	}
	n := cfg.Neighbors[0]
	want := Neighbor{Address: netip.MustParseAddr("127.0.0.2"), Port: 1790, LocalAddress: netip.MustParseAddr("127.0.0.1"), Passive: true,
		Session: Session{ASN: 65001, Families: []flowspec.Family{flowspec.IPv4, flowspec.IPv4Unicast, flowspec.IPv6Unicast},
			HoldTime: 30 * time.Second, KeepaliveInterval: 5 * time.Second, MultihopTTL: 2, Password: "from-env",
			GracefulRestart: true, RestartTime: 60 * time.Second, ConnectRetry: 10 * time.Second, MaxPrefixes: 500, Description: "edge"}}
	if !reflect.DeepEqual(n, want) {
		t.Errorf("neighbor 1:\n got  %+v\n want %+v", n, want)
	}
	if n := cfg.Neighbors[1]; n.Password != "from-file" || n.RestartTime != DefaultRestartTime || n.Port != 179 || n.ConnectRetry != DefaultConnectRetry || n.MaxPrefixes != DefaultMaxPrefixes ||
		!reflect.DeepEqual(n.Families, []flowspec.Family{flowspec.IPv4, flowspec.IPv6}) {
		t.Errorf("neighbor 2: %+v", n)
	}
	if len(cfg.PeerGroups) != 1 || cfg.PeerGroups[0].Name != "edge" || cfg.PeerGroups[0].Password != "s3cret" || cfg.PeerGroups[0].ASN != 65010 || cfg.PeerGroups[0].MaxPrefixes != 0 {
		t.Errorf("peer groups: %+v", cfg.PeerGroups)
	}
	if w := strings.Join(cfg.Warnings(), "\n"); !strings.Contains(w, `peer group "edge" has max_prefixes = 0`) || strings.Contains(w, "neighbor 127.0.0.2 has max_prefixes") {
		t.Errorf("warnings about max_prefixes: %s", w)
	}
	if len(cfg.DynamicNeighbors) != 1 || cfg.DynamicNeighbors[0] != (DynamicNeighbor{netip.MustParsePrefix("10.0.0.0/24"), "edge"}) {
		t.Errorf("dynamic: %+v", cfg.DynamicNeighbors)
	}
	if cfg.RTBH.NextHopIPv4 != netip.MustParseAddr("192.0.2.66") || cfg.RTBH.NextHopIPv6 != netip.MustParseAddr("2001:db8::66") {
		t.Errorf("rtbh: %+v", cfg.RTBH)
	}
	g := cfg.Guardrails
	wantG := Guardrails{
		Safelist:   []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8:ffff::/48"), netip.MustParsePrefix("198.51.100.1/32")},
		RequireTTL: true, DefaultTTL: 30 * time.Minute, MaxTTL: 24 * time.Hour, AllowNeverExpire: true, AllowNoDestination: true,
		MaxActiveRules: 1000, MaxRulesPerDestination: 5, MaxNewRulesPerMinute: 60,
		PrefixLengths: map[flowspec.Family]Range{flowspec.IPv4: {Min: 16, Max: 32}, flowspec.IPv4Unicast: {Min: 24, Max: 32}},
		Protected: Protected{Own: []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("127.0.0.1")},
			Neighbors:        []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("2001:db8::2")},
			NeighborPrefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}, Ports: []uint16{179, 1790}},
	}
	if !reflect.DeepEqual(g, wantG) {
		t.Errorf("guardrails:\n got  %+v\n want %+v", g, wantG)
	}
}

func TestRTBHDefaults(t *testing.T) {
	cfg, err := Parse("m.toml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RTBH.NextHopIPv4 != DefaultNextHopIPv4 || cfg.RTBH.NextHopIPv6 != DefaultNextHopIPv6 {
		t.Errorf("rtbh defaults: %+v", cfg.RTBH)
	}
	if g := cfg.Guardrails; len(g.PrefixLengths) != 0 {
		t.Errorf("prefix lengths without [guardrails] prefix_lengths: %v (the defaults are guard.DefaultPrefixLengths)", g.PrefixLengths)
	}
}

// Each bad value of the new sections fails with the key and its line.
func TestSessionErrors(t *testing.T) {
	nb := minimal + "[[neighbor]]\naddress = \"127.0.0.2\"\nasn = 1\n" // neighbor keys start on line 8
	cases := []struct {
		name, text, key string
		line            int
		msg             string
	}{
		{"bad hold", nb + "hold_time = \"1s\"\n", "neighbor.0.hold_time", 8, "3s..65535s"},
		{"keepalive >= hold", nb + "hold_time = \"9s\"\nkeepalive_interval = \"9s\"\n", "neighbor.0.keepalive_interval", 9, "shorter than the hold time"},
		{"bad multihop", nb + "multihop_ttl = 300\n", "neighbor.0.multihop_ttl", 8, "TTL"},
		{"two passwords", nb + "password = \"a\"\npassword_env = \"B\"\n", "neighbor.0.password", 8, "only one"},
		{"password env unset", nb + "password_env = \"RK_SURELY_UNSET\"\n", "neighbor.0.password_env", 8, "not set"},
		{"password file missing", nb + "password_file = \"/nonexistent/pw\"\n", "neighbor.0.password_file", 8, "cannot read"},
		{"password too long", nb + "password = \"" + strings.Repeat("x", 81) + "\"\n", "neighbor.0.password", 8, "limit is 80"},
		{"restart without gr", nb + "restart_time = \"60s\"\n", "neighbor.0.restart_time", 8, "graceful_restart = true"},
		{"restart too long", nb + "graceful_restart = true\nrestart_time = \"2h\"\n", "neighbor.0.restart_time", 9, "4095s"},
		{"negative max prefixes", nb + "max_prefixes = -1\n", "neighbor.0.max_prefixes", 8, "0 for no limit"},
		{"connect retry too short", nb + "connect_retry = \"1s\"\n", "neighbor.0.connect_retry", 8, "2s..1h"},
		{"family twice", nb + "families = [\"ipv4-unicast\", \"ipv4-unicast\"]\n", "neighbor.0.families", 8, "twice"},
		{"unknown family", nb + "families = [\"l2vpn-evpn\"]\n", "neighbor.0.families", 8, "ipv4-unicast"},
		{"passive without listener", "[bgp]\nasn = 1\nrouter_id = \"1.1.1.1\"\nlisten_port = -1\n[[neighbor]]\naddress = \"127.0.0.2\"\nasn = 2\npassive = true\n", "neighbor.0.passive", 8, "listen_port"},
		{"peer group without name", minimal + "[[peer_group]]\nasn = 1\n", "peer_group.0.name", 5, "missing"},
		{"peer group twice", minimal + "[[peer_group]]\nname = \"a\"\nasn = 1\n[[peer_group]]\nname = \"a\"\nasn = 1\n", "peer_group.1.name", 9, "twice"},
		{"peer group without asn", minimal + "[[peer_group]]\nname = \"a\"\n", "peer_group.0.asn", 5, "missing"},
		{"dynamic unknown group", minimal + "[[dynamic_neighbor]]\nprefix = \"10.0.0.0/8\"\npeer_group = \"nope\"\n", "dynamic_neighbor.0.peer_group", 7, "no [[peer_group]]"},
		{"dynamic host bits", minimal + "[[peer_group]]\nname = \"a\"\nasn = 1\n[[dynamic_neighbor]]\nprefix = \"10.0.0.1/8\"\npeer_group = \"a\"\n", "dynamic_neighbor.0.prefix", 9, "host bits"},
		{"dynamic bad prefix", minimal + "[[dynamic_neighbor]]\nprefix = \"ten\"\n", "dynamic_neighbor.0.prefix", 6, "not a prefix"},
		{"rtbh v4 not v4", minimal + "[rtbh]\nnext_hop_ipv4 = \"100::1\"\n", "rtbh.next_hop_ipv4", 6, "IPv4"},
		{"rtbh v6 bad", minimal + "[rtbh]\nnext_hop_ipv6 = \"nope\"\n", "rtbh.next_hop_ipv6", 6, "IPv6"},
		{"safelist bad", minimal + "[guardrails]\nsafelist = [\"10.0.0.0/33\"]\n", "guardrails.safelist", 6, "not a prefix"},
		{"safelist host bits", minimal + "[guardrails]\nsafelist = [\"10.0.0.1/8\"]\n", "guardrails.safelist", 6, "host bits"},
		{"max ttl bad", minimal + "[guardrails]\nmax_ttl = \"forever\"\n", "guardrails.max_ttl", 6, "duration"},
		{"negative quota", minimal + "[guardrails]\nmax_active_rules = -1\n", "guardrails.max_active_rules", 6, "0 for no limit"},
		{"bad range", minimal + "[guardrails.prefix_lengths]\nipv4_unicast = [32, 24]\n", "guardrails.prefix_lengths.ipv4_unicast", 6, "range"},
		{"range too long", minimal + "[guardrails.prefix_lengths]\nipv6_unicast = [64, 129]\n", "guardrails.prefix_lengths.ipv6_unicast", 6, "0..128"},
		{"unknown guardrail", minimal + "[guardrails]\nsafe_list = []\n", "guardrails.safe_list", 6, "unknown key"},
		{"unknown rtbh key", minimal + "[rtbh]\nnexthop = \"1.2.3.4\"\n", "rtbh.nexthop", 6, "unknown key"},
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
				if e.Key == c.key {
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
			if !strings.Contains(hit.Error(), c.msg) {
				t.Errorf("message %q lacks %q", hit.Error(), c.msg)
			}
		})
	}
}

// Every problem of a file is reported at once.
func TestAllErrorsAtOnce(t *testing.T) {
	text := "[bgp]\nasn = 0\nrouter_id = \"x\"\n[[neighbor]]\naddress = \"nope\"\nhold_time = \"1s\"\n[rtbh]\nnext_hop_ipv4 = \"::\"\n"
	_, err := Parse("f.toml", []byte(text))
	var es Errors
	if !errors.As(err, &es) || len(es) < 5 {
		t.Fatalf("want at least 5 errors, got %v", err)
	}
}
