package config

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

const playbookBase = sourcesBase + `
[[source]]
name = "fnm"
kind = "gobgp"
prefixes = ["192.0.2.0/24"]
`

func TestPlaybooks(t *testing.T) {
	c, err := Parse("t.toml", []byte(playbookBase+`
[incidents]
max_open = 50

[[playbook]]
name = "udp-flood"
sources = ["fnm"]
protocols = ["UDP"]
dst_ports = [53, 123]
min_pps = 10000
min_confidence = 0.5
prefixes = ["192.0.2.0/24"]
hold_down = "2m"

[[playbook.step]]
rules = ["match destination {target} protocol {protocol} destination-port {dst_ports} then rate-limit 125000"]
ttl = "10m"
escalate_after = "1m"
escalate_signals = 20

[[playbook.step]]
rtbh = true
ttl = "30m"

[[playbook]]
name = "any"
shadow = true
[[playbook.step]]
rules = ["match destination {target} then discard"]
ttl = "1h"
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Playbooks) != 2 || c.Incidents.MaxOpen != 50 || c.Incidents.MaxTimeline != DefaultMaxTimeline {
		t.Fatalf("playbooks = %+v incidents = %+v", c.Playbooks, c.Incidents)
	}
	p := c.Playbooks[0]
	if p.Protocols[0] != "udp" || p.MinConfidence != 0.5 || p.HoldDown != 2*time.Minute || p.QuietAfter != DefaultQuietAfter || len(p.Steps) != 2 {
		t.Fatalf("playbook = %+v", p)
	}
	if s := p.Steps[0]; s.EscalateAfter != time.Minute || s.EscalateSignals != 20 || s.TTL != 10*time.Minute {
		t.Fatalf("step 0 = %+v", s)
	}
	text, r, err := p.Steps[1].Rules[0].Render(Values{Target: netip.MustParsePrefix("192.0.2.7/32")})
	if err != nil || text != "route 192.0.2.7/32 then blackhole" || !r.IsValid() {
		t.Fatalf("rtbh step renders %q %v", text, err)
	}
	text, _, err = p.Steps[0].Rules[0].Render(Values{Target: netip.MustParsePrefix("192.0.2.7/32"), Protocol: "udp", DstPorts: []uint16{53, 123}})
	if err != nil || text != "match destination 192.0.2.7/32 protocol udp destination-port ==53 ==123 then rate-limit 125000" {
		t.Fatalf("render = %q, %v", text, err)
	}
	// A detector's protocol cannot add components or actions.
	if _, _, err := p.Steps[0].Rules[0].Render(Values{Target: netip.MustParsePrefix("192.0.2.7/32"), Protocol: "udp then discard", DstPorts: []uint16{53}}); err == nil {
		t.Fatal("a protocol with spaces was rendered")
	}
	if c.Playbooks[1].Shadow != true {
		t.Fatal("shadow not read")
	}
}

func TestPlaybookErrors(t *testing.T) {
	step := "\n[[playbook.step]]\nrules = [\"match destination {target} then discard\"]\nttl = \"1h\"\n"
	cases := []struct{ body, key, want string }{
		{"[[playbook]]\nname = \"a\"\nsources = [\"nope\"]" + step, "playbook.0.sources", "not a [[source]]"},
		{"[[playbook]]\nname = \"a\"", "playbook.0.step", "at least one [[playbook.step]]"},
		{"[[playbook]]\nname = \"a\"\n[[playbook.step]]\nrules = [\"match destination 192.0.2.1/32 then discard\"]\nttl = \"1h\"", "playbook.0.step.0.rules", "does not use {target}"},
		{"[[playbook]]\nname = \"a\"\n[[playbook.step]]\nrules = [\"match destination {target} then explode\"]\nttl = \"1h\"", "playbook.0.step.0.rules", "explode"},
		{"[[playbook]]\nname = \"a\"\n[[playbook.step]]\nrules = [\"match destination {target} then discard\"]\nttl = \"1h\"\n[[playbook.step]]\nrtbh = true\nttl = \"1h\"", "playbook.0.step.0.escalate_after", "never reached"},
		{"[[playbook]]\nname = \"a\"\n[[playbook.step]]\nrules = [\"match destination {target} then discard\"]\nttl = \"1h\"\nescalate_after = \"1m\"", "playbook.0.step.0.escalate_after", "last step"},
		{"[[playbook]]\nname = \"a\"\n[[playbook.step]]\nrules = [\"match destination {target} then discard\"]\nttl = \"1m\"", "playbook.0.step.0.ttl", "shorter than quiet_after + hold_down"},
		{"[[playbook]]\nname = \"a\"\nmin_confidence = 2.5" + step, "playbook.0.min_confidence", "not a confidence"},
		{"[[playbook]]\nname = \"a\"" + step + "[[playbook]]\nname = \"b\"" + step + "bogus = 1\n", "playbook.1.step.0.bogus", "unknown key"},
		{"[incidents]\nmax_open = 0\n", "incidents.max_open", "out of range"},
	}
	for _, tc := range cases {
		text := playbookBase + tc.body
		_, err := Parse("t.toml", []byte(text))
		if err == nil {
			t.Errorf("%s: accepted", tc.body)
			continue
		}
		es := err.(Errors)
		found := false
		for _, e := range es {
			if e.Key == tc.key && strings.Contains(e.Msg, tc.want) {
				found = true
				// The line named is the key's own.
				if line := strings.Split(text, "\n")[e.Line-1]; e.Line == 0 || !strings.Contains(line, lastPart(tc.key)) && !strings.HasPrefix(line, "[[playbook") {
					t.Errorf("%s: line %d is %q", tc.key, e.Line, line)
				}
			}
		}
		if !found {
			t.Errorf("%s: errors %v, want %s: %s", tc.body, err, tc.key, tc.want)
		}
	}
}

func lastPart(k string) string {
	if k == "playbook.0.step" {
		return "[[playbook]]"
	}
	return k[strings.LastIndexByte(k, '.')+1:]
}
