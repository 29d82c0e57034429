package admit_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ribkeeper/ribkeeper/admit"
)

// BenchmarkApplySet: a set of 100,000 RTBH routes applied to an empty
// SQLite store through the gate (first), then with 1 % of its lines
// changed (change1pct), then unchanged (unchanged); no speaker.
func BenchmarkApplySet(b *testing.B) {
	const n = 100_000
	lines := func(changed int) []admit.Request {
		out := make([]admit.Request, n)
		for i := range out {
			j := i
			if i < changed {
				j = n + i
			}
			out[i] = admit.Request{Text: fmt.Sprintf("route 10.%d.%d.%d/32 then blackhole", j>>16&255, j>>8&255, j&255)}
		}
		return out
	}
	first, second := lines(0), lines(n/100)
	ctx := context.Background()
	for _, phase := range []string{"first", "change1pct", "unchanged"} {
		b.Run(phase, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				g := admit.New(admit.Config{Store: openStore(b, nil)})
				if phase != "first" {
					if _, err := g.ApplySet(ctx, noc, "feed", first); err != nil {
						b.Fatal(err)
					}
				}
				body := first
				if phase != "first" {
					body = second
				}
				if phase == "unchanged" {
					body = first
				}
				b.StartTimer()
				res, err := g.ApplySet(ctx, noc, "feed", body)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				b.ReportMetric(float64(n)/b.Elapsed().Seconds()*float64(b.N), "lines/s")
				_ = res
			}
		})
	}
}
