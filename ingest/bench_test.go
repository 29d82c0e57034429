package ingest_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/ingest"
)

// BenchmarkWebhook is one signed request of one signal through the
// handler: signature, window, replay cache, decoding, check, the ring and
// a sink that keeps nothing.
func BenchmarkWebhook(b *testing.B) {
	r := newRig(&testing.T{})
	r.sink.refuse = nil
	small := sources()
	small[0].ReplayCache = 1 << 24
	small[0].TimestampWindow = 24 * time.Hour
	if err := r.in.SetSources(small); err != nil {
		b.Fatal(err)
	}
	now := r.clock.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		body := `{"signals": [{"target": "192.0.2.10", "state": "ongoing", "pps": ` + strconv.Itoa(i) + `}]}`
		req := httptest.NewRequest(http.MethodPost, "/v1/signals/hook", strings.NewReader(body))
		req.Header.Set(ingest.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
		req.Header.Set(ingest.HeaderSignature, ingest.Sign([]byte(hookSecret), now.Unix(), []byte(body)))
		w := httptest.NewRecorder()
		r.mux.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
		r.sink.mu.Lock()
		r.sink.got = r.sink.got[:0]
		r.sink.mu.Unlock()
	}
}
