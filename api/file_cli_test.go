package api_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/cli"
	"github.com/ribkeeper/ribkeeper/store"
)

// startFileServer serves a real SQLite store through a gate that takes at
// most maxBatch rules per batch (and the test server's 4096-byte bodies).
func startFileServer(t *testing.T, maxBatch int) (*testServer, *store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "rk.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return startServerGate(t, st, newGate(st, admit.Config{Limits: admit.Limits{MaxBatchRules: maxBatch}})), st
}

// ruleFile writes n distinct rules, with blank lines and comments, and
// returns the path and the texts.
func ruleFile(t *testing.T, n int, extra ...string) (string, []string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# blocked by ticket 7\n\n")
	var texts []string
	for i := range n {
		text := fmt.Sprintf("match destination 198.51.%d.%d/32 protocol udp source-port 53 then discard", 100+i/250, i%250+1)
		texts = append(texts, text)
		fmt.Fprintf(&b, "  %s  \n", text)
		if i%10 == 0 {
			b.WriteString("   # a comment\n\n")
		}
	}
	for _, e := range extra {
		b.WriteString(e + "\n")
	}
	path := filepath.Join(t.TempDir(), "rules.txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, texts
}

// activeCount counts the active rules nobody asked to withdraw.
func activeCount(t *testing.T, st *store.Store) int {
	t.Helper()
	rules, err := st.List(context.Background(), store.Active)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range rules {
		if !r.WithdrawRequested {
			n++
		}
	}
	return n
}

// rule add --file stores every line in batches the daemon accepts: the
// 413s of a batch over max_batch_rules and over the body limit say what
// fits and the CLI splits by it; rule withdraw --file - withdraws them.
func TestCLIAddWithdrawFile(t *testing.T) {
	ts, st := startFileServer(t, 9)
	path, texts := ruleFile(t, 60)

	code, out, errOut := runCLI(t, ts.sock, "rule", "add", "--file", path, "--ttl", "2h", "--reason", "bulk")
	if code != 0 {
		t.Fatalf("rule add --file: exit %d, stderr %q", code, errOut)
	}
	if ids := strings.Fields(out); len(ids) != len(texts) {
		t.Errorf("stdout has %d ids, want %d:\n%s", len(ids), len(texts), out)
	}
	if n := activeCount(t, st); n != len(texts) {
		t.Errorf("%d active rules, want %d", n, len(texts))
	}
	// Batches of at most 9 rules: the progress names each one.
	if !strings.Contains(errOut, path+": 9 of 60 rules stored (batch 1, 9 rules)\n") ||
		!strings.Contains(errOut, path+": 60 of 60 rules stored (batch 7, 6 rules)\n") ||
		!strings.HasSuffix(errOut, "stored 60 rules from "+path+" in 7 batches\n") {
		t.Errorf("progress on stderr:\n%s", errOut)
	}
	r, err := st.Get(context.Background(), 1)
	if err != nil || r.Reason != "bulk" || r.ExpiresAt.IsZero() {
		t.Errorf("rule 1 %+v, %v: want the flags applied", r, err)
	}

	// The same file again updates, it does not duplicate; stdin works.
	var stdout, stderr bytes.Buffer
	in, _ := os.ReadFile(path)
	code = cli.RunWithStdin(context.Background(), cli.NewClient(ts.sock, 0), bytes.NewReader(in),
		[]string{"rule", "withdraw", "--file", "-"}, &stdout, &stderr)
	if code != 0 || strings.Count(stdout.String(), ": withdrawing\n") != len(texts) ||
		!strings.Contains(stderr.String(), "stdin: 9 of 60 rules withdrawn (batch 1, 9 rules)\n") ||
		!strings.HasSuffix(stderr.String(), "withdrew 60 rules from stdin in 7 batches; 0 lines matched no active rule\n") {
		t.Fatalf("rule withdraw --file -: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if n := activeCount(t, st); n != 0 {
		t.Errorf("%d active rules after the withdrawal, want 0", n)
	}

	// 60 rules are more than the test server's 4096-byte body: its 413
	// body_too_large says so, and the batches shrink to fit.
	ts, st = startFileServer(t, 1000)
	code, out, errOut = runCLI(t, ts.sock, "rule", "add", "--file", path)
	if code != 0 || len(strings.Fields(out)) != 60 || activeCount(t, st) != 60 {
		t.Fatalf("rule add --file over a 4096-byte body limit: exit %d, stderr %q", code, errOut)
	}
	if !strings.Contains(errOut, path+": 60 of 60 rules stored (batch 2, ") || strings.Contains(errOut, "(batch 3, ") {
		t.Errorf("want 2 batches of at most 4096 bytes:\n%s", errOut)
	}
	// Withdrawing half of them (and lines that match nothing) the same way.
	half, _ := ruleFile(t, 30, "match destination 192.0.2.99/32 then discard")
	code, out, errOut = runCLI(t, ts.sock, "rule", "withdraw", "--file", half)
	if code != 0 || strings.Count(out, ": withdrawing\n") != 30 || activeCount(t, st) != 30 ||
		!strings.HasSuffix(errOut, " in 1 batches; 1 lines matched no active rule\n") {
		t.Errorf("rule withdraw --file: exit %d, %d active, stdout %q, stderr %q", code, activeCount(t, st), out, errOut)
	}
}

// A line that does not parse stops the run before anything is sent, and
// names its line; a refusal by the daemon names the line it refused and
// what was stored before it.
func TestCLIAddFileErrors(t *testing.T) {
	ts, st := startFileServer(t, 7)
	path, _ := ruleFile(t, 20, "match destination 203.0.113.0/24 then bogus-action", "match destination 203.0.113.9/32 protocl tcp then discard")
	code, out, errOut := runCLI(t, ts.sock, "rule", "add", "--file", path)
	if code != 1 || out != "" || !strings.Contains(errOut, "2 lines do not parse, nothing was sent: "+path+":27: ") ||
		!strings.Contains(errOut, path+":28: ") {
		t.Errorf("bad lines: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if n := activeCount(t, st); n != 0 {
		t.Errorf("%d active rules after a file with bad lines, want 0", n)
	}

	// The 11th rule (file line 15, in the second batch) parses, but the
	// daemon's guardrails refuse it.
	path, _ = ruleFile(t, 10, "match destination 0.0.0.0/0 then discard")
	code, out, errOut = runCLI(t, ts.sock, "rule", "add", "--file", path)
	if code != 1 || len(strings.Fields(out)) != 7 || !strings.Contains(errOut, path+" line 15: ") ||
		!strings.Contains(errOut, "the 7 rules before line 12 were stored, none after") {
		t.Errorf("refused line: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if n := activeCount(t, st); n != 7 {
		t.Errorf("%d active rules, want the 7 of the first batch", n)
	}

	if code, _, errOut := runCLI(t, ts.sock, "rule", "add", "--file", path, "match destination 192.0.2.1/32 then discard"); code != 2 || !strings.Contains(errOut, "not both") {
		t.Errorf("--file and text: exit %d, %q", code, errOut)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte("# nothing\n\n"), 0o600)
	if code, _, errOut := runCLI(t, ts.sock, "rule", "withdraw", "--file", empty); code != 1 || !strings.Contains(errOut, "holds no rule") {
		t.Errorf("empty file: exit %d, %q", code, errOut)
	}
}

// A 413 says how many rules and bytes one request may hold, whichever
// bound the request broke.
func TestBatchTooLargeSaysWhatFits(t *testing.T) {
	ts, _ := startFileServer(t, 3)
	var rules []string
	for i := range 4 {
		rules = append(rules, fmt.Sprintf(`{"text":"match destination 192.0.2.%d/32 then discard"}`, i+1))
	}
	status, body := ts.do(t, "POST", "/v1/rules/batch", `{"rules":[`+strings.Join(rules, ",")+`]}`)
	e := wantError(t, status, body, http.StatusRequestEntityTooLarge, api.CodeTooManyRules)
	if e.MaxBatchRules != 3 || e.MaxBodyBytes != 4096 || !strings.Contains(e.Message, "max_batch_rules") {
		t.Errorf("too_many_rules: %s", body)
	}
	status, body = ts.do(t, "POST", "/v1/rules/batch", `{"rules":[{"text":"`+strings.Repeat("x", 5000)+`"}]}`)
	e = wantError(t, status, body, http.StatusRequestEntityTooLarge, api.CodeBodyTooLarge)
	if e.MaxBatchRules != 3 || e.MaxBodyBytes != 4096 || !strings.Contains(e.Message, "at most 3 rules ([limits] max_batch_rules) and 4096 bytes") {
		t.Errorf("body_too_large: %s", body)
	}
}

// A rules file saved by a Windows editor (a byte order mark first, CRLF
// line ends) is read as the same rules.
func TestCLIAddFileBOMCRLF(t *testing.T) {
	ts, st := startFileServer(t, 9)
	in := "\uFEFFmatch destination 192.0.2.1/32 then discard\r\n# a comment\r\n\r\nmatch destination 192.0.2.2/32 then discard\r\n"
	var stdout, stderr bytes.Buffer
	code := cli.RunWithStdin(context.Background(), cli.NewClient(ts.sock, 0), strings.NewReader(in),
		[]string{"rule", "add", "--file", "-"}, &stdout, &stderr)
	if code != 0 || len(strings.Fields(stdout.String())) != 2 {
		t.Fatalf("rule add --file - (BOM, CRLF): exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if n := activeCount(t, st); n != 2 {
		t.Errorf("%d active rules, want 2", n)
	}
}
