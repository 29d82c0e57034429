package flowspec

import (
	"os"
	"strings"
	"testing"
)

// Every rule in SYNTAX.md's examples parses and is canonical.
func TestSyntaxDocExamples(t *testing.T) {
	b, err := os.ReadFile("SYNTAX.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	in := false
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		switch {
		case line == "```text":
			in = true
			continue
		case line == "```":
			in = false
			continue
		}
		if !in || !(strings.HasPrefix(line, "match ") || strings.HasPrefix(line, "ipv6-flowspec match ") || strings.HasPrefix(line, "route ")) {
			continue
		}
		n++
		r, err := Parse(line)
		if err != nil {
			t.Errorf("%s: %v", line, err)
			continue
		}
		if r.String() != line {
			t.Errorf("not canonical:\n doc:  %s\n ours: %s", line, r)
		}
	}
	if n < 30 {
		t.Fatalf("only %d examples found in SYNTAX.md", n)
	}
}
