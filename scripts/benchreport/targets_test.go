package main

import (
	"strings"
	"testing"
)

// getterOf looks metrics up in a map of "name unit" keys.
func getterOf(m map[string]float64) getter {
	return func(name, unit string) (float64, bool) {
		v, ok := m[name+" "+unit]
		return v, ok
	}
}

// TestBulkRounds: BenchmarkBulk in rounds is judged on the median of the
// per-round ratios, and the figure shows every round; a run without
// rounds falls back to the ratio of the two rates.
func TestBulkRounds(t *testing.T) {
	m := map[string]float64{
		"BenchmarkBulk/ours x-gobgp":        0.79,
		"BenchmarkBulk/ours x-gobgp-r1":     0.81,
		"BenchmarkBulk/ours x-gobgp-r2":     0.79,
		"BenchmarkBulk/ours x-gobgp-r3":     0.70,
		"BenchmarkBulk/ours rounds":         3,
		"BenchmarkBulk/ours rounds-ge-goal": 1,
		"BenchmarkBulk/ours rules/s":        12000,
		"BenchmarkBulk/gobgp rules/s":       15000,
	}
	bulk := targets[0]
	if !strings.HasPrefix(bulk.what, "Bulk") {
		t.Fatalf("targets[0] is %q, want the bulk target", bulk.what)
	}
	fig, met, ok := bulk.eval(getterOf(m))
	if !ok || met {
		t.Errorf("median 0.79: met %v ok %v, want not met", met, ok)
	}
	for _, want := range []string{"0.79×, the median of 3 rounds", "each round: 0.81, 0.79, 0.70", "1 of 3 at 0.8× or more"} {
		if !strings.Contains(fig, want) {
			t.Errorf("figure %q lacks %q", fig, want)
		}
	}
	m["BenchmarkBulk/ours x-gobgp"] = 0.8
	if _, met, _ := bulk.eval(getterOf(m)); !met {
		t.Error("median 0.8: not met, want met")
	}
	// Without rounds: ours ÷ raw of the rates (0.8 here).
	delete(m, "BenchmarkBulk/ours x-gobgp")
	fig, met, ok = bulk.eval(getterOf(m))
	if !ok || !met || !strings.HasPrefix(fig, "0.80×") {
		t.Errorf("without rounds: %q met %v ok %v, want 0.80× met", fig, met, ok)
	}
}
