package config

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Playbook turns the signals it matches into rules ([[playbook]]): the
// first step's rules when an incident opens, the next step's when the
// attack goes on, and none once it has ended.
//
// A signal matches when every condition set here holds: its source is one
// of Sources, its protocol one of Protocols, one of its destination ports
// one of DstPorts, its rates at least MinPPS and MinBPS, its confidence at
// least MinConfidence, its target inside one of Prefixes; and it carries
// every field the templates use ({protocol}, {dst_ports}, {src_ports},
// {tcp_flags}).
type Playbook struct {
	Name          string
	Sources       []string // names of [[source]]s; empty: every source
	Protocols     []string // lower case; empty: any
	DstPorts      []uint16 // empty: any
	MinPPS        uint64
	MinBPS        uint64
	MinConfidence float64
	Prefixes      []netip.Prefix // empty: any target
	// Shadow computes and records what the playbook would do (each rule
	// checked by the admission gate as a write would be) and writes
	// nothing.
	Shadow bool
	// QuietAfter is how long without a signal means the attack ended (0,
	// "never" in the file: only a signal of state end ends it, and the
	// rules' TTL is extended on the clock meanwhile, for detectors that
	// report an attack once); HoldDown how long the rules stay after it
	// ended.
	QuietAfter time.Duration
	HoldDown   time.Duration
	Steps      []PlaybookStep
}

// PlaybookStep is one step of escalation: its rules replace the previous
// step's (make-before-break).
type PlaybookStep struct {
	Rules []RuleTemplate
	// TTL of the step's rules, extended while signals keep coming.
	TTL time.Duration
	// EscalateAfter and EscalateSignals move the incident to the next
	// step after this long in this step, or after this many signals in
	// it, while the attack goes on (0: not by this measure).
	EscalateAfter   time.Duration
	EscalateSignals int
}

// Incidents bounds the playbook engine's incidents ([incidents]).
type Incidents struct {
	// MaxOpen caps the incidents open at once: a signal that would open
	// one more is refused.
	MaxOpen int
	// MaxTimeline caps the entries of one incident's timeline; beyond it
	// entries are counted, not kept.
	MaxTimeline int
	// KeepEnded is how many ended incidents are kept for reading.
	KeepEnded int
}

// Defaults of [[playbook]] and [incidents].
const (
	DefaultQuietAfter   = 5 * time.Minute
	DefaultHoldDown     = 5 * time.Minute
	DefaultMaxOpen      = 10000
	DefaultMaxTimeline  = 100
	DefaultKeepEnded    = 1000
	maxPlaybookSteps    = 16
	maxTemplatesPerStep = 16
)

// Placeholders of rule templates.
const (
	PlaceTarget   = "{target}"    // the attacked prefix, e.g. 192.0.2.10/32
	PlaceProtocol = "{protocol}"  // the signal's protocol, e.g. udp
	PlaceDstPorts = "{dst_ports}" // the signal's destination ports, e.g. ==53 ==123
	PlaceSrcPorts = "{src_ports}" // the signal's source ports
	PlaceTCPFlags = "{tcp_flags}" // the signal's TCP flags, e.g. S
)

var placeholders = []string{PlaceTarget, PlaceProtocol, PlaceDstPorts, PlaceSrcPorts, PlaceTCPFlags}

// RuleTemplate is the text of a rule with placeholders, filled from a
// signal: a FlowSpec rule ("match destination {target} protocol
// {protocol} then discard") or a route ("route {target} then
// blackhole").
type RuleTemplate struct {
	Text string
}

// Values are what a template's placeholders are filled with.
type Values struct {
	Target   netip.Prefix
	Protocol string
	DstPorts []uint16
	SrcPorts []uint16
	TCPFlags string
}

// Uses reports whether t uses placeholder p (PlaceProtocol, ...).
func (t RuleTemplate) Uses(p string) bool { return strings.Contains(t.Text, p) }

