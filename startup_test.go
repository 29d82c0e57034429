package main

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
)

// The start-up scan walks the active rules once, checking each against
// the guardrails as it streams: exactly the rules that break one are
// withdrawn (among thousands, across the walk's 1,024-row steps), and a
// walk that fails withdraws nothing.
func TestEnforceAtStartStreams(t *testing.T) {
	ctx, st := openTestStore(t)
	const n = 3000
	in := make([]store.Input, 0, n)
	for i := range n {
		r, err := flowspec.Parse(fmt.Sprintf("match destination 10.0.%d.%d/32 then discard", i/250, i%250))
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, store.Input{Rule: r, Actor: "t"})
	}
	if _, err := st.UpsertMany(ctx, in); err != nil {
		t.Fatal(err)
	}
	// Rules 10.0.5.0-249 and 10.0.11.0-249 are safelisted now.
	gr := config.Guardrails{Safelist: []netip.Prefix{netip.MustParsePrefix("10.0.5.0/24"), netip.MustParsePrefix("10.0.11.0/24")}}
	gate := admit.New(admit.Config{Store: st, Guardrails: gr})
	rec := reconcile.New(nil, st, nil, reconcile.Config{})
	got, err := enforceAtStart(ctx, hclog.NewNullLogger(), st, gate, rec)
	if err != nil {
		t.Fatal(err)
	}
	if got != 500 {
		t.Errorf("withdrew %d rules, want the 500 safelisted", got)
	}
	act, err := st.ActiveRules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	safe := 0
	for _, r := range act {
		dst, _ := r.Rule.Match.Destination()
		inSafe := gr.Safelist[0].Contains(dst.Addr()) || gr.Safelist[1].Contains(dst.Addr())
		if inSafe {
			safe++
		}
		if r.WithdrawRequested != inSafe {
			t.Fatalf("rule %s: withdrawal requested %v, safelisted %v", r.Rule, r.WithdrawRequested, inSafe)
		}
	}
	if safe != 500 || len(act) != n {
		t.Fatalf("%d active rules, %d safelisted; want %d and 500", len(act), safe, n)
	}

	// A walk that fails (the store closed) withdraws nothing more.
	gr.Safelist = append(gr.Safelist, netip.MustParsePrefix("10.0.0.0/24"))
	gate.SetGuardrails(gr)
	st.Close()
	if got, err := enforceAtStart(ctx, hclog.NewNullLogger(), st, gate, rec); err == nil || got != 0 {
		t.Fatalf("enforceAtStart on a closed store = %d, %v; want an error and nothing withdrawn", got, err)
	}
}

// The first load's light-GC budget (memory.go) holds what the start-up
// walk of a 100,000-rule table allocates, with room for the garbage of
// the sessions it feeds meanwhile: measured on a tenth of that table,
// scaled. With 512 MiB the collector ran cycles that took about a fifth
// of the walk's CPU.
func TestFirstLoadBudgetHoldsTable(t *testing.T) {
	ctx, st := openTestStore(t)
	const n, table = 10_000, 100_000
	storeRestartTable(t, ctx, st, n, "t")
	sp := bgp.New(hclog.NewNullLogger(), bgp.Config{ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: -1})
	if err := sp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer sp.Stop()
	gate := admit.New(admit.Config{Store: st, Guardrails: config.Guardrails{Protected: config.Protected{
		Own: []netip.Addr{netip.MustParseAddr("192.0.2.1")}, Neighbors: []netip.Addr{netip.MustParseAddr("192.0.2.2")}, Ports: []uint16{179},
	}}})
	rec := reconcile.New(hclog.NewNullLogger(), st, sp, reconcile.Config{})
	before := readMetric("/gc/heap/allocs:bytes")
	if got, err := enforceAtStart(ctx, hclog.NewNullLogger(), st, gate, rec); err != nil || got != 0 {
		t.Fatalf("enforceAtStart = %d, %v", got, err)
	}
	walk := readMetric("/gc/heap/allocs:bytes") - before
	if sp.Len() != n {
		t.Fatalf("the speaker holds %d of %d rules", sp.Len(), n)
	}
	// Half as much again for the sessions' garbage.
	if need := walk * table / n * 3 / 2; need > firstLoadHeap {
		t.Errorf("the walk of %d rules allocated %d MiB: a table of %d needs ~%d MiB with its sessions, more than the light-GC budget of %d MiB (firstLoadHeap)",
			n, walk>>20, table, need>>20, firstLoadHeap>>20)
	}
}
