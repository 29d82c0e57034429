package metrics_test

import (
	"testing"

	"github.com/ribkeeper/ribkeeper/metrics"
)

// ribkeeper_build_info is 1 with the labels of the build it was last told,
// and only those: a second SetBuild replaces the series.
func TestBuildInfo(t *testing.T) {
	m := metrics.New(nil)
	reg := m.Registry()
	if _, ok := mxValue(t, reg, "ribkeeper_build_info", nil); ok {
		t.Fatal("ribkeeper_build_info has a series before SetBuild")
	}
	m.SetBuild(metrics.Build{Version: "v0.9.0", Commit: "abc", GoVersion: "go1.26.8", GoBGP: "v4.8.0"})
	m.SetBuild(metrics.Build{Version: "v1.0.0", Commit: "def", GoVersion: "go1.26.8", GoBGP: "v4.8.0"})
	want := mxL{"version": "v1.0.0", "commit": "def", "goversion": "go1.26.8", "gobgp": "v4.8.0"}
	if v, ok := mxValue(t, reg, "ribkeeper_build_info", want); !ok || v != 1 {
		t.Errorf("ribkeeper_build_info%v = %v (present %v), want 1", want, v, ok)
	}
	if v, _ := mxValue(t, reg, "ribkeeper_build_info", nil); v != 1 {
		t.Errorf("ribkeeper_build_info sums to %v over its series, want one series at 1", v)
	}
}
