package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ribkeeper/ribkeeper/cli"
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

// flowspec encode prints one line per attribute value the speaker sends,
// including the IPv6-address-specific extended communities and, for a
// route, the communities and the next hop. The expected bytes are written
// by hand from RFC 8955 (NLRI, 0x8006 traffic-rate 0), RFC 5701 and
// draft-ietf-idr-flowspec-redirect-ip (0x000c + IPv6 address + 2 zero
// octets), and RFC 1997/7999 (65535:666 = ffff029a, NO_EXPORT ffffff01).
func TestFlowspecEncode(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"match destination 10.21.4.0/24 port true then discard"}, `family: ipv4-flowspec
nlri: 0801180a1504048700
extended-community: 8006000000000000 (discard)
text: match destination 10.21.4.0/24 port true then discard
`},
		{[]string{"match destination 2001:db8::/32 then redirect-ip 2001:db8::1 rate-limit 1000"}, `family: ipv6-flowspec
nlri: 0701200020010db8
extended-community: 80060000447a0000 (rate-limit 1000)
ipv6-extended-community: 000c20010db80000000000000000000000010000 (redirect-ip 2001:db8::1)
text: match destination 2001:db8::/32 then rate-limit 1000 redirect-ip 2001:db8::1
`},
		{[]string{"--family", "ipv6", "match protocol ==6 then ext6 0x00020000000000000000000000000000000000ab"}, `family: ipv6-flowspec
nlri: 03038106
ipv6-extended-community: 00020000000000000000000000000000000000ab (ext6 0x00020000000000000000000000000000000000ab)
text: ipv6-flowspec match protocol ==tcp then ext6 0x00020000000000000000000000000000000000ab
`},
		{[]string{"route 203.0.113.7/32 then blackhole community 64500:1"}, `family: ipv4-unicast
nlri: 20cb007107
community: fbf40001 (64500:1)
community: ffff029a (65535:666)
community: ffffff01 (65535:65281)
next-hop: each site's [rtbh] next_hop_ipv4 (the rule sets none)
text: route 203.0.113.7/32 then blackhole community 64500:1
`},
		{[]string{"route 2001:db8::7/128 then blackhole next-hop 2001:db8::66"}, `family: ipv6-unicast
nlri: 8020010db8000000000000000000000007
community: ffff029a (65535:666)
community: ffffff01 (65535:65281)
next-hop: 2001:db8::66
text: route 2001:db8::7/128 then blackhole next-hop 2001:db8::66
`},
	}
	for _, tt := range tests {
		code, out, errOut := runMain(t, append([]string{"flowspec", "encode"}, tt.args...)...)
		if code != 0 || out != tt.want {
			t.Errorf("flowspec encode %q: exit %d, stderr %q\n got:\n%s want:\n%s", tt.args, code, errOut, out, tt.want)
		}
	}
}

// flowspec decode reads what peers send, normalises what RFC 8955/8956
// let a decoder ignore, and says so; malformed input exits 1 naming the
// byte.
func TestFlowspecDecode(t *testing.T) {
	tests := []struct {
		args []string
		code int
		out  string
		err  string
	}{
		// The encoding ribkeeper sent before the true/false fix reads as
		// what BIRD and ExaBGP showed: port false.
		{[]string{"--family", "ipv4", "0801180a1504048000"}, 0, "match destination 10.21.4.0/24 port false\n", ""},
		{[]string{"--family", "ipv4", "08 01 18 0a 15 04 04 87 00"}, 0, "match destination 10.21.4.0/24 port true\n", ""},
		// A flow label in 2 octets (RFC 8956 §3.7 recommends 4).
		{[]string{"--family", "ipv6", "04 0d 91 30 39"}, 0, "match label ==12345\ncanonical nlri: 060da100003039 (normalised: this is what ribkeeper would send and how it keys the rule)\n", ""},
		// RFC 8956 §3.1: offset == length is malformed.
		{[]string{"--family", "ipv6", "03 01 30 30"}, 1, "", "malformed input at byte 3: destination: prefix offset 48 equals the prefix length"},
	}
	for _, tt := range tests {
		code, out, errOut := runMain(t, append([]string{"flowspec", "decode"}, tt.args...)...)
		if code != tt.code || out != tt.out || !strings.Contains(errOut, tt.err) {
			t.Errorf("flowspec decode %q: exit %d, stdout %q, stderr %q; want %d, %q, ~%q", tt.args, code, out, errOut, tt.code, tt.out, tt.err)
		}
	}
}

// check-config refuses a static rule that a guardrail refuses (package
// guard decides), naming the rule's key and line; require_ttl does not
// apply to static rules.
func TestCheckConfigStaticRuleGuardrails(t *testing.T) {
	bad := writeFile(t, `[bgp]
asn = 65000
router_id = "192.0.2.1"

[guardrails]
safelist = ["203.0.113.0/24"]
require_ttl = true

[[rule]]
text = "match destination 198.51.100.0/24 then discard"

[[rule]]
text = "match destination 203.0.113.7/32 then discard"
`)
	code, out, errOut := runMain(t, "check-config", "--config", bad)
	if code != 1 || out != "" || !strings.Contains(errOut, bad+":13: rule[2].text: ") || !strings.Contains(errOut, "guardrail safelist") ||
		strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Errorf("static rule in the safelist: exit %d, %q %q", code, out, errOut)
	}
}

