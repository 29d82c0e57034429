package config

import (
	"strconv"
	"strings"
	"unicode"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// StaticRule is a [[rule]]: a rule the configuration declares. It is
// stored with actor "config", never expires, is reconciled like any other
// rule, changes with the file on reload, and cannot be changed or
// withdrawn through the API.
type StaticRule struct {
	Text   string // as written
	Rule   flowspec.Rule
	Sites  []string // empty: every site
	Reason string
}

// staticRuleFile is a [[rule]] as written.
type staticRuleFile struct {
	Text   string   `toml:"text"`
	Sites  []string `toml:"sites"`
	Reason string   `toml:"reason"`
}

// maxStaticReason matches the store's limit on a rule's reason.
const maxStaticReason = 512

// staticRules validates the [[rule]] entries: rule text, one entry per
// match, site names and the reason. The guardrails are checked after
// loading (admit.CheckStatic; reported with Config.Problem).
func (v *validator) staticRules(rules []staticRuleFile, c *Config) {
	seen := map[flowspec.Match]int{}
	for i, f := range rules {
		key := func(k string) string { return "rule." + strconv.Itoa(i) + "." + k }
		text := strings.TrimSpace(f.Text)
		if text == "" {
			v.add(key("text"), "missing: give the rule, e.g. text = \"match destination 203.0.113.7/32 protocol udp then discard\"")
			continue
		}
		r, err := flowspec.Parse(text)
		if err != nil {
			v.add(key("text"), "%v", err)
			continue
		}
		if !r.IsValid() {
			v.add(key("text"), "%q is not a complete rule: give a match and an action", text)
			continue
		}
		if j, dup := seen[r.Match]; dup {
			v.add(key("text"), "the match of %q is declared twice (also rule %d): one rule per match", text, j+1)
			continue
		}
		seen[r.Match] = i
		for j, s := range f.Sites {
			if s == "" || strings.TrimSpace(s) != s || len(s) > 128 || !printable(s) {
				v.add(key("sites"), "site %d (%q) is not a site name: printable, no surrounding spaces, at most 128 bytes", j+1, s)
			}
		}
		if len(f.Reason) > maxStaticReason || !printable(f.Reason) {
			v.add(key("reason"), "must be printable text on one line, at most %d bytes", maxStaticReason)
		}
		c.Rules = append(c.Rules, StaticRule{Text: text, Rule: r, Sites: f.Sites, Reason: f.Reason})
	}
}

func printable(s string) bool {
	for _, c := range s {
		if !unicode.IsPrint(c) || c == unicode.ReplacementChar {
			return false
		}
	}
	return true
}
