package api_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/cli"
	"github.com/ribkeeper/ribkeeper/store"
)

func setBody(n int, extra ...string) string {
	var b strings.Builder
	b.WriteString(`{"rules":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"text":"route 203.0.%d.%d/32 then blackhole"}`, i/250, i%250+1)
	}
	for _, e := range extra {
		b.WriteString("," + e)
	}
	b.WriteString("]}")
	return b.String()
}

// The sets routes over a real store: PUT takes a body larger than the
// other routes' limit and up to its own, writes the set, says what it
// did; an unchanged PUT writes nothing; a refused one names the line;
// GET lists the set and its rules, which carry its name; DELETE
// withdraws it all.
func TestSetsRoutes(t *testing.T) {
	st, err := store.Open(context.Background(), store.Config{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "rk.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ts := startServerGate(t, st, newGate(st, admit.Config{Limits: admit.Limits{MaxSetBodyBytes: 64 << 10}}))

	body := setBody(300)
	if len(body) <= 4096 {
		t.Fatalf("body of %d bytes does not exceed the other routes' limit", len(body))
	}
	status, resp := ts.do(t, "PUT", "/v1/sets/feed", body)
	res := decode[api.SetResult](t, resp)
	if status != 200 || res.Created != 300 || res.Rules != 300 || res.Set != "feed" {
		t.Fatalf("PUT: %d %s", status, resp)
	}
	status, resp = ts.do(t, "PUT", "/v1/sets/feed", body)
	if res := decode[api.SetResult](t, resp); status != 200 || res.Unchanged != 300 || res.Created+res.Updated+res.Withdrawn != 0 {
		t.Fatalf("unchanged PUT: %d %s", status, resp)
	}

	status, resp = ts.do(t, "GET", "/v1/sets", "")
	list := decode[api.SetList](t, resp)
	if status != 200 || len(list.Sets) != 1 || list.Sets[0].Name != "feed" || list.Sets[0].Active != 300 {
		t.Fatalf("GET /v1/sets: %d %s", status, resp)
	}
	status, resp = ts.do(t, "GET", "/v1/sets/feed?limit=1000", "")
	rules := decode[api.RuleList](t, resp).Rules
	if status != 200 || len(rules) != 300 || rules[0].Set != "feed" {
		t.Fatalf("GET /v1/sets/feed: %d, %d rules", status, len(rules))
	}
	id := strconv.FormatInt(rules[0].ID, 10)
	if _, resp = ts.do(t, "GET", "/v1/rules/"+id+"/history", ""); !strings.Contains(string(resp), `"set":"feed"`) {
		t.Errorf("history of a set's rule: %s", resp)
	}

	// Refused whole, at the first line at fault.
	status, resp = ts.do(t, "PUT", "/v1/sets/feed", setBody(10, `{"text":"route 203.0.113.0/24 then blackhole"}`))
	if e := wantError(t, status, resp, 422, api.CodeGuardrailViolation); e.Field != "rules[10].text" {
		t.Errorf("guardrail refusal on %q, want rules[10].text", e.Field)
	}
	status, resp = ts.do(t, "PUT", "/v1/sets/feed", setBody(3, `{"text":"route 203.0.113.1/32 then blackhole","colour":"red"}`))
	wantError(t, status, resp, 400, api.CodeInvalidBody)
	status, resp = ts.do(t, "PUT", "/v1/sets/feed", setBody(2000))
	if e := wantError(t, status, resp, 413, api.CodeBodyTooLarge); !strings.Contains(e.Message, "[limits] max_set_body_bytes") {
		t.Errorf("413 %q does not name the limit", e.Message)
	}
	status, resp = ts.do(t, "PUT", "/v1/sets/bad%20name", body)
	wantError(t, status, resp, 400, api.CodeInvalidInput)
	if _, resp = ts.do(t, "GET", "/v1/sets", ""); decode[api.SetList](t, resp).Sets[0].Active != 300 {
		t.Fatalf("refused PUTs changed the set: %s", resp)
	}

	status, resp = ts.do(t, "DELETE", "/v1/sets/feed", "")
	if res := decode[api.SetResult](t, resp); status != 200 || res.Withdrawn != 300 {
		t.Fatalf("DELETE: %d %s", status, resp)
	}
	if _, resp = ts.do(t, "GET", "/v1/sets", ""); len(decode[api.SetList](t, resp).Sets) != 0 {
		t.Errorf("after DELETE: %s", resp)
	}
}

// ribkeeper set apply reads a file or standard input, one rule a line
// (blank lines and comments skipped); an unchanged file changes nothing;
// a refusal names the file's line; set list, show and delete.
func TestCLISetApply(t *testing.T) {
	st, err := store.Open(context.Background(), store.Config{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "rk.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ts := startServerOver(t, st)
	run := func(stdin string, args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := cli.RunWithStdin(context.Background(), cli.NewClient(ts.sock, 0), strings.NewReader(stdin), args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	feed := "# blocklist\nroute 203.0.113.1/32 then blackhole\n\n   route 203.0.113.2/32 then blackhole  \nmatch destination 203.0.113.3/32 then discard\n"
	file := filepath.Join(t.TempDir(), "feed.txt")
	if err := os.WriteFile(file, []byte(feed), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run("", "set", "apply", "--reason", "feed v1", "feed", file)
	if code != 0 || out != "set feed: 3 rules: 3 created, 0 updated, 0 withdrawn, 0 unchanged\n" {
		t.Fatalf("set apply FILE: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = run(feed, "set", "apply", "--reason", "feed v1", "feed", "-")
	if code != 0 || out != "set feed: 3 rules: 0 created, 0 updated, 0 withdrawn, 3 unchanged\n" {
		t.Fatalf("set apply - (unchanged): exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// The same feed saved by a Windows editor: a byte order mark first,
	// CRLF line ends.
	windows := "\uFEFF" + strings.ReplaceAll(strings.TrimPrefix(feed, "# blocklist\n"), "\n", "\r\n")
	code, out, errOut = run(windows, "set", "apply", "--reason", "feed v1", "feed", "-")
	if code != 0 || out != "set feed: 3 rules: 0 created, 0 updated, 0 withdrawn, 3 unchanged\n" {
		t.Fatalf("set apply - (BOM, CRLF): exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = run("route 203.0.113.1/32 then blackhole\nroute 203.0.113.4/32 then blackhole\n", "set", "apply", "--reason", "feed v1", "feed", "-")
	if code != 0 || out != "set feed: 2 rules: 1 created, 0 updated, 2 withdrawn, 1 unchanged\n" {
		t.Fatalf("set apply - (changed): exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = run("route 203.0.113.1/32 then blackhole\n\n# the next line is refused\nroute 203.0.113.0/24 then blackhole\n", "set", "apply", "feed", "-")
	if code != 1 || out != "" || !strings.HasPrefix(errOut, "ribkeeper set apply: - line 4: ") || !strings.Contains(errOut, "prefix_lengths") {
		t.Fatalf("refused set: exit %d, stdout %q, stderr %q; want the line named", code, out, errOut)
	}

	code, out, _ = run("", "set", "list")
	if code != 0 || !strings.Contains(out, "feed") || !strings.Contains(out, " 2 ") {
		t.Errorf("set list: exit %d\n%s", code, out)
	}
	code, out, errOut = run("", "set", "show", "feed")
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(out, "203.0.113.4/32") || !strings.Contains(out, "feed v1") {
		t.Errorf("set show: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	no := false
	rules, err := st.ListPage(context.Background(), store.Page{State: store.Active, WithdrawRequested: &no, Set: "feed", Limit: 10})
	if err != nil || len(rules) != 2 {
		t.Fatalf("set's rules %v, %v", rules, err)
	}
	code, out, _ = run("", "rule", "show", strconv.FormatInt(rules[0].ID, 10))
	if code != 0 || !strings.Contains(out, "set:") || !strings.Contains(out, "feed") {
		t.Errorf("rule show of a set's rule: exit %d\n%s", code, out)
	}
	code, out, _ = run("", "set", "delete", "feed")
	if code != 0 || out != "set feed: 2 rules withdrawn\n" {
		t.Errorf("set delete: exit %d, %q", code, out)
	}
	if code, _, errOut = run("", "set", "apply", "feed", filepath.Join(t.TempDir(), "missing")); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Errorf("missing file: exit %d, %q", code, errOut)
	}
}
