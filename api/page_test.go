package api_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/cli"

	"github.com/ribkeeper/ribkeeper/store"
)

// Paging GET /v1/rules with limit and after returns every rule that
// existed when the walk started exactly once, while rules are added and
// updated concurrently; the CLI walks the pages.
func TestPagingWhileAdding(t *testing.T) {
	ts, st := sqliteServer(t)
	ctx := context.Background()
	text := func(i int) string { return fmt.Sprintf("match destination 10.%d.%d.0/24 then discard", i/256, i%256) }
	var ins []store.Input
	for i := range 250 {
		ins = append(ins, store.Input{Rule: mustParse(t, text(i)), Actor: "t"})
	}
	before, err := st.UpsertMany(ctx, ins)
	if err != nil {
		t.Fatal(err)
	}
	client := cli.NewClient(ts.sock, 0)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // new rules and updates of old ones, until the walk ends
		for i := 250; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, _, err := st.Upsert(ctx, store.Input{Rule: mustParse(t, text(i)), Actor: "t"}); err != nil {
				t.Error(err)
				return
			}
			old := mustParse(t, strings.Replace(text(i%250), "discard", "rate-limit 1000", 1))
			if _, _, err := st.Upsert(ctx, store.Input{Rule: old, Actor: "t"}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	seen := map[int64]int{}
	var after int64
	pages := 0
	for {
		rules, next, err := client.ListRulesPage(ctx, "", after, 17)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range rules {
			seen[r.ID]++
		}
		if next == 0 {
			break
		}
		if next != rules[len(rules)-1].ID {
			t.Fatalf("next %d is not the last id of the page", next)
		}
		after = next
	}
	close(stop)
	wg.Wait()
	for id, n := range seen {
		if n != 1 {
			t.Errorf("rule %d listed %d times", id, n)
		}
	}
	for _, r := range before {
		if seen[r.ID] != 1 {
			t.Errorf("rule %d, there before the walk, listed %d times", r.ID, seen[r.ID])
		}
	}
	if pages < 250/17 {
		t.Errorf("%d pages for %d rules of 17", pages, len(seen))
	}

	// The CLI walks every page: rule list --order id and route list.
	var out, errOut strings.Builder
	client.PageSize = 7
	if code := cli.RunWith(ctx, client, []string{"rule", "list", "--order", "id", "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("rule list: exit %d: %s", code, errOut.String())
	}
	list := decode[api.RuleList](t, []byte(out.String()))
	all, _ := st.List(ctx, "")
	if len(list.Rules) != len(all) || list.Rules[0].ID != all[0].ID || list.Rules[len(all)-1].ID != all[len(all)-1].ID {
		t.Errorf("rule list --order id listed %d rules, want %d", len(list.Rules), len(all))
	}

	// Bad paging parameters name the field.
	for q, field := range map[string]string{"limit=0": "limit", "limit=x": "limit", "after=-1": "after",
		"limit=5&order=precedence": "order", "limit=100001": "limit"} {
		status, body := ts.do(t, "GET", "/v1/rules?"+q, "")
		if e := decode[api.ErrorBody](t, body).Error; status != 400 || e == nil || e.Field != field {
			t.Errorf("?%s: %d %s, want 400 with field %q", q, status, body, field)
		}
	}
	status, body := ts.do(t, "GET", "/v1/rules?state=active&limit=3", "")
	if l := decode[api.RuleList](t, body); status != 200 || len(l.Rules) != 3 || l.Next == 0 {
		t.Errorf("state=active&limit=3: %d %s", status, body)
	}
}
