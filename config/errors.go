package config

import (
	"fmt"
	"strings"
)

// Error is one problem in a configuration file.
type Error struct {
	File string
	Line int    // 0 when the line is not known
	Key  string // dotted key; array tables carry their index ("neighbor.0.asn")
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Key != "" {
		fmt.Fprintf(&b, ": %s", displayKey(e.Key))
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one file, in file order (problems
// without a known line last).
type Errors []*Error

func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// displayKey writes array indexes the way operators count them:
// "neighbor.0.asn" becomes "neighbor[1].asn".
func displayKey(k string) string {
	parts := strings.Split(k, ".")
	var b strings.Builder
	for i, p := range parts {
		if isIndex(p) && i > 0 {
			n := 0
			fmt.Sscan(p, &n)
			fmt.Fprintf(&b, "[%d]", n+1)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func stripIndexes(k string) string {
	parts := strings.Split(k, ".")
	out := parts[:0]
	for _, p := range parts {
		if !isIndex(p) {
			out = append(out, p)
		}
	}
	return strings.Join(out, ".")
}

// indexLines maps every key written in a TOML text to its line number. Keys
// under an array table get the element index ("neighbor.1.asn") and, for
// the first occurrence, the index-free form too. It is a line scanner, not
// a parser: it only has to be right for files that toml.Decode accepted.
func indexLines(text string) map[string]int {
	lines := map[string]int{}
	put := func(k string, n int) {
		if _, ok := lines[k]; !ok {
			lines[k] = n
		}
	}
	arrays := map[string]int{}
	table := ""
	for i, raw := range strings.Split(text, "\n") {
		n := i + 1
		l := strings.TrimSpace(raw)
		switch {
		case l == "" || l[0] == '#':
			continue
		case strings.HasPrefix(l, "[["):
			name := cleanKey(strings.TrimSuffix(strings.TrimPrefix(strings.SplitN(l, "]]", 2)[0], "[["), "]]"))
			full := name
			// A nested list of tables ([[playbook.step]]) belongs to the
			// latest entry of its parent list: "playbook.1.step.0".
			if j := strings.LastIndexByte(name, '.'); j > 0 {
				if n, ok := arrays[name[:j]]; ok && n > 0 {
					full = fmt.Sprintf("%s.%d.%s", name[:j], n-1, name[j+1:])
				}
			}
			idx := arrays[full]
			arrays[full]++
			table = fmt.Sprintf("%s.%d", full, idx)
			put(table, n)
			put(name, n)
		case l[0] == '[':
			table = cleanKey(strings.TrimPrefix(strings.SplitN(l, "]", 2)[0], "["))
			put(table, n)
		default:
			eq := strings.IndexByte(l, '=')
			if eq <= 0 {
				continue
			}
			k := cleanKey(l[:eq])
			if table != "" {
				k = table + "." + k
			}
			put(k, n)
			put(stripIndexes(k), n)
		}
	}
	return lines
}

func cleanKey(s string) string {
	parts := strings.Split(s, ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return strings.Join(parts, ".")
}
