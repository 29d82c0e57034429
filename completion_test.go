package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// complete runs the completion script in a real bash for the command
// line words (the last one being completed) and returns what it offers.
func complete(t *testing.T, script string, words ...string) []string {
	t.Helper()
	var quoted []string
	for _, w := range append([]string{"ribkeeper"}, words...) {
		quoted = append(quoted, "'"+strings.ReplaceAll(w, "'", `'\''`)+"'")
	}
	prog := "source " + script + "\nCOMP_WORDS=(" + strings.Join(quoted, " ") + ")\nCOMP_CWORD=" + strconv.Itoa(len(words)) +
		"\n_ribkeeper\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
	cmd := exec.Command("bash", "--norc", "--noprofile", "-c", prog)
	cmd.Dir = filepath.Dir(script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("completing %q: %v\n%s", words, err, stderr.String())
	}
	return strings.Fields(string(out))
}

func completionScript(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("bash is needed to test the completion script")
		}
		t.Skip("no bash")
	}
	code, out, errOut := runMain(t, "completion", "bash")
	if code != 0 || errOut != "" {
		t.Fatalf("completion bash: exit %d, %q", code, errOut)
	}
	p := filepath.Join(t.TempDir(), "ribkeeper.bash")
	if err := os.WriteFile(p, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// dispatched returns the commands run's switch dispatches on, read from
// main.go, so that a command added there and not to a table fails.
func dispatched(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "run" {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			cc, ok := n.(*ast.CaseClause)
			if !ok {
				return true
			}
			for _, e := range cc.List {
				if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					cmds = append(cmds, s)
				}
			}
			return true
		})
	}
	if len(cmds) < 10 {
		t.Fatalf("found %d commands in run's switch: the scan is broken", len(cmds))
	}
	return cmds
}

// The completion offers every command run dispatches, every subcommand
// and flag of the usage, and the values of flags that have a fixed set.
func TestCompletionCompletesEveryCommand(t *testing.T) {
	script := completionScript(t)
	top := complete(t, script, "")
	for _, cmd := range dispatched(t) {
		if strings.HasPrefix(cmd, "-") || cmd == "help" {
			continue
		}
		if !slices.Contains(top, cmd) {
			t.Errorf("ribkeeper <TAB> does not offer %q: %q", cmd, top)
		}
	}

	// Each command of the usage: its words, then its flags (as its own
	// --help lists them, and as its synopsis shows them).
	_, usageText, _ := runMain(t, "--help")
	line := regexp.MustCompile(`(?m)^  ribkeeper ((?:[a-z][a-z-]*)(?: [a-z][a-z-]*)?)(.*)$`)
	helpFlag := regexp.MustCompile(`(?m)^  (--[a-z-]+)`)
	synFlag := regexp.MustCompile(`--[a-z-]+`)
	n := 0
	for _, m := range line.FindAllStringSubmatch(usageText, -1) {
		words := strings.Fields(m[1])
		n++
		if len(words) == 2 {
			if got := complete(t, script, words[0], ""); !slices.Contains(got, words[1]) {
				t.Errorf("ribkeeper %s <TAB> does not offer %q: %q", words[0], words[1], got)
			}
		}
		synopsis, _, _ := strings.Cut(m[2], "  ") // the description follows
		want := synFlag.FindAllString(synopsis, -1)
		_, out, errOut := runMain(t, append(slices.Clone(words), "--help")...)
		for _, f := range helpFlag.FindAllStringSubmatch(out+errOut, -1) {
			want = append(want, f[1])
		}
		got := complete(t, script, append(slices.Clone(words), "--")...)
		for _, f := range want {
			if !slices.Contains(got, f) {
				t.Errorf("ribkeeper %s --<TAB> does not offer %s: %q", m[1], f, got)
			}
		}
	}
	if n < 20 {
		t.Fatalf("found %d commands in the usage: the scan is broken", n)
	}
}

func TestCompletionValues(t *testing.T) {
	script := completionScript(t)
	dir := filepath.Dir(script)
	os.WriteFile(filepath.Join(dir, "rules.txt"), nil, 0o600)
	for _, c := range []struct {
		words []string
		want  []string
	}{
		{[]string{"rule", "list", "--state", ""}, []string{"active", "withdrawing", "withdrawn", "expired"}},
		{[]string{"rule", "list", "--order", "p"}, []string{"precedence"}},
		{[]string{"rule", "add", "--file", "rul"}, []string{"rules.txt"}},
		{[]string{"check-config", "--config", "rib"}, []string{"ribkeeper.bash"}},
		{[]string{"flowspec", "decode", "--family", ""}, []string{"ipv4", "ipv6"}},
		{[]string{"ru"}, []string{"rule", "route"}[:1]},
		{[]string{"rule", "w"}, []string{"withdraw"}},
		// Flags and their values before the cursor do not change the command.
		{[]string{"rule", "list", "--state", "active", "--j"}, []string{"--json"}},
		{[]string{"--socket", "x.sock", "rule", "list", "--j"}, []string{"--json"}},
		{[]string{"rule", "add", "match destination 192.0.2.1/32 then discard", "--dr"}, []string{"--dry-run"}},
		{[]string{"rule", "add", "--ttl", ""}, nil},
	} {
		if got := complete(t, script, c.words...); !slices.Equal(got, c.want) {
			t.Errorf("ribkeeper %s<TAB> offers %q, want %q", strings.Join(c.words, " "), got, c.want)
		}
	}
}
