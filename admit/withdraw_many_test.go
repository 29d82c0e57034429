package admit_test

import (
	"context"
	"testing"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/store"
)

// A batch withdrawal is all or none: every text is checked (syntax,
// scope, who may withdraw the rule) before anything is withdrawn, and a
// refusal names the text at fault; texts matching no active rule are
// skipped.
func TestWithdrawMatchesAllOrNone(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, nil)
	g := admit.New(admit.Config{Store: st, Limits: admit.Limits{MaxBatchRules: 5}})
	texts := []string{"route 198.51.100.8/32 then blackhole", "match destination 203.0.113.45/32 then discard", "route 198.51.100.9/32 then blackhole"}
	for _, text := range texts[:2] {
		if _, _, err := g.Add(ctx, noc, req(text)); err != nil {
			t.Fatal(err)
		}
	}
	mine, _, err := g.Add(ctx, cust, req(texts[2]))
	if err != nil {
		t.Fatal(err)
	}
	active := func() int {
		rs, err := st.List(ctx, store.Active)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range rs {
			if !r.WithdrawRequested {
				n++
			}
		}
		return n
	}

	// The customer's token: its own rule, then a rule outside its scope.
	_, err = g.WithdrawMatches(ctx, cust, []string{texts[2], texts[1]})
	if ref := wantRefusal(t, "a text outside the scope", err, admit.KindForbidden, "text", "203.0.113.45/32"); ref.Index != 1 {
		t.Errorf("refusal index %d, want 1", ref.Index)
	}
	// Inside its scope, but the operator's rule.
	_, err = g.WithdrawMatches(ctx, cust, []string{texts[2], texts[0]})
	if ref := wantRefusal(t, "another actor's rule", err, admit.KindForbidden, "text", `written by "noc"`); ref.Index != 1 {
		t.Errorf("refusal index %d, want 1", ref.Index)
	}
	_, err = g.WithdrawMatches(ctx, noc, []string{texts[0], "match destination 203.0.113.45/32 protocl tcp then discard"})
	if ref := wantRefusal(t, "a text that does not parse", err, admit.KindInvalidRule, "text", "protocl"); ref.Index != 1 {
		t.Errorf("refusal index %d, want 1", ref.Index)
	}
	_, err = g.WithdrawMatches(ctx, noc, []string{texts[0], texts[0], texts[0], texts[0], texts[0], texts[0]})
	wantRefusal(t, "6 texts with max_batch_rules 5", err, admit.KindTooLarge, "rules", "max_batch_rules")
	if n := active(); n != 3 {
		t.Fatalf("%d active rules after refused batches, want all 3", n)
	}

	// The operator withdraws them all; the action of a text does not
	// matter, a text twice counts once, one that matches nothing is skipped.
	done, err := g.WithdrawMatches(ctx, noc, []string{texts[0], "match destination 203.0.113.45/32 then rate-limit 0", texts[2], texts[0], "route 192.0.2.1/32 then blackhole"})
	if err != nil || len(done) != 3 {
		t.Fatalf("withdraw all: %d rules, %v", len(done), err)
	}
	if r, _ := st.Get(ctx, mine.ID); !r.WithdrawRequested || r.Actor != "noc" {
		t.Errorf("the customer's rule after the operator's withdrawal: %+v", r)
	}
	if n := active(); n != 0 {
		t.Errorf("%d active rules left", n)
	}
	if done, err := g.WithdrawMatches(ctx, noc, texts); err != nil || len(done) != 0 {
		t.Errorf("again: %d rules, %v; want none, no error", len(done), err)
	}
}