// Render fills t with v and parses the result. A value that is not a
// plain word of the rule language (a protocol or TCP flags from a
// detector) is refused, so that a signal cannot add components or
// actions to a rule.
func (t RuleTemplate) Render(v Values) (string, flowspec.Rule, error) {
	var b strings.Builder
	rest := t.Text
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		rest = rest[i:]
		j := strings.IndexByte(rest, '}')
		if j < 0 {
			return "", flowspec.Rule{}, fmt.Errorf("unclosed placeholder in %q", t.Text)
		}
		name := rest[:j+1]
		rest = rest[j+1:]
		switch name {
		case PlaceTarget:
			if !v.Target.IsValid() {
				return "", flowspec.Rule{}, fmt.Errorf("no target for %s", name)
			}
			b.WriteString(v.Target.String())
		case PlaceProtocol:
			if !plainWord(v.Protocol, false) {
				return "", flowspec.Rule{}, fmt.Errorf("protocol %q is not a protocol name or number", v.Protocol)
			}
			b.WriteString(strings.ToLower(v.Protocol))
		case PlaceDstPorts, PlaceSrcPorts:
			ports := v.DstPorts
			if name == PlaceSrcPorts {
				ports = v.SrcPorts
			}
			if len(ports) == 0 {
				return "", flowspec.Rule{}, fmt.Errorf("the signal has no ports for %s", name)
			}
			for k, p := range ports {
				if k > 0 {
					b.WriteByte(' ')
				}
				b.WriteString("==")
				b.WriteString(strconv.Itoa(int(p)))
			}
		case PlaceTCPFlags:
			if !plainWord(v.TCPFlags, true) {
				return "", flowspec.Rule{}, fmt.Errorf("tcp flags %q are not TCP flags of the rule language (e.g. S, =S&!=A)", v.TCPFlags)
			}
			b.WriteString(v.TCPFlags)
		default:
			return "", flowspec.Rule{}, fmt.Errorf("unknown placeholder %s: use %s", name, strings.Join(placeholders, ", "))
		}
	}
	text := b.String()
	r, err := flowspec.Parse(text)
	if err != nil {
		return text, flowspec.Rule{}, err
	}
	if !r.IsValid() {
		return text, flowspec.Rule{}, fmt.Errorf("%q is not a complete rule: give a match and an action", text)
	}
	return text, r, nil
}

// plainWord reports whether s is one word of letters and digits (and,
// for TCP flags, the bitmask operators).
func plainWord(s string, flags bool) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-' && !flags:
		case flags && (c == '=' || c == '!' || c == '&'):
		default:
			return false
		}
	}
	return true
}

// Example is a signal's values a playbook might get, for checking its
// templates at load: a host in prefix (if valid, else in the playbook's
// first prefix, else 192.0.2.1/32), its first protocol (else udp) and
// port (else 53).
func (p Playbook) Example(prefix netip.Prefix) Values {
	v := Values{Target: netip.MustParsePrefix("192.0.2.1/32"), Protocol: "udp", DstPorts: []uint16{53}, SrcPorts: []uint16{53}, TCPFlags: "S"}
	if !prefix.IsValid() && len(p.Prefixes) > 0 {
		prefix = p.Prefixes[0]
	}
	if prefix.IsValid() {
		v.Target = netip.PrefixFrom(prefix.Addr(), prefix.Addr().BitLen())
	}
	if len(p.Protocols) > 0 {
		v.Protocol = p.Protocols[0]
	}
	if len(p.DstPorts) > 0 {
		v.DstPorts = p.DstPorts[:1]
	}
	return v
}

// rawPlaybook mirrors one [[playbook]] table.
type rawPlaybook struct {
	Name          string    `toml:"name"`
	Sources       []string  `toml:"sources"`
	Protocols     []string  `toml:"protocols"`
	DstPorts      []int64   `toml:"dst_ports"`
	MinPPS        int64     `toml:"min_pps"`
	MinBPS        int64     `toml:"min_bps"`
	MinConfidence float64   `toml:"min_confidence"`
	Prefixes      []string  `toml:"prefixes"`
	Shadow        bool      `toml:"shadow"`
	QuietAfter    string    `toml:"quiet_after"`
	HoldDown      string    `toml:"hold_down"`
	Steps         []rawStep `toml:"step"`
}

// rawStep mirrors one [[playbook.step]] table.
type rawStep struct {
	Rules           []string `toml:"rules"`
	RTBH            bool     `toml:"rtbh"`
	TTL             string   `toml:"ttl"`
	EscalateAfter   string   `toml:"escalate_after"`
	EscalateSignals int64    `toml:"escalate_signals"`
}

