package reconcile

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/flowspec"
)

func benchRules(b *testing.B, n int) []flowspec.Rule {
	rules := make([]flowspec.Rule, n)
	for i := range rules {
		r, err := flowspec.Parse(fmt.Sprintf("match destination 10.%d.%d.%d/32 protocol ==17 then discard", i>>16&255, i>>8&255, i&255))
		if err != nil {
			b.Fatal(err)
		}
		rules[i] = r
	}
	return rules
}

// BenchmarkDiffConverged is the steady state: every desired path adopted.
func BenchmarkDiffConverged(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			desired := make(map[flowspec.Match]Want, n)
			actual := make(map[flowspec.Match]flowspec.Action, n)
			for i, r := range benchRules(b, n) {
				desired[r.Match] = Want{ID: int64(i + 1), Action: r.Action}
				actual[r.Match] = r.Action
			}
			b.ReportAllocs()
			for b.Loop() {
				if p := Diff(desired, actual); len(p.Adopt) != n {
					b.Fatal("not converged")
				}
			}
		})
	}
}

// BenchmarkPassConverged is a whole pass (read both sides, lifecycle, diff,
// status check) over a converged set with the in-memory fakes.
func BenchmarkPassConverged(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			st, sp := newFakeStore(), newFakeSpeaker()
			for _, r := range benchRules(b, n) {
				st.add(r, time.Now().Add(time.Hour))
			}
			r := New(hclog.NewNullLogger(), st, sp, Config{})
			ctx := context.Background()
			r.runPass(ctx, false, nil)
			if res := r.LastPass(); res.Added != n {
				b.Fatalf("first pass = %+v", res)
			}
			b.ReportAllocs()
			for b.Loop() {
				r.runPass(ctx, false, nil)
			}
			if res := r.LastPass(); res.Changed() || res.Adopted != n {
				b.Fatalf("converged pass = %+v", res)
			}
		})
	}
}

// BenchmarkPassInitial announces n rules into an empty fake RIB.
func BenchmarkPassInitial(b *testing.B) {
	const n = 100_000
	rules := benchRules(b, n)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		st, sp := newFakeStore(), newFakeSpeaker()
		for _, r := range rules {
			st.add(r, time.Time{})
		}
		r := New(hclog.NewNullLogger(), st, sp, Config{})
		b.StartTimer()
		r.runPass(context.Background(), false, nil)
		if res := r.LastPass(); res.Added != n {
			b.Fatalf("pass = %+v", res)
		}
	}
}
