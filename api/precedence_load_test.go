package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/store"
)

// Many readers of the precedence order share one computation per change
// of the store: 16 parallel readers of ~2,000 rules cost one sort while
// nothing changes, and at most one more per write while writes go on, so
// they cannot keep the cores busy and make writes wait.
func TestPrecedenceOrderOncePerChange(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "rk.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := newAPI(nil, st, newFakeRIB(), api.WithMaxBodyBytes(1<<20))
	h := srv.Handler()
	do := func(method, path, body string) (int, string) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}
	const n = 2000
	for lo := 0; lo < n; lo += 500 {
		var b strings.Builder
		b.WriteString(`{"rules":[`)
		for i := lo; i < lo+500; i++ {
			if i > lo {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"text":"match destination 10.%d.%d.0/24 protocol ==6 destination-port ==%d then discard"}`, i>>8, i&255, 1+i%1000)
		}
		b.WriteString(`]}`)
		if code, body := do("POST", "/v1/rules/batch", b.String()); code != http.StatusOK {
			t.Fatalf("batch: %d %.300s", code, body)
		}
	}

	read := func(readers, each int) {
		var wg sync.WaitGroup
		for range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					if code, body := do("GET", "/v1/rules?order=precedence", ""); code != http.StatusOK || !strings.Contains(body, `"precedence":1`) {
						t.Errorf("list: %d %.200s", code, body)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	before := srv.PrecedenceBuilds()
	read(16, 2)
	if got := srv.PrecedenceBuilds() - before; got != 1 {
		t.Fatalf("32 reads with nothing changed computed the order %d times, want once", got)
	}

	// Writes while 16 readers poll: at most one computation per write.
	const writes = 10
	before = srv.PrecedenceBuilds()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range writes {
			if code, body := do("POST", "/v1/rules", fmt.Sprintf(`{"text":"match destination 10.200.%d.0/24 then discard"}`, i)); code != http.StatusCreated {
				t.Errorf("write %d: %d %s", i, code, body)
			}
		}
	}()
	read(16, 3)
	<-done
	read(1, 1)
	if got := srv.PrecedenceBuilds() - before; got < 1 || got > writes+1 {
		t.Errorf("%d writes among 48 reads computed the order %d times, want 1 to %d", writes, got, writes+1)
	}
	if code, body := do("GET", "/v1/rules?order=precedence&state=active", ""); code != http.StatusOK || strings.Count(body, `"id":`) != n+writes {
		t.Errorf("after the writes: %d, %d rules listed, want %d", code, strings.Count(body, `"id":`), n+writes)
	}
}
