package main

import (
	"context"
	"net/netip"
	"runtime"
	"runtime/metrics"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/reconcile"
)

// processCPU is the process's CPU time so far, in seconds.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// gcCPU is the CPU time the collector took so far (an estimate of the
// runtime's), in seconds.
func gcCPU() float64 {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return s[0].Value.Float64()
}

// BenchmarkStartup100k is the restart's start-up walk in process: 100,000
// FlowSpec rules in SQLite (the shape of e2e's BenchmarkRestart), the
// guardrails of a daemon with one neighbor, a fresh speaker without a
// session; timed from the walk's start until the speaker's mirror holds
// every rule and the reconciler is seeded (enforceAtStart). What the new
// process does before a router can hold the table, without the BGP
// transfer. cpu-s is the process's CPU meanwhile, gc-cpu-s the
// collector's share: figures that hold on a shared machine, where the
// time does not.
func BenchmarkStartup100k(b *testing.B) {
	const n = 100_000
	_, st := openTestStore(b)
	ctx := context.Background() // the walks outlast one test store call
	storeRestartTable(b, ctx, st, n, "bench")
	gr := config.Guardrails{Protected: config.Protected{
		Own:       []netip.Addr{netip.MustParseAddr("127.0.0.11")},
		Neighbors: []netip.Addr{netip.MustParseAddr("127.0.0.12")},
		Ports:     []uint16{179},
	}}
	gate := admit.New(admit.Config{Store: st, Guardrails: gr})
	for b.Loop() {
		b.StopTimer()
		sctx, cancel := context.WithCancel(ctx)
		sp := bgp.New(hclog.NewNullLogger(), bgp.Config{ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: -1})
		if err := sp.Start(sctx); err != nil {
			b.Fatal(err)
		}
		rec := reconcile.New(hclog.NewNullLogger(), st, sp, reconcile.Config{})
		runtime.GC()
		loaded := make(chan struct{})
		b.StartTimer()
		cpu0, gc0, alloc0 := processCPU(), gcCPU(), readMetric("/gc/heap/allocs:bytes")
		start := time.Now()
		// As the daemon: the collector runs lightly until the first load
		// is done (memory.go).
		gcDone := lightGCUntilLoaded(sctx, hclog.NewNullLogger(), loaded, firstLoadHeap, 100*time.Millisecond, firstLoadLongest)
		if got, err := enforceAtStart(sctx, hclog.NewNullLogger(), st, gate, rec); err != nil || got != 0 {
			b.Fatalf("enforceAtStart = %d, %v", got, err)
		}
		close(loaded)
		<-gcDone
		b.StopTimer()
		b.ReportMetric(processCPU()-cpu0, "cpu-s")
		b.ReportMetric(gcCPU()-gc0, "gc-cpu-s")
		b.ReportMetric(float64(readMetric("/gc/heap/allocs:bytes")-alloc0)/(1<<20), "alloc-MiB")
		if sp.Len() != n {
			b.Fatalf("the mirror holds %d of %d rules", sp.Len(), n)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s")
		cancel()
		sp.Stop()
		b.StartTimer()
	}
}
