package api_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/api"
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
