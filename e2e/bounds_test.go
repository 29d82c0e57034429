package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// What a client can make the daemon hold (issue 18): event streams, TCP
// connections, and the events of large rules. These daemons have no
// neighbors: the bounds are the API's.

// bare is a ribkeeper without neighbors whose TCP API listens on a free
// loopback port.
type bare struct {
	*daemon
	url string
}

// startBare starts ribkeeper with the [api] keys and tables api (tokens
// included) after its listen key, run through wrap if set.
func startBare(t *testing.T, apiExtra string, wrap []string) *bare {
	t.Helper()
	dir := t.TempDir()
	port := birdtest.FreePort(t, "127.0.0.1")
	d := &daemon{t: t, dir: dir, conf: filepath.Join(dir, "ribkeeper.toml"), socket: filepath.Join(dir, "rk.sock"), wrap: wrap}
	conf := fmt.Sprintf(`site = "bounds"
[bgp]
asn = 65000
router_id = "127.0.0.1"
listen_port = -1
[store]
path = %q
[api]
socket = %q
listen = "127.0.0.1:%d"
%s`, filepath.Join(dir, "rk.db"), d.socket, port, apiExtra)
	if err := os.WriteFile(d.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	d.start()
	return &bare{daemon: d, url: fmt.Sprintf("http://127.0.0.1:%d", port)}
}

// tokenTable is an [[api.token]] with an inline secret.
func tokenTable(name, role, secret string) string {
	return fmt.Sprintf("[[api.token]]\nname = %q\nrole = %q\ntoken = %q\n", name, role, secret)
}

// streamClient opens every request on a connection of its own, and
// gives up on a daemon that does not answer within 30 s.
var streamClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true, ResponseHeaderTimeout: 30 * time.Second,
	DialContext: (&net.Dialer{Timeout: 30 * time.Second}).DialContext}}

// cliWithin runs a client command over the control socket, failing the
// test if it has not answered within 30 s.
func (b *bare) cliWithin(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{args[0], "--socket", b.socket}, args[1:]...)...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("ribkeeper %s: no answer over the control socket within 30 s", strings.Join(args, " "))
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// openStream asks for GET /v1/events with secret: the open response, or
// the refusal's status and body (its connection closed).
func (b *bare) openStream(t *testing.T, secret string) (*http.Response, int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", b.url+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := streamClient.Do(req)
	if err != nil {
		t.Fatalf("GET /v1/events: %v", err)
	}
	if resp.StatusCode == http.StatusOK {
		t.Cleanup(func() { resp.Body.Close() })
		return resp, 200, ""
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return nil, resp.StatusCode, string(body)
}

// softNoFile is the soft open-file limit of pid.
func softNoFile(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(strings.TrimPrefix(line, "Max open files")); len(f) >= 2 && strings.HasPrefix(line, "Max open files") {
			n, err := strconv.ParseUint(f[0], 10, 64)
			if err != nil {
				t.Fatalf("limits line %q", line)
			}
			return n
		}
	}
	t.Fatal("no open-file limit in /proc/PID/limits")
	return 0
}