// Static rules are permanent, but the protected addresses and the BGP
// sessions apply to them too: a file declaring a rule that would cut the
// appliance's sessions is refused, each such rule named with its line.
func TestCheckConfigStaticRuleProtected(t *testing.T) {
	bad := writeFile(t, `[bgp]
asn = 65000
router_id = "192.0.2.1"

[[neighbor]]
address = "192.0.2.2"
asn = 65001

[[rule]]
text = "match destination 198.51.100.0/24 protocol udp then discard"

[[rule]]
text = "match protocol tcp destination-port ==179 then discard"

[[rule]]
text = "route 192.0.2.2/32 then blackhole"
`)
	code, out, errOut := runMain(t, "check-config", "--config", bad)
	if code != 1 || out != "" || !strings.Contains(errOut, bad+":13: rule[2].text: ") || !strings.Contains(errOut, "guardrail bgp_session") ||
		!strings.Contains(errOut, bad+":16: rule[3].text: ") || !strings.Contains(errOut, "guardrail protected_address") ||
		strings.Count(strings.TrimSpace(errOut), "\n") != 1 {
		t.Errorf("static rules cutting BGP: exit %d, %q %q", code, out, errOut)
	}
}

// check-config warns (exit 0) about a neighbor without a router profile
// and refuses (exit 1) an unknown one.
func TestCheckConfigProfile(t *testing.T) {
	base := `[bgp]
asn = 65000
router_id = "192.0.2.1"

[[neighbor]]
address = "127.0.0.2"
asn = 65001
`
	code, out, errOut := runMain(t, "check-config", "--config", writeFile(t, base))
	if code != 0 || !strings.Contains(out, ": ok") || !strings.Contains(errOut, "warning: neighbor 127.0.0.2 has no profile") {
		t.Errorf("no profile: exit %d, stdout %q, stderr %q; want ok and a warning", code, out, errOut)
	}
	code, _, errOut = runMain(t, "check-config", "--config", writeFile(t, base+`profile = "frr"`+"\n"))
	if code != 0 || strings.Contains(errOut, "warning") {
		t.Errorf("profile frr: exit %d, stderr %q; want ok without a warning", code, errOut)
	}
	code, _, errOut = runMain(t, "check-config", "--config", writeFile(t, base+`profile = "cisco"`+"\n"))
	if code != 1 || !strings.Contains(errOut, `neighbor[1].profile: "cisco" is not a router profile: use one of bird, eos, exabgp, frr, generic, iosxr, junos`) {
		t.Errorf("unknown profile: exit %d, stderr %q", code, errOut)
	}
}

// `ribkeeper profiles` lists the profiles; with a rule it says which take
// it and why the others do not.
func TestProfilesCommand(t *testing.T) {
	code, out, _ := runMain(t, "profiles")
	for _, n := range []string{"junos", "iosxr", "eos", "frr", "bird", "exabgp", "generic"} {
		if code != 0 || !strings.Contains(out, n+" ") {
			t.Errorf("profiles: exit %d, lacks %s:\n%s", code, n, out)
		}
	}
	code, out, _ = runMain(t, "profiles", "match destination 192.0.2.0/24 port !=80 then discard")
	for _, want := range []string{"frr      held back: frr resets sessions on !=", "bird     sent", "iosxr    sent if among the first 3000"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("profiles RULE: exit %d, lacks %q:\n%s", code, want, out)
		}
	}
	if code, _, errOut := runMain(t, "profiles", "match nonsense"); code != 1 || errOut == "" {
		t.Errorf("profiles with a bad rule: exit %d, %q", code, errOut)
	}
}

// check-config refuses a playbook whose rules would fall outside its
// source's scope, with the key and line of the step; a reload would
// refuse the file the same way (loadChecked).
func TestCheckConfigPlaybookScope(t *testing.T) {
	bad := writeFile(t, `[bgp]
asn = 65000
router_id = "192.0.2.1"

[[source]]
name = "fnm"
kind = "gobgp"
prefixes = ["203.0.113.0/24"]
actions = ["discard"]

[[playbook]]
name = "ban"
[[playbook.step]]
rtbh = true
ttl = "1h"
`)
	code, out, errOut := runMain(t, "check-config", "--config", bad)
	if code != 1 || out != "" || !strings.Contains(errOut, bad+":13: playbook[1].step[1]: ") || !strings.Contains(errOut, `source "fnm" may not use action rtbh`) {
		t.Errorf("playbook outside its source's scope: exit %d, %q %q", code, out, errOut)
	}
	good := strings.Replace(string(must(os.ReadFile(bad))), `actions = ["discard"]`, `actions = ["discard", "rtbh"]`, 1)
	if code, out, errOut := runMain(t, "check-config", "--config", writeFile(t, good)); code != 0 || !strings.Contains(out, "1 sources, 1 playbooks") {
		t.Errorf("inside its scope: exit %d, %q %q", code, out, errOut)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Every client command the usage lists is dispatched to the client (its
// --help answers), none is "unknown": the dispatch is read from the
// client's command table (a merged "set" command was once left out).
func TestEveryClientCommandDispatched(t *testing.T) {
	for _, line := range strings.Split(strings.TrimSpace(cli.Synopsis()), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		var out, errOut strings.Builder
		run([]string{f[1], "--help"}, &out, &errOut)
		if strings.Contains(errOut.String(), "unknown command") {
			t.Errorf("%q: %s", f[1], errOut.String())
		}
	}
}