// rawIncidents mirrors [incidents].
type rawIncidents struct {
	MaxOpen     *int64 `toml:"max_open"`
	MaxTimeline *int64 `toml:"max_timeline"`
	KeepEnded   *int64 `toml:"keep_ended"`
}

// rtbhTemplate is the rule of a step with rtbh = true.
const rtbhTemplate = "route " + PlaceTarget + " then blackhole"

// playbooks validates [[playbook]] and [incidents]. Whether the templates
// stay inside their sources' scope is the admission gate's question
// (package playbook's Check, reported with Config.Problem).
func (v *validator) playbooks(f *file, c *Config) {
	bound := func(key string, p *int64, def, max int) int {
		switch {
		case p == nil:
			return def
		case *p < 1 || *p > int64(max):
			v.add(key, "%d is out of range: use 1 to %d (default %d)", *p, max, def)
			return def
		}
		return int(*p)
	}
	c.Incidents = Incidents{
		MaxOpen:     bound("incidents.max_open", f.Incidents.MaxOpen, DefaultMaxOpen, 1_000_000),
		MaxTimeline: bound("incidents.max_timeline", f.Incidents.MaxTimeline, DefaultMaxTimeline, 10_000),
		KeepEnded:   bound("incidents.keep_ended", f.Incidents.KeepEnded, DefaultKeepEnded, 100_000),
	}
	sources := map[string]bool{}
	for _, s := range c.Sources {
		sources[s.Name] = true
	}
	seen := map[string]bool{}
	for i, rp := range f.Playbooks {
		key := func(k string) string { return "playbook." + strconv.Itoa(i) + "." + k }
		p := Playbook{Name: rp.Name, Shadow: rp.Shadow, MinConfidence: rp.MinConfidence}
		switch {
		case rp.Name == "":
			v.add(key("name"), "missing: name the playbook, e.g. name = \"udp-flood\"; rules and incidents record it")
		case !validName(rp.Name):
			v.add(key("name"), "%q is not a valid name: use letters, digits, '-', '_' or '.'", rp.Name)
		case seen[rp.Name]:
			v.add(key("name"), "%q names two playbooks: give each its own name", rp.Name)
		}
		seen[rp.Name] = true
		for _, s := range rp.Sources {
			if !sources[s] {
				v.add(key("sources"), "%q is not a [[source]]: name one of the configured sources, or add a [[source]] with name = %q", s, s)
			}
		}
		p.Sources = rp.Sources
		for _, proto := range rp.Protocols {
			if !plainWord(proto, false) {
				v.add(key("protocols"), "%q is not a protocol name or number (e.g. \"udp\", \"17\")", proto)
				continue
			}
			p.Protocols = append(p.Protocols, strings.ToLower(proto))
		}
		for _, port := range rp.DstPorts {
			if port < 0 || port > 65535 {
				v.add(key("dst_ports"), "%d is not a port: use 0-65535", port)
				continue
			}
			p.DstPorts = append(p.DstPorts, uint16(port))
		}
		if rp.MinPPS < 0 || rp.MinBPS < 0 {
			v.add(key("min_pps"), "min_pps and min_bps are rates: use 0 or a positive number")
		} else {
			p.MinPPS, p.MinBPS = uint64(rp.MinPPS), uint64(rp.MinBPS)
		}
		if rp.MinConfidence < 0 || rp.MinConfidence > 1 || math.IsNaN(rp.MinConfidence) {
			v.add(key("min_confidence"), "%v is not a confidence: use 0 to 1", rp.MinConfidence)
		}
		for j, s := range rp.Prefixes {
			pfx, err := netip.ParsePrefix(s)
			if err != nil || pfx != pfx.Masked() {
				v.add(key("prefixes"), "entry %d, %q, is not a prefix without host bits, e.g. \"192.0.2.0/24\"", j+1, s)
				continue
			}
			p.Prefixes = append(p.Prefixes, pfx)
		}
		if rp.QuietAfter == "never" {
			p.QuietAfter = 0 // only an end signal ends the attack
		} else {
			p.QuietAfter = v.playbookDuration(key("quiet_after"), rp.QuietAfter, DefaultQuietAfter)
		}
		p.HoldDown = v.playbookDuration(key("hold_down"), rp.HoldDown, DefaultHoldDown)
		v.playbookSteps(key, rp, &p)
		c.Playbooks = append(c.Playbooks, p)
	}
}

