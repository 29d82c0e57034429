package api_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/api"

	"github.com/ribkeeper/ribkeeper/store"
)

func TestBatchAllOrNothing(t *testing.T) {
	ts := startServer(t)
	status, body := ts.do(t, "POST", "/v1/rules/batch",
		`{"rules":[{"text":"`+ruleDiscard+`"},{"text":"match destination 10.0.0.0/8 then discrad"}]}`)
	e := wantError(t, status, body, 400, api.CodeInvalidRule)
	if e.Field != "rules[1].text" || !strings.Contains(e.Message, `"discrad"`) {
		t.Errorf("error %+v, want field rules[1].text naming the word", e)
	}
	if n := ts.rules.count(); n != 0 {
		t.Fatalf("a rejected batch stored %d rules", n)
	}
	status, body = ts.do(t, "POST", "/v1/rules/batch", `{"rules":[{"text":"`+ruleDiscard+`","ttl":"-1s"}]}`)
	if e := wantError(t, status, body, 400, api.CodeInvalidTTL); e.Field != "rules[0].ttl" {
		t.Errorf("field %q, want rules[0].ttl", e.Field)
	}
	status, body = ts.do(t, "POST", "/v1/rules/batch", `{"rules":[]}`)
	wantError(t, status, body, 400, api.CodeInvalidBody)

	status, body = ts.do(t, "POST", "/v1/rules/batch",
		`{"rules":[{"text":"`+ruleDiscard+`"},{"text":"`+ruleOther+`","ttl":"5m"},{"text":"`+ruleLimit+`"}]}`)
	rules := decode[api.RuleList](t, body).Rules
	if status != 200 || len(rules) != 3 || rules[0].ID != rules[2].ID || rules[0].ID == rules[1].ID {
		t.Fatalf("batch: %d %s; want 3 rules in order, the first and last the same", status, body)
	}
	if n := ts.rules.count(); n != 2 {
		t.Errorf("store holds %d rules, want 2", n)
	}
}

func TestHistory(t *testing.T) {
	ts := startServer(t)
	_, body := ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleDiscard+`"}`)
	id := strconv.FormatInt(decode[api.Rule](t, body).ID, 10)
	ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleLimit+`"}`)
	ts.do(t, "DELETE", "/v1/rules/"+id, "")

	status, body := ts.do(t, "GET", "/v1/rules/"+id+"/history", "")
	var kinds []string
	for _, e := range decode[api.EventList](t, body).Events {
		kinds = append(kinds, e.Kind)
	}
	if status != 200 || strings.Join(kinds, ",") != "created,updated,withdraw-requested" {
		t.Errorf("history: %d %s", status, body)
	}
	status, body = ts.do(t, "GET", "/v1/rules/404/history", "")
	wantError(t, status, body, 404, api.CodeNotFound)

	code, out, errOut := runCLI(t, ts.sock, "rule", "history", id)
	if code != 0 || !strings.HasPrefix(out, "TIME") || strings.Count(out, "\n") != 4 || !strings.Contains(out, "withdraw-requested") {
		t.Errorf("rule history: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestStoreUnavailableIs503(t *testing.T) {
	ts := startServer(t)
	ts.rules.mu.Lock()
	ts.rules.down = true
	ts.rules.mu.Unlock()
	status, body := ts.do(t, "GET", "/v1/rules", "")
	e := wantError(t, status, body, http.StatusServiceUnavailable, api.CodeUnavailable)
	if !strings.Contains(e.Message, "check the DSN") {
		t.Errorf("message %q should carry the store's hint", e.Message)
	}
	code, _, errOut := runCLI(t, ts.sock, "rule", "list")
	if code != 1 || !strings.HasPrefix(errOut, "ribkeeper rule list: store: list rules: database unavailable") {
		t.Errorf("rule list: exit %d, stderr %q", code, errOut)
	}
}

// The API over the real SQLite store: upsert identity, withdraw, history,
// and the store's own input validation surfacing as a 400 naming the field.
func TestWithSQLiteStore(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "rk.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ts := startServerOver(t, st)

	status, body := ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleDiscard+`","ttl":"1h","reason":"r1"}`)
	first := decode[api.Rule](t, body)
	if status != 201 || first.Actor != "cli" || first.ExpiresAt == nil || time.Until(*first.ExpiresAt) < 59*time.Minute {
		t.Fatalf("add: %d %s", status, body)
	}
	status, body = ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleLimit+`","ttl":"never"}`)
	if second := decode[api.Rule](t, body); status != 200 || second.ID != first.ID || second.ExpiresAt != nil || second.Reason != "r1" {
		t.Fatalf("update: %d %s, want 200 with id %d, no expiry and the reason kept", status, body, first.ID)
	}
	status, body = ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleOther+`","sites":["par1",""]}`)
	if e := wantError(t, status, body, 400, api.CodeInvalidInput); e.Field != "sites" {
		t.Errorf("bad site: field %q, want sites (%s)", e.Field, e.Message)
	}

	id := strconv.FormatInt(first.ID, 10)
	status, body = ts.do(t, "DELETE", "/v1/rules/"+id, "")
	if got := decode[api.Rule](t, body); status != 202 || got.State != api.StateWithdrawing {
		t.Fatalf("withdraw: %d %s", status, body)
	}
	status, body = ts.do(t, "GET", "/v1/rules?state=withdrawing", "")
	if rules := decode[api.RuleList](t, body).Rules; status != 200 || len(rules) != 1 {
		t.Errorf("list withdrawing: %d %s", status, body)
	}
	status, body = ts.do(t, "GET", "/v1/rules/"+id+"/history", "")
	if evs := decode[api.EventList](t, body).Events; status != 200 || len(evs) != 3 || evs[0].Kind != "created" {
		t.Errorf("history: %d %s", status, body)
	}
	status, body = ts.do(t, "GET", "/v1/rules/999", "")
	wantError(t, status, body, 404, api.CodeNotFound)
}
