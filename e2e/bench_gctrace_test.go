package e2e

// The live heap of a benchmarked process, cycle by cycle: GODEBUG=gctrace=1
// makes the Go runtime print one line per garbage collection on the
// process's stderr, "gc N @Ts P%: … A->B->C MB, G MB goal, …", where C is
// the heap the cycle marked live (MiB) and G the goal it set for the next
// one. Both ribkeeper and the raw GoBGP helper are Go processes, so the
// same reading serves both sides, costs the process nothing between
// cycles and needs no scrape: GET /metrics counts the stored rules, which
// takes longer the more rules a churn left behind (about 0.7 s a scrape
// with 300,000 stored), and its Go gauges give the heap goal, not the
// live heap.
//
// Both processes write their own log to the same stderr, and the runtime
// writes a trace line in several pieces, so a log line (written whole)
// can land inside one: those log lines are cut out before the trace
// lines are read.

import (
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"
)

// gcCycle is one garbage collection of a process.
type gcCycle struct {
	at     time.Time // about when it ended: the process's start + the trace's @ offset
	live   int64     // bytes the cycle marked live (MiB resolution)
	goal   int64     // the heap goal it set (MiB resolution)
	forced bool      // runtime.GC or debug.FreeOSMemory, not the pacer
}

var (
	// A log line of ribkeeper (hclog: RFC 3339 time, [LEVEL]) or of the
	// raw helper's GoBGP (time=… level=…), with its newline.
	gcTraceNoise = regexp.MustCompile(`(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d) +\[[A-Z]+\]|time="?\d{4}-\d\d-\d\dT)[^\n]*\n`)
	gcTraceLine  = regexp.MustCompile(`(?m)^gc \d+ @([0-9.]+)s \d+%: .*?, (\d+)->(\d+)->(\d+) MB, (\d+) MB goal,.*?(\(forced\))?$`)
)

// gcCycles reads the gctrace lines of a process's stderr (data), started
// at started, in order. data must hold one run of the process: the @
// times of another count from its own start.
func gcCycles(data []byte, started time.Time) []gcCycle {
	data = gcTraceNoise.ReplaceAll(data, nil)
	var out []gcCycle
	for _, m := range gcTraceLine.FindAllSubmatch(data, -1) {
		at, err1 := strconv.ParseFloat(string(m[1]), 64)
		live, err2 := strconv.ParseInt(string(m[4]), 10, 64)
		goal, err3 := strconv.ParseInt(string(m[5]), 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		out = append(out, gcCycle{
			at:     started.Add(time.Duration(at * float64(time.Second))),
			live:   live << 20,
			goal:   goal << 20,
			forced: len(m[6]) > 0,
		})
	}
	return out
}

// TestGCCycles reads trace lines between log lines, with a log line
// written into the middle of one, and a forced cycle.
func TestGCCycles(t *testing.T) {
	start := time.Date(2026, 11, 26, 18, 0, 0, 0, time.UTC)
	data := "2026-11-26T18:03:10.638Z [INFO]  ribkeeper: starting: version=unknown\n" +
		"gc 1 @0.044s 2%: 0.59+4.3+0.24 ms clock, 1.1+0.99/0.68/0.36+0.49 ms cpu, 3->4->2 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P\n" +
		"gc 2 @19.723s 0%: 0.97+256+0.20 ms clock, 1.9+0/137/139+0.41 ms cpu, 534->5" +
		"2026-11-26T18:03:25.603Z [INFO]  ribkeeper.reconcile: pass: added=1000 updated=0\n" +
		"43->62 MB, 541 MB goal, 0 MB stacks, 0 MB globals, 2 P\n" +
		"time=2026-11-26T18:03:26.000Z level=INFO msg=\"Peer Up\" Topic=Peer\n" +
		"gc 3 @25.5s 1%: 0.1+2+0.01 ms clock, 0.2+0/1/2+0.02 ms cpu, 100->101->80 MB, 160 MB goal, 0 MB stacks, 0 MB globals, 2 P (forced)\n" +
		"gc 4 @26s 1%: 0.1+2+0.01 ms clock, 0.2+0/1/2+0.02 ms cpu, 90->" // cut short: not read
	got := gcCycles([]byte(data), start)
	want := []gcCycle{
		{at: start.Add(44 * time.Millisecond), live: 2 << 20, goal: 4 << 20},
		{at: start.Add(19723 * time.Millisecond), live: 62 << 20, goal: 541 << 20},
		{at: start.Add(25500 * time.Millisecond), live: 80 << 20, goal: 160 << 20, forced: true},
	}
	if !slices.Equal(got, want) {
		t.Errorf("cycles\n%+v\nwant\n%+v", got, want)
	}
}
