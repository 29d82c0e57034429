package api_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/ribkeeper/ribkeeper/api"
)

// rule list orders active FlowSpec rules the way routers apply them and
// names the rules a higher-precedence rule shadows completely.
func TestListInPrecedenceOrder(t *testing.T) {
	ts := startServer(t)
	add := func(text string) int64 {
		t.Helper()
		code, body := ts.do(t, "POST", "/v1/rules", `{"text": "`+text+`"}`)
		if code != 201 {
			t.Fatalf("add %s: %d %s", text, code, body)
		}
		var r api.Rule
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	// Added in the reverse of their precedence.
	wide := add("match destination 10.0.0.0/8 then discard")
	narrowUDP := add("match destination 10.1.0.0/16 protocol ==17 then discard")
	narrow := add("match destination 10.1.0.0/16 then rate-limit 1000")
	v6 := add("match destination 2001:db8::/32 then discard")

	code, body := ts.do(t, "GET", "/v1/rules?order=precedence", "")
	if code != 200 {
		t.Fatalf("list: %d %s", code, body)
	}
	var list api.RuleList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, r := range list.Rules {
		got = append(got, r.ID)
	}
	// The more specific destination first; for equal destinations the
	// rule with more components (protocol) wins; IPv6 after IPv4.
	want := []int64{narrowUDP, narrow, wide, v6}
	if len(got) != len(want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
	for _, r := range list.Rules {
		if r.ShadowedBy != 0 {
			t.Errorf("rule %d reported shadowed by %d; none of these shadows another", r.ID, r.ShadowedBy)
		}
	}

	// A rule behind a broader, higher-precedence one can never apply: the
	// source /0 matches everything and type 2 beats protocol's type 3.
	high := add("match destination 10.2.0.0/16 source 0.0.0.0/0 then discard")
	low := add("match destination 10.2.0.0/16 protocol ==6 then discard")
	code, body = ts.do(t, "GET", "/v1/rules?order=precedence", "")
	if code != 200 {
		t.Fatal(code)
	}
	list = api.RuleList{}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	shadowed := map[int64]int64{}
	for _, r := range list.Rules {
		if r.ShadowedBy != 0 {
			shadowed[r.ID] = r.ShadowedBy
		}
	}
	if len(shadowed) != 1 || shadowed[low] != high {
		t.Fatalf("shadowed = %v, want rule %d shadowed by %d", shadowed, low, high)
	}

	code, out, errOut := runCLI(t, ts.sock, "rule", "list")
	if code != 0 {
		t.Fatalf("rule list: %d %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[1], strconv.FormatInt(list.Rules[0].ID, 10)+" ") {
		t.Errorf("CLI list does not start with the highest-precedence rule %d:\n%s", list.Rules[0].ID, out)
	}
	for id, by := range shadowed {
		if !strings.Contains(errOut, "rule "+strconv.FormatInt(id, 10)+" never applies: rule "+strconv.FormatInt(by, 10)) {
			t.Errorf("no warning for rule %d shadowed by %d:\n%s", id, by, errOut)
		}
	}

	if code, _ := ts.do(t, "GET", "/v1/rules?order=sideways", ""); code != 400 {
		t.Errorf("bad order: %d, want 400", code)
	}
}

// rule list says its order, takes --order id|precedence|expires, and its
// table and --json list the same rules in the same order.
func TestListOrders(t *testing.T) {
	ts := startServer(t)
	ts.do(t, "POST", "/v1/rules", `{"text":"match destination 10.0.0.0/8 then discard","ttl":"2h"}`)
	ts.do(t, "POST", "/v1/rules", `{"text":"match destination 10.1.0.0/16 then discard","ttl":"never"}`)
	ts.do(t, "POST", "/v1/rules", `{"text":"match destination 10.1.2.0/24 then discard","ttl":"1h"}`)
	for order, want := range map[string]string{
		"precedence": "3,2,1", // most specific destination first
		"id":         "3,2,1",
		"expires":    "3,1,2", // 1h, 2h, never
	} {
		code, out, errOut := runCLI(t, ts.sock, "rule", "list", "--order", order)
		if code != 0 || !strings.Contains(errOut, "3 rules ") || !strings.Contains(errOut, "--order precedence|id|expires") {
			t.Fatalf("--order %s: exit %d, stderr %q", order, code, errOut)
		}
		var table []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			table = append(table, strings.Fields(line)[0])
		}
		code, out, _ = runCLI(t, ts.sock, "rule", "list", "--json", "--order", order)
		var list api.RuleList
		if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil {
			t.Fatalf("--json --order %s: exit %d, %v", order, code, err)
		}
		var js []string
		for _, r := range list.Rules {
			js = append(js, strconv.FormatInt(r.ID, 10))
		}
		if strings.Join(table, ",") != want || strings.Join(js, ",") != want || list.Order != order {
			t.Errorf("--order %s: table %v, json %v (order %q); want %s", order, table, js, list.Order, want)
		}
	}
	if code, _, errOut := runCLI(t, ts.sock, "rule", "list", "--order", "age"); code != 2 || !strings.Contains(errOut, `"age"`) {
		t.Errorf("--order age: exit %d, %q", code, errOut)
	}
	status, body := ts.do(t, "GET", "/v1/rules?order=age", "")
	if e := wantError(t, status, body, 400, api.CodeInvalidBody); e.Field != "order" {
		t.Errorf("?order=age: %+v", e)
	}
}
