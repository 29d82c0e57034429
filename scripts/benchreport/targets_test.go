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
// the ratio has no figure.
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
	// A run without BenchmarkBulk's ratio has no figure.
	delete(m, "BenchmarkBulk/ours x-gobgp")
	if fig, met, ok = bulk.eval(getterOf(m)); ok || met || fig != "" {
		t.Errorf("without x-gobgp: %q met %v ok %v, want no figure", fig, met, ok)
	}
}

// TestChurnBounded: BenchmarkChurn is judged on ours' verdict from the
// live-heap floors, the figure showing both windows and raw GoBGP's
// verdict; a run without the verdict has no figure.
func TestChurnBounded(t *testing.T) {
	m := map[string]float64{
		"BenchmarkChurn/ours rules":             1e6,
		"BenchmarkChurn/ours bounded":           1,
		"BenchmarkChurn/ours MB-live-floor-w1":  46,
		"BenchmarkChurn/ours MB-live-floor-w2":  40,
		"BenchmarkChurn/ours compactions-w1":    1,
		"BenchmarkChurn/ours compactions-w2":    2,
		"BenchmarkChurn/gobgp bounded":          0,
		"BenchmarkChurn/gobgp MB-live-floor-w1": 107,
		"BenchmarkChurn/gobgp MB-live-floor-w2": 204,
	}
	fig, met, ok := churnBounded(getterOf(m))
	if !ok || !met {
		t.Errorf("bounded: met %v ok %v, want met", met, ok)
	}
	for _, want := range []string{"live heap floor 46.00 → 40.00 MB", "1 and 2 compactions", "raw GoBGP (not bounded): live heap floor 107 → 204 MB"} {
		if !strings.Contains(fig, want) {
			t.Errorf("figure %q lacks %q", fig, want)
		}
	}
	m["BenchmarkChurn/ours bounded"] = 0
	if _, met, _ := churnBounded(getterOf(m)); met {
		t.Error("not bounded: met")
	}
	delete(m, "BenchmarkChurn/ours bounded")
	if fig, met, ok := churnBounded(getterOf(m)); ok || met || fig != "" {
		t.Errorf("without a verdict: %q met %v ok %v, want no figure", fig, met, ok)
	}
}