// playbookDuration reads an optional positive duration.
func (v *validator) playbookDuration(key, s string, def time.Duration) time.Duration {
	if s == "" {
		return def
	}
	d, ok := parseDays(s)
	if !ok || d <= 0 {
		hint := ""
		if strings.HasSuffix(key, "quiet_after") {
			hint = `, or "never" (only an end signal ends the attack)`
		}
		v.add(key, "%q is not a positive duration such as \"5m\" or \"1h\"%s", s, hint)
		return def
	}
	return d
}

// playbookSteps validates the [[playbook.step]]s of rp into p.
func (v *validator) playbookSteps(key func(string) string, rp rawPlaybook, p *Playbook) {
	switch {
	case len(rp.Steps) == 0:
		v.add(key("step"), "missing: give at least one [[playbook.step]] with rules and a ttl")
		return
	case len(rp.Steps) > maxPlaybookSteps:
		v.add(key("step"), "%d steps, more than the %d a playbook may have", len(rp.Steps), maxPlaybookSteps)
		return
	}
	for j, rs := range rp.Steps {
		sk := func(k string) string { return key("step." + strconv.Itoa(j) + "." + k) }
		st := PlaybookStep{EscalateSignals: int(rs.EscalateSignals)}
		texts := rs.Rules
		if rs.RTBH {
			texts = append(slices.Clone(texts), rtbhTemplate)
		}
		switch {
		case len(texts) == 0:
			v.add(sk("rules"), "missing: give the step's rules, e.g. rules = [\"match destination {target} protocol {protocol} then discard\"], or rtbh = true")
		case len(texts) > maxTemplatesPerStep:
			v.add(sk("rules"), "%d rules, more than the %d a step may have", len(texts), maxTemplatesPerStep)
			texts = nil
		}
		matches := map[flowspec.Match]bool{}
		for k, text := range texts {
			t := RuleTemplate{Text: strings.TrimSpace(text)}
			if !t.Uses(PlaceTarget) {
				v.add(sk("rules"), "entry %d, %q, does not use {target}: a playbook's rules act on the attacked target, e.g. \"match destination {target} then discard\"", k+1, text)
				continue
			}
			_, r, err := t.Render(p.Example(netip.Prefix{}))
			if err != nil {
				v.add(sk("rules"), "entry %d, %q: %v", k+1, text, err)
				continue
			}
			if d, ok := r.Match.Destination(); !ok || d != p.Example(netip.Prefix{}).Target {
				v.add(sk("rules"), "entry %d, %q: the rule's destination must be {target} itself", k+1, text)
				continue
			}
			if matches[r.Match] {
				v.add(sk("rules"), "entry %d, %q, has the match of an earlier entry: one rule per match", k+1, text)
				continue
			}
			matches[r.Match] = true
			st.Rules = append(st.Rules, t)
		}
		if rs.TTL == "" {
			v.add(sk("ttl"), "missing: give the rules' ttl, e.g. ttl = \"10m\"; it is extended while signals keep coming")
		} else {
			st.TTL = v.playbookDuration(sk("ttl"), rs.TTL, 0)
			if st.TTL > 0 && st.TTL < p.QuietAfter+p.HoldDown {
				v.add(sk("ttl"), "%s is shorter than quiet_after + hold_down (%s): the rules would expire before the incident ends; raise ttl or shorten them",
					st.TTL, p.QuietAfter+p.HoldDown)
			}
		}
		if rs.EscalateAfter != "" {
			st.EscalateAfter = v.playbookDuration(sk("escalate_after"), rs.EscalateAfter, 0)
		}
		if rs.EscalateSignals < 0 || rs.EscalateSignals > 1<<31 {
			v.add(sk("escalate_signals"), "%d is not a count: use a positive number of signals, or leave it out", rs.EscalateSignals)
			st.EscalateSignals = 0
		}
		last := j == len(rp.Steps)-1
		if last && (st.EscalateAfter > 0 || st.EscalateSignals > 0) {
			v.add(sk("escalate_after"), "the last step has no step to escalate to: remove escalate_after and escalate_signals, or add a [[playbook.step]] after it")
		}
		if !last && st.EscalateAfter == 0 && st.EscalateSignals == 0 {
			v.add(sk("escalate_after"), "the steps after this one are never reached: set escalate_after or escalate_signals")
		}
		p.Steps = append(p.Steps, st)
	}
}
