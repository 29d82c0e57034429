package console

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The handler serves the pages with a policy that allows no inline or
// third-party script, and nothing outside /ui/.
func TestHandler(t *testing.T) {
	h := Handler()
	for _, tc := range []struct {
		path, want string
		code       int
	}{
		{"/ui/", "<!doctype html>", 200},
		{"/ui/app.js", "use strict", 200},
		{"/ui/style.css", ":root", 200},
		{"/ui/missing.js", "", 404},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", tc.path, nil))
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("GET %s: %d, want %d with %q", tc.path, w.Code, tc.code, tc.want)
		}
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: policy %q", tc.path, csp)
		}
	}
	// No page may carry an inline script or style, which the policy
	// would block.
	for _, name := range []string{"static/index.html"} {
		b, err := static.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if s := string(b); strings.Contains(s, "<script>") || strings.Contains(s, "style=") || strings.Contains(s, "onclick=") {
			t.Errorf("%s has inline script or style", name)
		}
	}
}

// fakeAPI answers the /v1 routes the pages read with fixed data: two
// peers (one down, with why), three rules (one shadowed), and two hours
// of series.
func fakeAPI(t *testing.T, now time.Time) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/ui/", Handler())
	js := func(path string, v any) {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(v)
		})
	}
	at := func(d time.Duration) string { return now.Add(d).UTC().Format(time.RFC3339) }
	js("/v1/whoami", map[string]string{"name": "ops", "role": "write"})
	js("/v1/status", map[string]any{
		"peers": []map[string]any{
			{"address": "192.0.2.1", "asn": 65001, "state": "established", "uptime_seconds": 3600, "families": []string{"ipv4-flowspec"},
				"sent": 2, "since": at(-time.Hour), "flaps": 1, "last_error": "hold-timer-expired", "last_error_at": at(-2 * time.Hour)},
			{"address": "192.0.2.2", "asn": 65002, "state": "active", "uptime_seconds": 0, "families": []string{"ipv4-flowspec"},
				"sent": 0, "since": at(-10 * time.Minute), "flaps": 0, "last_error": "notification-received cease/administrative shutdown",
				"last_error_at": at(-10 * time.Minute), "hint": "check that the router has a neighbor for 192.0.2.100 with AS 65000"},
		},
		"rules":       map[string]any{"active": 2, "withdrawing": 0, "withdrawn": 1, "expired": 0, "announced": 2, "by_family": map[string]int{"ipv4-flowspec": 2}},
		"last_pass":   map[string]any{"started": at(-5 * time.Second), "duration_seconds": 0.0004, "result": "ok", "adopted": 2},
		"sites":       []string{"lab"},
		"since_start": map[string]any{"started": at(-3 * time.Hour), "passes": 120, "readded": 3},
	})
	rule := func(id int, state, text string, extra map[string]any) map[string]any {
		r := map[string]any{"id": id, "family": "ipv4-flowspec", "text": text, "match": "", "action": "discard", "reason": "test",
			"actor": "ops", "sites": []string{}, "state": state, "created_at": at(-time.Hour), "updated_at": at(-time.Hour),
			"announced": state == "active", "last_error": ""}
		for k, v := range extra {
			r[k] = v
		}
		return r
	}
	js("/v1/rules", map[string]any{"order": "precedence", "rules": []map[string]any{
		rule(2, "active", "match destination 203.0.113.0/24 then discard", map[string]any{"announced_to": "1/2", "peers": []string{"192.0.2.1"}, "expires_at": at(90 * time.Minute)}),
		rule(3, "active", "match destination 203.0.113.7/32 protocol ==17 then discard", map[string]any{"announced_to": "1/2", "peers": []string{"192.0.2.1"}, "shadowed_by": 2}),
		rule(1, "withdrawn", "match destination 198.51.100.1/32 then discard", nil),
	}})
	var points []map[string]any
	for i := range 120 {
		drift := 0
		if i%37 == 5 {
			drift = i % 4
		}
		points = append(points, map[string]any{"at": at(time.Duration(i-120) * time.Minute), "active": 40 + i/3, "announced": 40 + i/3, "drift_repairs": drift, "peers_up": 1})
	}
	js("/v1/series", map[string]any{"interval_seconds": 60, "points": points})
	incident := map[string]any{"id": 4, "target": "203.0.113.7/32", "vector": map[string]any{"key": "udp||53|", "protocol": "udp", "dst_ports": []int{53}},
		"source": "fnm", "playbook": "udp-flood", "shadow": false, "state": "holding", "step": 2, "steps": 3,
		"opened_at": at(-20 * time.Minute), "step_at": at(-10 * time.Minute), "last_signal_at": at(-5 * time.Minute), "ends_at": at(5 * time.Minute),
		"signals": 41, "step_signals": 3, "peak_pps": 250000, "peak_bps": 0, "ttl_extensions": 1,
		"rules": []map[string]any{
			{"id": 3, "text": "match destination 203.0.113.7/32 protocol ==17 then discard", "step": 2, "state": "active", "expires_at": at(15 * time.Minute)},
			{"text": "route 203.0.113.7/32 then blackhole", "step": 2, "state": "refused", "error": "source \"fnm\" may not use action rtbh"},
		}}
	js("/v1/incidents", map[string]any{"incidents": []map[string]any{incident}})
	detail := maps.Clone(incident)
	detail["timeline"] = []map[string]any{
		{"at": at(-20 * time.Minute), "kind": "opened", "text": "signal from fnm: 203.0.113.7/32 vector udp||53| 250000 pps; playbook udp-flood"},
		{"at": at(-10 * time.Minute), "kind": "escalated", "text": "to step 2 of 3 after 10m0s in step 1 (escalate_after)"},
	}
	detail["timeline_omitted"] = 2
	js("/v1/incidents/4", detail)
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 7\nevent: hello\ndata: {\"id\":7}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	return mux
}

