package admit_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ribkeeper/ribkeeper/admit"
)

// BenchmarkApplySet: a set of RIBKEEPER_BENCH_SET RTBH routes (default
// 100,000) applied to an empty SQLite store through the gate (first),
// then with 1 % of its lines changed (change1pct), then unchanged
// (unchanged); no speaker. MB-peak is the test process's peak RSS,
// requests included.
func BenchmarkApplySet(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("RIBKEEPER_BENCH_SET")); err == nil && v > 0 {
		n = v
	}
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
				b.ReportMetric(float64(res.Created+res.Updated+res.Withdrawn), "written")
				b.ReportMetric(peakRSS()/(1<<20), "MB-peak")
			}
		})
	}
}

// peakRSS is this process's peak resident set (VmHWM), in bytes.
func peakRSS() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb * 1024
		}
	}
	return 0
}
