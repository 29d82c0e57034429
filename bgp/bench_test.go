package bgp

import (
	"context"
	"encoding/binary"
	"net/netip"
	"runtime"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/server"

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

// BenchmarkAnnounce10k: one op is announcing 10k rules into a fresh
// speaker, one Announce call each ("single") or one call for all
// ("batch"); "mirrored" also waits until the mirror holds all of them.
func BenchmarkAnnounce10k(b *testing.B) {
	for _, batch := range []bool{false, true} {
		name := "single"
		if batch {
			name = "batch"
		}
		b.Run(name, func(b *testing.B) {
			rules := benchRules(b, benchN)
			ctx := context.Background()
			var announce, mirrored time.Duration
			for b.Loop() {
				b.StopTimer()
				s := startSpeaker(b, Config{})
				b.StartTimer()
				t0 := time.Now()
				if batch {
					for _, err := range s.Announce(ctx, rules) {
						if err != nil {
							b.Fatal(err)
						}
					}
				} else {
					for _, r := range rules {
						if err := announceOne(s, ctx, r); err != nil {
							b.Fatal(err)
						}
					}
				}
				announce += time.Since(t0)
				waitLen(b, s, benchN)
				mirrored += time.Since(t0)
				b.StopTimer()
				s.Stop()
				b.StartTimer()
			}
			b.ReportMetric(float64(benchN*b.N)/announce.Seconds(), "announce/s")
			b.ReportMetric(float64(benchN*b.N)/mirrored.Seconds(), "mirrored/s")
		})
	}
}

// waitLen waits for the mirror to hold n paths, woken by its changes.
func waitLen(b testing.TB, s *Speaker, n int) {
	deadline := time.After(time.Minute)
	for s.Len() < n {
		select {
		case <-s.Changes():
		case <-deadline:
			b.Fatalf("mirror has %d paths after a minute, want %d", s.Len(), n)
		}
	}
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
			paths := make([]*apiutil.Path, len(rules))
			for i, r := range rules {
				p, _, _, err := enc.announcePath(r)
				if err != nil {
					b.Fatal(err)
				}
				paths[i] = p
			}
			var elapsed time.Duration
			for b.Loop() {
				b.StopTimer()
				srv := server.NewBgpServer(server.LoggerOption(newGoBGPLogger(testLogger(b), nil), nil))
				go srv.Serve()
				if err := srv.StartBgp(context.Background(), &api.StartBgpRequest{Global: &api.Global{
					Asn: 65000, RouterId: "192.0.2.1", ListenPort: -1,
				}}); err != nil {
					b.Fatal(err)
				}
				wctx, cancel := context.WithCancel(context.Background())
				if watch {
					if err := srv.WatchEvent(wctx, server.WatchEventMessageCallbacks{OnBestPath: func([]*apiutil.Path, time.Time) {}}, server.WatchBestPath(true)); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				t0 := time.Now()
				for i := 0; i < len(paths); i += batchSize {
					if _, err := srv.AddPath(apiutil.AddPathRequest{Paths: paths[i:min(i+batchSize, len(paths))]}); err != nil {
						b.Fatal(err)
					}
				}
				elapsed += time.Since(t0)
				b.StopTimer()
				cancel()
				srv.Stop()
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
		// The mirror alone: entries decoded the way onBestPaths does.
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
		for _, err := range s.Announce(context.Background(), rules) {
			if err != nil {
				b.Fatal(err)
			}
		}
		waitLen(b, s, benchN)
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

// BenchmarkAnnouncePath is the cost of building one path for GoBGP.
func BenchmarkAnnouncePath(b *testing.B) {
	s := New(nil, Config{RouterID: netip.MustParseAddr("192.0.2.1")})
	r := benchRules(b, 1)[0]
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := s.announcePath(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMirrorEvents is the watch handler's cost per path
// (onBestPaths): 100,000 RTBH routes delivered 1,000 a callback into an
// empty mirror, then their withdrawals. One op is the whole run;
// ns/path is per path event. Taking the least of several runs
// compares two versions best: the machine's other work only adds.
func BenchmarkMirrorEvents(b *testing.B) {
	const n, batch = 100_000, 1000
	s := New(nil, Config{RouterID: netip.MustParseAddr("192.0.2.1"), RouteNextHop4: netip.MustParseAddr("192.0.2.99")})
	adds := make([]*apiutil.Path, n)
	dels := make([]*apiutil.Path, n)
	for i := range adds {
		m, err := flowspec.RouteMatch(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32))
		if err != nil {
			b.Fatal(err)
		}
		p, err := s.routeAnnouncePath(flowspec.Rule{Match: m, Action: flowspec.Blackhole()})
		if err != nil {
			b.Fatal(err)
		}
		adds[i] = p
		d := *p
		d.Withdrawal = true
		dels[i] = &d
	}
	b.ReportAllocs()
	for b.Loop() {
		// A new speaker: the mirror grows from empty every time, as in
		// a bulk load.
		s := New(nil, Config{RouterID: netip.MustParseAddr("192.0.2.1"), RouteNextHop4: netip.MustParseAddr("192.0.2.99")})
		epoch := s.mirror.currentEpoch()
		for lo := 0; lo < n; lo += batch {
			s.onBestPaths(epoch, adds[lo:lo+batch])
		}
		if s.Len() != n {
			b.Fatalf("mirror holds %d of %d paths", s.Len(), n)
		}
		for lo := 0; lo < n; lo += batch {
			s.onBestPaths(epoch, dels[lo:lo+batch])
		}
		if s.Len() != 0 {
			b.Fatalf("mirror holds %d paths after withdrawing them all", s.Len())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(2*n), "ns/path")
}
