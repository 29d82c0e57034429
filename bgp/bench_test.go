package bgp

import (
	"context"
	"encoding/binary"
	"net/netip"
	"runtime"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/server"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// The rule shape of the GoBGP baseline in GOBGP-V3-NOTES.md:
// "destination 10.x.x.x/32 protocol ==17 destination-port ==53", discard.
func benchRules(b *testing.B, n int) []flowspec.Rule {
	rules := make([]flowspec.Rule, n)
	for i := range rules {
		w := []byte{12, 1, 32, 0, 0, 0, 0, 3, 0x81, 17, 5, 0x81, 53}
		binary.BigEndian.PutUint32(w[3:7], 10<<24|uint32(i))
		rules[i] = flowspec.Rule{Match: decode(b, flowspec.IPv4, w), Action: flowspec.Discard()}
	}
	return rules
}

const benchN = 10_000

// BenchmarkAnnounce10k: one op is 10k Announce calls into a fresh speaker;
// "mirrored" also waits until the mirror holds all of them.
func BenchmarkAnnounce10k(b *testing.B) {
	rules := benchRules(b, benchN)
	ctx := context.Background()
	var announce, mirrored time.Duration
	for b.Loop() {
		b.StopTimer()
		s := startSpeaker(b, Config{})
		b.StartTimer()
		t0 := time.Now()
		for _, r := range rules {
			if err := s.Announce(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
		announce += time.Since(t0)
		for s.Len() < benchN {
			time.Sleep(time.Millisecond)
		}
		mirrored += time.Since(t0)
		b.StopTimer()
		s.Stop()
		b.StartTimer()
	}
	b.ReportMetric(float64(benchN*b.N)/announce.Seconds(), "announce/s")
	b.ReportMetric(float64(benchN*b.N)/mirrored.Seconds(), "mirrored/s")
}

// BenchmarkRawAddPath10k is the baseline: the same wire bytes handed to a
// bare GoBGP server with AddPath, with and without a BEST watch (the
// speaker always has one, for the mirror).
func BenchmarkRawAddPath10k(b *testing.B) {
	for _, watch := range []bool{false, true} {
		name := "nowatch"
		if watch {
			name = "watch"
		}
		b.Run(name, func(b *testing.B) {
			rules := benchRules(b, benchN)
			enc := New(nil, Config{})
			paths := make([]*api.Path, len(rules))
			for i, r := range rules {
				paths[i] = enc.wirePath(r.Match, r.Action, false)
			}
			var elapsed time.Duration
			for b.Loop() {
				b.StopTimer()
				srv := server.NewBgpServer(server.LoggerOption(newGoBGPLogger(testLogger(b), nil)))
				go srv.Serve()
				if err := srv.StartBgp(context.Background(), &api.StartBgpRequest{Global: &api.Global{
					Asn: 65000, RouterId: "192.0.2.1", ListenPort: -1,
				}}); err != nil {
					b.Fatal(err)
				}
				wctx, cancel := context.WithCancel(context.Background())
				if watch {
					req := &api.WatchEventRequest{Table: &api.WatchEventRequest_Table{
						Filters: []*api.WatchEventRequest_Table_Filter{{Type: api.WatchEventRequest_Table_Filter_BEST, Init: true}},
					}}
					if err := srv.WatchEvent(wctx, req, func(*api.WatchEventResponse) {}); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				t0 := time.Now()
				for _, p := range paths {
					if _, err := srv.AddPath(context.Background(), &api.AddPathRequest{Path: p}); err != nil {
						b.Fatal(err)
					}
				}
				elapsed += time.Since(t0)
				b.StopTimer()
				cancel()
				srv.StopBgp(context.Background(), &api.StopBgpRequest{})
				b.StartTimer()
			}
			b.ReportMetric(float64(benchN*b.N)/elapsed.Seconds(), "addpath/s")
		})
	}
}

// BenchmarkMirrorMemory reports the heap the mirror itself needs per path
// (map entry, NLRI and action strings), and the whole speaker's (GoBGP's
// RIB included) for comparison.
func BenchmarkMirrorMemory(b *testing.B) {
	rules := benchRules(b, benchN)
	wire := make([][]byte, len(rules))
	for i, r := range rules {
		wire[i] = r.Match.AppendTo(nil)
	}
	ext := flowspec.Discard().AppendExtCommunities(nil)
	var mirrorBytes, speakerBytes float64
	for b.Loop() {
		// The mirror alone: entries decoded the way onTableEvent does.
		before := heap()
		m := make(map[flowspec.Match]flowspec.Action)
		for _, w := range wire {
			k, _, err := flowspec.DecodeMatch(flowspec.IPv4, w)
			if err != nil {
				b.Fatal(err)
			}
			a, err := flowspec.DecodeAction(ext)
			if err != nil {
				b.Fatal(err)
			}
			m[k] = a
		}
		mirrorBytes = float64(heap()-before) / benchN
		runtime.KeepAlive(m)

		// The speaker: GoBGP's RIB, its path attributes and the mirror.
		before = heap()
		s := startSpeaker(b, Config{})
		for _, r := range rules {
			if err := s.Announce(context.Background(), r); err != nil {
				b.Fatal(err)
			}
		}
		for s.Len() < benchN {
			time.Sleep(time.Millisecond)
		}
		speakerBytes = float64(heap()-before) / benchN
		s.Stop()
	}
	b.ReportMetric(mirrorBytes, "mirror-B/path")
	b.ReportMetric(speakerBytes, "speaker-B/path")
}

func heap() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// BenchmarkWirePath is the cost of building one path's wire form.
func BenchmarkWirePath(b *testing.B) {
	s := New(nil, Config{RouterID: netip.MustParseAddr("192.0.2.1")})
	r := benchRules(b, 1)[0]
	b.ReportAllocs()
	for b.Loop() {
		s.wirePath(r.Match, r.Action, false)
	}
}
