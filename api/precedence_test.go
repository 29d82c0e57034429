package api_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/store"
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

// Rules are listed by state first, the same in JSON and the CLI's table:
// the active FlowSpec rules in the routers' order (IPv4, then IPv6), then
// the active routes newest first, then everything else newest first; a
// rule's place in its family's order does not depend on a filter.
func TestListStateFirst(t *testing.T) {
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
	wide := add("match destination 10.0.0.0/8 then discard")
	route1 := add("route 203.0.113.7/32 then blackhole")
	gone := add("match destination 10.9.0.0/16 then discard")
	v6 := add("match destination 2001:db8::/32 then discard")
	expired := add("match destination 10.8.0.0/16 then discard")
	narrow := add("match destination 10.1.0.0/16 then discard")
	route2 := add("route 203.0.113.8/32 then blackhole")
	leaving := add("match destination 10.7.0.0/16 then discard")
	ts.rules.finish(gone, store.Withdrawn)
	ts.rules.finish(expired, store.Expired)
	if code, body := ts.do(t, "DELETE", "/v1/rules/"+strconv.FormatInt(leaving, 10), ""); code != 202 {
		t.Fatalf("withdraw: %d %s", code, body)
	}

	want := []int64{narrow, wide, v6, route2, route1, leaving, expired, gone}
	ids := func(rules []api.Rule) []int64 {
		var out []int64
		for _, r := range rules {
			out = append(out, r.ID)
		}
		return out
	}
	code, body := ts.do(t, "GET", "/v1/rules?order=precedence", "")
	var list api.RuleList
	if err := json.Unmarshal(body, &list); code != 200 || err != nil {
		t.Fatalf("list: %d %v %s", code, err, body)
	}
	if got := ids(list.Rules); !slices.Equal(got, want) {
		t.Errorf("JSON order %v, want %v", got, want)
	}
	prec := map[int64]int{}
	for _, r := range list.Rules {
		prec[r.ID] = r.Precedence
	}
	if want := map[int64]int{narrow: 1, wide: 2, v6: 1}; !maps.Equal(prec, map[int64]int{narrow: 1, wide: 2, v6: 1, route1: 0, route2: 0, gone: 0, expired: 0, leaving: 0}) {
		t.Errorf("precedence %v, want %v and none for the others", prec, want)
	}
	// A filter keeps each rule's place.
	code, body = ts.do(t, "GET", "/v1/rules?order=precedence&state=active", "")
	list = api.RuleList{}
	if err := json.Unmarshal(body, &list); code != 200 || err != nil {
		t.Fatalf("list active: %d %v", code, err)
	}
	if got := ids(list.Rules); !slices.Equal(got, want[:5]) || list.Rules[1].Precedence != 2 {
		t.Errorf("active: %v (wide at %d), want %v with wide at 2", got, list.Rules[1].Precedence, want[:5])
	}
	// A rule read alone says its place too.
	code, body = ts.do(t, "GET", "/v1/rules/"+strconv.FormatInt(wide, 10), "")
	var one api.Rule
	if err := json.Unmarshal(body, &one); code != 200 || err != nil || one.Precedence != 2 {
		t.Errorf("rule %d alone: %d %v, precedence %d, want 2", wide, code, err, one.Precedence)
	}

	code, out, errOut := runCLI(t, ts.sock, "rule", "list")
	if code != 0 {
		t.Fatalf("rule list: %d %s", code, errOut)
	}
	var table []int64
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		id, err := strconv.ParseInt(strings.Fields(line)[0], 10, 64)
		if err != nil {
			t.Fatalf("table line %q", line)
		}
		table = append(table, id)
	}
	if !slices.Equal(table, want) {
		t.Errorf("CLI order %v, want %v:\n%s", table, want, out)
	}
}