// The overview draws the series as a line and bars, says why a peer is
// down, and the rules list warns of a shadowed rule; the pages log no
// error. (The pages against a real daemon: e2e/console_test.go.)
func TestPagesInChromium(t *testing.T) {
	path := chromium(t)
	now := time.Now()
	hs := httptest.NewServer(fakeAPI(t, now))
	defer hs.Close()

	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1360, 900))
	defer cancelAlloc()
	ctx, cancelTab := chromedp.NewContext(actx)
	defer cancelTab()
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	var (
		mu       sync.Mutex
		problems []string
	)
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.Type == chromedp.ConsoleException {
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		v, err := chromedp.Run(sctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	shots := t.TempDir()
	if a := os.Getenv("ARTIFACTS"); a != "" {
		shots = filepath.Join(a, "console", t.Name())
		os.MkdirAll(shots, 0o755)
	}
	shot := func(name string) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		b, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		p := filepath.Join(shots, name+".png")
		os.WriteFile(p, b, 0o644)
		t.Logf("screenshot: %s", p)
	}

	step("overview", chromedp.Navigate(hs.URL+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#chart svg path.line-active")),
		chromedp.WaitVisible(chromedp.CSS(`#peers tr[data-peer="192.0.2.2"] .p-active`)))
	if n := eval(`String(document.querySelector("#chart path.line-active").getAttribute("d").split(/[ML]/).length - 1)`); n != "120" {
		t.Errorf("the chart's line has %s points, want 120", n)
	}
	if n := eval(`String(document.querySelectorAll("#chart rect.bar-drift").length)`); n == "0" {
		t.Error("the chart has no drift bars")
	}
	why := eval(`document.querySelector('#peers tr[data-peer="192.0.2.2"] td.why').textContent`)
	if !strings.Contains(why, "administrative shutdown") || !strings.Contains(why, "check that the router") {
		t.Errorf("why a peer is down reads %q", why)
	}
	shot("overview")
	step("rules", chromedp.Click(chromedp.CSS(`#nav a[data-view="rules"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#rules-table tr[data-rule="3"] .shadow`)))
	if w := eval(`document.querySelector('#rules-table tr[data-rule="3"] .shadow').textContent`); !strings.Contains(w, "rule 2") {
		t.Errorf("shadow warning reads %q", w)
	}
	if d := eval(`document.querySelector('#rules-table tr[data-rule="2"] .deliv').textContent`); d != "1/2 peers" {
		t.Errorf("delivery reads %q", d)
	}
	shot("rules")
	step("filter", chromedp.SendKeys(chromedp.CSS("#f-text"), "198.51.100"))
	if n := eval(`String(document.querySelectorAll("#rules-table tr[data-rule]").length)`); n != "1" {
		t.Errorf("the text filter leaves %s rules, want 1", n)
	}
	shot("rules-filtered")
	step("incidents", chromedp.Click(chromedp.CSS(`#nav a[data-view="incidents"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#incidents-table tr[data-incident="4"]`)))
	if row := eval(`document.querySelector('#incidents-table tr[data-incident="4"]').textContent`); !strings.Contains(row, "holding") ||
		!strings.Contains(row, "udp dst 53") || !strings.Contains(row, "udp-flood") || !strings.Contains(row, "2/3") {
		t.Errorf("incident row reads %q", row)
	}
	shot("incidents")
	step("incident", chromedp.Click(chromedp.CSS(`#incidents-table tr[data-incident="4"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#incident-rules tr[data-state="refused"]`)))
	if tl := eval(`document.querySelector('#incident-timeline').textContent`); !strings.Contains(tl, "escalate_after") || !strings.Contains(tl, "2 more entries not kept") {
		t.Errorf("incident timeline reads %q", tl)
	}
	if r := eval(`document.querySelector('#incident-rules tr[data-state="refused"]').textContent`); !strings.Contains(r, "may not use action rtbh") {
		t.Errorf("refused rule reads %q", r)
	}
	shot("incident")
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("page problem: %s", p)
	}
}

// chromium returns the path of Debian's chromium, or fails (CI) or skips
// the test when it is missing.
func chromium(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium not found but CI is set: .ci/run must install Debian's chromium package")
	}
	t.Skip("chromium not found (apt-get install chromium to run the console's browser tests)")
	return ""
}
