package playbook_test

import (
	"context"
	"net/netip"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/playbook"
	"github.com/ribkeeper/ribkeeper/signals"
	"github.com/ribkeeper/ribkeeper/store"
)

// BenchmarkSignals measures sustained signals per second with
// correlation and playbooks on: a real SQLite store and admission gate,
// incidents saved, 1,000 attacks going on at once (their first signals
// opened them and stored their rules before the timer starts), signals
// for them from parallel senders as the ways in deliver them. The
// "opening" case opens a new incident, with its rule and saved
// incident, on every signal.
func BenchmarkSignals(b *testing.B) {
	for _, c := range []struct {
		name    string
		targets int
		open    bool
	}{
		{"ongoing-1000", 1000, false},
		{"opening", 0, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			cfg, err := config.Parse("b.toml", []byte(`
[bgp]
asn = 65000
router_id = "192.0.2.1"
[guardrails]
max_active_rules = 0
max_rules_per_destination = 0
max_new_rules_per_minute = 0
[incidents]
max_open = 1000000
[[source]]
name = "fnm"
kind = "gobgp"
prefixes = ["10.0.0.0/8"]
max_new_rules_per_minute = -1

[[playbook]]
name = "udp-flood"
protocols = ["udp"]
min_pps = 1000
[[playbook.step]]
rules = ["match destination {target} protocol {protocol} destination-port {dst_ports} then rate-limit 125000"]
ttl = "20m"
escalate_after = "10m"
escalate_signals = 1000000
[[playbook.step]]
rtbh = true
ttl = "30m"
`))
			if err != nil {
				b.Fatal(err)
			}
			st, err := store.Open(ctx, store.Config{Driver: "sqlite", Path: filepath.Join(b.TempDir(), "rk.db")})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			g := admit.New(admit.Config{Store: st, Guardrails: cfg.Guardrails})
			eng := playbook.New(playbook.Config{Gate: g, Store: st}, cfg)
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); eng.Run(rctx) }()
			defer func() { cancel(); <-done }()
			target := func(i int) netip.Prefix {
				return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
			}
			signal := func(i int, state signals.State) signals.Signal {
				return signals.Signal{Source: "fnm", Target: target(i), State: state, PPS: 50000,
					Vector: signals.Vector{Protocol: "udp", DstPorts: []uint16{53}}}
			}
			for i := range c.targets {
				if err := eng.Accept(ctx, signal(i, signals.Start)); err != nil {
					b.Fatal(err)
				}
			}
			if eng.Open() != c.targets {
				b.Fatalf("%d incidents open, want %d", eng.Open(), c.targets)
			}
			var next atomic.Int64
			b.ResetTimer()
			t0 := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := int(next.Add(1))
					s := signal(n%max(c.targets, 1), signals.Ongoing)
					if c.open {
						s = signal(1<<20+n, signals.Start)
					}
					if err := eng.Accept(ctx, s); err != nil {
						b.Error(err)
						return
					}
				}
			})
			el := time.Since(t0)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/el.Seconds(), "signals/s")
			if c.open && eng.Open() != b.N {
				b.Fatalf("%d incidents open after %d opening signals", eng.Open(), b.N)
			}
		})
	}
}
