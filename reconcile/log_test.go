package reconcile

import (
	"bytes"
	"fmt"
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

// TestBulkLogsBounded: a pass that announces many rules (a start with
// 100 rules, a bulk load) logs one summary line at Info and each rule at
// Debug; a pass of an operator's few changes logs each at Info, keyed
// rule (the id) and text.
func TestBulkLogsBounded(t *testing.T) {
	for _, n := range []int{100, 250} {
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
		if c := strings.Count(text, "rule announced"); c != 0 {
			t.Errorf("%d rules: %d announced lines at info, want none", n, c)
		}
		if c := strings.Count(text, "rule changes (one line per rule at debug level)"); c != 1 || !strings.Contains(text, fmt.Sprintf("announced=%d", n)) {
			t.Errorf("%d rules: no one summary line:\n%s", n, text[max(0, len(text)-500):])
		}

		// The operator's own few changes next.
		out.mu.Lock()
		out.b.Reset()
		out.mu.Unlock()
		for i := range 3 {
			st.add(testRule(t, n+i, discard()), time.Time{})
		}
		pass(t, r)
		text = out.b.String()
		if c := strings.Count(text, "rule announced"); c != 3 || strings.Contains(text, "rule changes") {
			t.Errorf("3 changes: %d announced lines at info, want 3 and no summary:\n%s", c, text)
		}
		if !strings.Contains(text, "rule announced: rule=") || !strings.Contains(text, "text=") || strings.Contains(text, " id=") {
			t.Errorf("want keys rule (id) and text:\n%s", text[:min(len(text), 500)])
		}
	}
}
