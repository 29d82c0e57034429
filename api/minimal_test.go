package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ribkeeper/ribkeeper/api"
)

// TestBatchMinimalAnswer: POST /v1/rules/batch with "Prefer:
// return=minimal" answers the ids in request order (a Match sent twice
// gives its one rule's id twice) and says it applied the preference; without it, or with another preference, the
// answer is every rule in full, as before.
func TestBatchMinimalAnswer(t *testing.T) {
	ts := startServer(t)
	post := func(prefer, body string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, "http://rk/v1/rules/batch", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if prefer != "" {
			req.Header.Add("Prefer", prefer)
		}
		resp, err := ts.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /v1/rules/batch: %s: %s", resp.Status, b)
		}
		return resp, b
	}
	a := `{"text":"route 198.51.100.1/32 then blackhole","ttl":"1h"}`
	b := `{"text":"route 198.51.100.2/32 then blackhole","ttl":"1h"}`
	full, _ := post("", `{"rules":[`+a+`]}`)
	if got := full.Header.Get("Preference-Applied"); got != "" {
		t.Errorf("answer without Prefer says Preference-Applied: %q", got)
	}
	_, body := post("", `{"rules":[`+a+`]}`)
	var list api.RuleList
	if err := json.Unmarshal(body, &list); err != nil || len(list.Rules) != 1 || list.Rules[0].Text == "" {
		t.Fatalf("full answer = %s (%v)", body, err)
	}
	old := list.Rules[0].ID

	// a is stored already (an update); b is new and sent twice.
	resp, body := post(`respond-async, RETURN="minimal"; x=1`, `{"rules":[`+b+`,`+a+`,`+b+`]}`)
	if got := resp.Header.Get("Preference-Applied"); got != "return=minimal" {
		t.Errorf("Preference-Applied = %q, want return=minimal", got)
	}
	var ids api.StoredIDs
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ids); err != nil {
		t.Fatalf("minimal answer %s: %v", body, err)
	}
	if len(ids.IDs) != 3 || ids.IDs[1] != old || ids.IDs[0] != ids.IDs[2] || ids.IDs[0] == old {
		t.Fatalf("minimal answer = %+v; want [new, %d, new]", ids, old)
	}
	for _, id := range ids.IDs {
		if _, body := ts.do(t, http.MethodGet, "/v1/rules/"+itoa(id), ""); !strings.Contains(string(body), `"state":"active"`) {
			t.Errorf("rule %d: %s", id, body)
		}
	}
	// Another preference only: the full answer.
	_, body = post("return=representation", `{"rules":[`+b+`]}`)
	list = api.RuleList{}
	if err := json.Unmarshal(body, &list); err != nil || len(list.Rules) != 1 || !slices.Contains(ids.IDs, list.Rules[0].ID) {
		t.Fatalf("answer with return=representation = %s (%v)", body, err)
	}
}
