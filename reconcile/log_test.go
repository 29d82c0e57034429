package reconcile

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// TestBulkLogsBounded: a pass that announces many rules logs the first
// maxChangeLogs at Info, keyed rule (the id) and text, and one summary.
func TestBulkLogsBounded(t *testing.T) {
	const n = 250
	var out syncBuf
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &out})
	st, sp := newFakeStore(), newFakeSpeaker()
	for i := range n {
		st.add(testRule(t, i, discard()), time.Time{})
	}
	r := New(log, st, sp, Config{})
	if res := pass(t, r); res.Added != n {
		t.Fatalf("pass = %+v", res)
	}
	text := out.b.String()
	if c := strings.Count(text, "rule announced"); c != maxChangeLogs {
		t.Errorf("%d announced lines at info, want %d", c, maxChangeLogs)
	}
	if !strings.Contains(text, "and 150 more rule changes") || !strings.Contains(text, "announced=150") {
		t.Errorf("no summary line:\n%s", text[max(0, len(text)-500):])
	}
	if !strings.Contains(text, "rule announced: rule=") || !strings.Contains(text, "text=") || strings.Contains(text, " id=") {
		t.Errorf("want keys rule (id) and text:\n%s", text[:min(len(text), 500)])
	}
}
