package bgp

import (
	"context"
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// churnMatch is "destination 10.x.y.z/32 protocol ==17" for i < 2^24 (wire
// bytes: destination prefix, then protocol).
func churnMatch(b testing.TB, i int) flowspec.Match {
	nlri := []byte{0, 1, 32, 10, 0, 0, 0, 3, 0x81, 17}
	var ip [4]byte
	binary.BigEndian.PutUint32(ip[:], 10<<24|uint32(i))
	copy(nlri[3:7], ip[:])
	nlri[0] = byte(len(nlri) - 1)
	return decode(b, flowspec.IPv4, nlri)
}

// BenchmarkChurnMemory churns distinct rules through a 10,000-rule live set
// (each new rule announced, the oldest withdrawn) and reports the live heap
// after a GC: "leak" as GoBGP v3.37.0 does it, "compact" with a Restart
// whenever Leaked reaches a tenth of the churn (what Compactor does).
// heap-bytes is the live heap after the churn minus before it. -short
// churns 100,000 rules instead of 1,000,000.
func BenchmarkChurnMemory(b *testing.B) {
	total := 1_000_000
	if testing.Short() {
		total = 100_000
	}
	const live = 10_000
	threshold := total / 10
	for _, mode := range []string{"leak", "compact"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				var ms runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms)
				before := ms.HeapAlloc
				s := startSpeaker(b, Config{})
				ctx := context.Background()
				restarts := 0
				for i := range total {
					if err := announceOne(s, ctx, flowspec.Rule{Match: churnMatch(b, i), Action: flowspec.Discard()}); err != nil {
						b.Fatal(err)
					}
					if i >= live {
						if err := withdrawOne(s, ctx, churnMatch(b, i-live)); err != nil {
							b.Fatal(err)
						}
					}
					if mode == "compact" && i%1000 == 0 && s.Leaked() >= threshold {
						if err := s.Restart(ctx); err != nil {
							b.Fatal(err)
						}
						restarts++
						// What the reconciler does next: announce the live set again.
						for j := max(i-live+1, 0); j <= i; j++ {
							if err := announceOne(s, ctx, flowspec.Rule{Match: churnMatch(b, j), Action: flowspec.Discard()}); err != nil {
								b.Fatal(err)
							}
						}
					}
				}
				runtime.GC()
				runtime.GC()
				runtime.ReadMemStats(&ms)
				b.ReportMetric(float64(int64(ms.HeapAlloc)-int64(before)), "heap-bytes")
				b.ReportMetric(float64(restarts), "restarts")
				b.ReportMetric(float64(s.Leaked()), "leaked-dests")
				// A stopped server's loop goroutine keeps its RIB: empty
				// it first so that the next run starts from a clean heap.
				if err := s.Restart(ctx); err != nil {
					b.Fatal(err)
				}
				s.Stop()
			}
		})
	}
}
