package bgp

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// TestPathTable checks the mirror's table against a Go map through a
// long random run of additions, changes and removals (the last entry
// moving into each hole, tombs, growth, the shrink after mass removals
// and the reset when it empties).
func TestPathTable(t *testing.T) {
	ms := make([]flowspec.Match, 5000)
	for i := range ms {
		m, err := flowspec.RouteMatch(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 32))
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = m
	}
	acts := []flowspec.Action{flowspec.Blackhole(), flowspec.Discard(), {}}
	var tb pathTable
	want := make(map[flowspec.Match]flowspec.Action)
	check := func(step int) {
		t.Helper()
		if tb.len() != len(want) {
			t.Fatalf("step %d: len %d, want %d", step, tb.len(), len(want))
		}
		for _, m := range ms {
			a, ok := tb.get(m)
			if wa, wok := want[m]; ok != wok || a != wa {
				t.Fatalf("step %d: get(%s) = %v %v, want %v %v", step, m, a, ok, wa, wok)
			}
		}
		seen := make(map[flowspec.Match]bool)
		tb.all(func(m flowspec.Match, a flowspec.Action) {
			if wa, ok := want[m]; !ok || wa != a || seen[m] {
				t.Fatalf("step %d: all gave %s %v (seen %v)", step, m, a, seen[m])
			}
			seen[m] = true
		})
		if len(seen) != len(want) {
			t.Fatalf("step %d: all gave %d paths, want %d", step, len(seen), len(want))
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for step := range 100000 {
		m := ms[rng.IntN(len(ms))]
		// Phases: mostly adding, then mostly removing (the table
		// shrinks), then mixed.
		addBias := [3]int{8, 1, 5}[step/35000]
		if rng.IntN(10) < addBias {
			a := acts[rng.IntN(len(acts))]
			old, had := tb.set(m, a)
			if wa, wok := want[m]; had != wok || old != wa {
				t.Fatalf("step %d: set(%s) returned %v %v, want %v %v", step, m, old, had, wa, wok)
			}
			want[m] = a
		} else {
			_, wok := want[m]
			if got := tb.del(m); got != wok {
				t.Fatalf("step %d: del(%s) = %v, want %v", step, m, got, wok)
			}
			delete(want, m)
		}
		if step%1999 == 0 {
			check(step)
		}
		if used, size := tb.pos.Used(); used*4 > size*3 {
			t.Fatalf("step %d: %d of %d slots used", step, used, size)
		}
	}
	check(-1)
	for m := range want {
		tb.del(m)
	}
	clear(want)
	check(-2)
	if _, size := tb.pos.Used(); tb.ents != nil || size != 0 {
		t.Fatal("an empty table kept its arrays")
	}
	tb.set(ms[1], acts[0])
	want[ms[1]] = acts[0]
	check(-3)
}