// openFDs counts pid's open file descriptors.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// Under an open-file limit of 300, a read token opening 320 event
// streams (which took every descriptor and stopped the TCP API and the
// control socket) gets max_event_streams_per_token of them and a 429
// naming the setting for the rest; more tokens get up to
// max_event_streams in total (derived from the limit); hundreds of idle
// connections are closed beyond max_connections. Throughout, the daemon
// stays under its limit and the control socket answers; once the
// clients are gone the TCP API answers again.
func TestEventStreamLimitsKeepTheSocketAnswering(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("prlimit (util-linux) is needed to run ribkeeper under an open-file limit")
		}
		t.Skip("prlimit (util-linux) not installed")
	}
	tokens := tokenTable("grafana", "read", "grafana-secret-0123456789")
	for i := range 6 {
		tokens += tokenTable(fmt.Sprintf("reader%d", i), "read", fmt.Sprintf("reader%d-secret-0123456789", i))
	}
	const fdLimit = 300
	b := startBare(t, tokens, []string{prlimit, fmt.Sprintf("--nofile=%d:%d", fdLimit, fdLimit)})
	pid := b.cmd.Process.Pid
	lim := api.DeriveLimits(softNoFile(t, pid))
	t.Logf("open-file limit %d: max_connections %d, max_event_streams %d, per token %d", lim.NoFile, lim.MaxConnections, lim.Streams.Total, lim.Streams.PerToken)
	if lim.Streams.Total >= fdLimit/2 || lim.MaxConnections >= fdLimit/2 {
		t.Fatalf("derived limits %+v leave too little of %d descriptors", lim, fdLimit)
	}
	socketAnswers := func(when string) {
		t.Helper()
		if out, code := b.cliWithin(t, "status"); code != 0 {
			t.Fatalf("%s: the control socket does not answer: exit %d %s", when, code, out)
		}
		if n := openFDs(t, pid); n >= fdLimit-16 {
			t.Errorf("%s: %d descriptors open, at the limit of %d", when, n, fdLimit)
		}
	}

	// One token, 320 streams.
	var held []io.Closer // what the clients hold open
	opened := 0
	for i := range 320 {
		resp, code, body := b.openStream(t, "grafana-secret-0123456789")
		if code == 200 {
			held = append(held, resp.Body)
			opened++
			continue
		}
		if code != http.StatusTooManyRequests || !strings.Contains(body, `"too_many_streams"`) || !strings.Contains(body, "max_event_streams_per_token") {
			t.Fatalf("stream %d of one token: %d %s; want 429 too_many_streams naming max_event_streams_per_token", i+1, code, body)
		}
	}
	if opened != lim.Streams.PerToken {
		t.Errorf("one token opened %d streams, want %d", opened, lim.Streams.PerToken)
	}
	socketAnswers("after 320 streams of one token")

	// More tokens, up to the total.
	var totalRefusal string
	for i := range 6 {
		for range lim.Streams.PerToken {
			resp, code, body := b.openStream(t, fmt.Sprintf("reader%d-secret-0123456789", i))
			switch {
			case code == 200:
				held = append(held, resp.Body)
				opened++
			case code == http.StatusTooManyRequests && strings.Contains(body, "[api] max_event_streams "):
				totalRefusal = body
			default:
				t.Fatalf("stream of reader%d: %d %s", i, code, body)
			}
		}
	}
	if opened != lim.Streams.Total || !strings.Contains(totalRefusal, "open-file limit") {
		t.Errorf("%d streams open in all, want %d; refusal %q, want one naming max_event_streams and the open-file limit", opened, lim.Streams.Total, totalRefusal)
	}
	if out, code := b.cliWithin(t, "rule", "add", "--ttl", "10m", "match destination 192.0.2.1/32 then discard"); code != 0 {
		t.Fatalf("rule add over the control socket with every TCP stream taken: exit %d %s", code, out)
	}
	socketAnswers("with every TCP stream taken")

	// Idle connections beyond the limit are closed by the daemon.
	for range 2 * lim.MaxConnections {
		c, err := net.Dial("tcp", strings.TrimPrefix(b.url, "http://"))
		if err != nil {
			t.Fatalf("dial the TCP API: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		held = append(held, c)
	}
	socketAnswers(fmt.Sprintf("with %d idle TCP connections", 2*lim.MaxConnections))

	// Once the clients are gone, the TCP API serves again.
	for _, c := range held {
		c.Close()
	}
	waitFor(t, 30*time.Second, "the TCP API answering again", func() bool {
		_, code, _ := b.openStream(t, "grafana-secret-0123456789")
		return code == 200
	})
}

// The rule of about a megabyte of sites (RSS grew by 305 MB over
// 150 updates, and a read token's stream received 153 MB in 30 s) is
// refused by the gate's [limits] (max_sites_per_rule 32 and
// max_site_name_bytes 64 by default: 2 KB of sites at most). With those
// limits opened to their largest (1024 sites of 128 bytes), 150 updates of
// the largest rule the gate takes still leave ribkeeper's RSS within
// rssBound of where it started: the event ring keeps at most
// event_ring_bytes, a rule event over max_event_bytes is sent reduced, and
// a stream that reads nothing is dropped instead of queueing. A stream
// that reads everything receives kilobytes, not the rules.
func TestLargeRuleUpdatesKeepRSSBounded(t *testing.T) {
	const (
		updates  = 150
		rssBound = 96 << 20
	)
	b := startBare(t, tokenTable("noc", "write", "noc-secret-0123456789")+tokenTable("grafana", "read", "grafana-secret-0123456789")+
		"[limits]\nmax_sites_per_rule = 1024\nmax_site_name_bytes = 128\n", nil)
	pid := b.cmd.Process.Pid
	b.mustCLI("rule", "add", "--ttl", "1h", "match destination 198.51.100.1/32 then discard")

	// A stream that reads everything, and one that reads nothing.
	reader, _, refused := b.openStream(t, "grafana-secret-0123456789")
	if reader == nil {
		t.Fatal(refused)
	}
	var received atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(countingWriter{&received}, reader.Body)
	}()
	stalled, _, refused := b.openStream(t, "grafana-secret-0123456789")
	if stalled == nil {
		t.Fatal(refused)
	}
	bufio.NewReader(stalled.Body).Peek(1)
	base, _ := rss(t, pid)

	// The largest sites list the API accepts, up to about a megabyte.
	n := 7000
	post := func(i int) (int, string) {
		sites := make([]string, n)
		for j := range sites {
			sites[j] = fmt.Sprintf("%06d-%04d-%s", j, i, strings.Repeat("s", 100))
		}
		body, _ := json.Marshal(map[string]any{
			"text": "match destination 198.51.100.1/32 then discard", "ttl": "1h",
			"reason": fmt.Sprintf("update %d", i), "sites": sites, "allow_unknown_sites": true,
		})
		req, _ := http.NewRequest("POST", b.url+"/v1/rules", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer noc-secret-0123456789")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	for first := true; ; first = false {
		code, body := post(0)
		if code == 200 || code == 201 {
			break
		}
		if first && (code != http.StatusBadRequest || !strings.Contains(body, "max_sites_per_rule")) {
			t.Fatalf("a rule of about a megabyte of sites: %d %.300s, want 400 naming [limits] max_sites_per_rule", code, body)
		}
		if code >= 500 || n < 100 {
			t.Fatalf("a rule with %d sites: %d %s", n, code, body)
		}
		t.Logf("%d sites refused (%d %.200s): halving", n, code, body)
		n /= 2
	}
	t.Logf("each update carries %d sites of 112 bytes (%d KB)", n, n*115/1000)
	peak := base
	for i := 1; i < updates; i++ {
		if code, body := post(i); code != 200 {
			t.Fatalf("update %d: %d %.300s", i, code, body)
		}
		if cur, _ := rss(t, pid); cur > peak {
			peak = cur
		}
	}
	// The reading stream has the last update's event.
	waitFor(t, 30*time.Second, "the reading stream got the last update", func() bool { return received.Load() >= int64(updates)*200 })
	reader.Body.Close()
	<-done
	t.Logf("RSS %d MB at the start, at most %d MB during %d updates (+%d MB); the reading stream received %d KB",
		base>>20, peak>>20, updates, (peak-base)>>20, received.Load()>>10)
	if peak-base > rssBound {
		t.Errorf("RSS grew by %d MB over %d updates of a %d KB rule, more than %d MB", (peak-base)>>20, updates, n*115/1000, rssBound>>20)
	}
	if got := received.Load(); got > 4<<20 {
		t.Errorf("the reading stream received %d KB for %d updates, want the reduced events only", got>>10, updates)
	}
	b.mustCLI("status")
}

// countingWriter counts what is written to it.
type countingWriter struct{ n *atomic.Int64 }

func (w countingWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return len(p), nil
}
