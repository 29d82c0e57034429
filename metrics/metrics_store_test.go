package metrics_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/metrics"
	"github.com/ribkeeper/ribkeeper/store"
)

// The store's condition: writable with a passed integrity check, then,
// its file deleted, refused for the reason "lost".
func TestStoreMetrics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rk.db")
	st, err := store.Open(context.Background(), store.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := metrics.New(hclog.NewNullLogger())
	m.Watch(metrics.Sources{Store: st})
	reg := m.Registry()
	want := func(name string, labels map[string]string, v float64) {
		t.Helper()
		if got, ok := mxValue(t, reg, name, labels); !ok || got != v {
			t.Errorf("%s%v = %v (present %v), want %v", name, labels, got, ok, v)
		}
	}
	want("ribkeeper_store_writable", nil, 1)
	want("ribkeeper_store_integrity_ok", nil, 1)
	want("ribkeeper_store_refused", map[string]string{"reason": "lost"}, 0)
	want("ribkeeper_store_late_commits_total", nil, 0)
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		os.Remove(p)
	}
	st.CheckFile()
	want("ribkeeper_store_writable", nil, 0)
	want("ribkeeper_store_refused", map[string]string{"reason": "lost"}, 1)
	want("ribkeeper_store_refused", map[string]string{"reason": "corrupt"}, 0)
}
