package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ribkeeper/ribkeeper/api"

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

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A batch logs its first rule changes one by one at Info and the rest as
// one summary, so bulk loads do not flood the log.
func TestBatchLogsBounded(t *testing.T) {
	var buf syncBuf
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})
	srv := newAPI(log, newFakeRules(), newFakeRIB())
	var body strings.Builder
	body.WriteString(`{"rules":[`)
	n := api.MaxBatchInfoLogs + 50
	for i := range n {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"text":"match destination 10.%d.%d.1/32 then discard"}`, i/256, i%256)
	}
	body.WriteString(`]}`)
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/rules/batch", strings.NewReader(body.String())))
	if rec.Code != http.StatusOK {
		t.Fatalf("batch: %d %s", rec.Code, rec.Body)
	}
	out := buf.String()
	if got := strings.Count(out, "rule changed"); got != api.MaxBatchInfoLogs {
		t.Errorf("%d per-rule lines at info, want %d", got, api.MaxBatchInfoLogs)
	}
	if !strings.Contains(out, "and more rule changes in this batch") || !strings.Contains(out, "count=50") {
		t.Errorf("no summary line for the other 50:\n%s", out[max(0, len(out)-500):])
	}
}
