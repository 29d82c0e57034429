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
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// startAPIOnly starts a ribkeeper with no BGP listener and no neighbor
// whose [api] section ends with the given keys (listen, tokens ...), for
// tests of the API alone.
func startAPIOnly(t *testing.T, apiKeys string) *daemon {
	t.Helper()
	dir := t.TempDir()
	d := &daemon{t: t, dir: dir, conf: filepath.Join(dir, "ribkeeper.toml"), socket: filepath.Join(dir, "rk.sock")}
	d.writeAPIOnly(apiKeys)
	t.Cleanup(d.stop)
	d.start()
	return d
}

func (d *daemon) writeAPIOnly(apiKeys string) {
	d.t.Helper()
	conf := fmt.Sprintf(`site = "web"
[log]
level = "debug"
[bgp]
asn = 65000
router_id = "127.0.0.1"
listen_port = -1
[store]
path = %q
[api]
socket = %q
%s`, filepath.Join(d.dir, "rk.db"), d.socket, apiKeys)
	if err := os.WriteFile(d.conf, []byte(conf), 0o600); err != nil {
		d.t.Fatal(err)
	}
}

// storedRules lists every stored rule's text, over the control socket.
func (d *daemon) storedRules() []string {
	d.t.Helper()
	var list struct {
		Rules []struct {
			Text string `json:"text"`
		} `json:"rules"`
	}
	out := d.mustCLI("rule", "list", "--json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		d.t.Fatalf("rule list --json: %v: %s", err, out)
	}
	var texts []string
	for _, r := range list.Rules {
		texts = append(texts, r.Text)
	}
	return texts
}

// attackPage is a page of another origin that tries every way a web page
// has to store a rule at target without ribkeeper's consent: a no-cors
// text/plain fetch (no preflight), a JSON fetch (needs a preflight), and
// a form posted as text/plain whose body is JSON. It shows #done when all
// have been tried, with what each got.
const attackPage = `<!doctype html>
<meta charset="utf-8">
<title>not ribkeeper</title>
<iframe name="sink" id="sink"></iframe>
<form id="form" method="POST" action="%[1]s" enctype="text/plain" target="sink">
<input type="hidden" name='{"text": "match destination 192.0.2.0/24 then discard", "reason": "' value='"}'>
</form>
<pre id="log"></pre>
<script>
const target = %[1]q;
const log = (k, v) => { document.getElementById("log").textContent += k + ": " + v + "\n"; };
async function attack() {
  try {
    const r = await fetch(target, {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
      body: JSON.stringify({text: "match destination 0.0.0.0/0 then discard"})});
    log("no-cors", "sent (opaque " + r.type + ")");
  } catch (e) { log("no-cors", "failed " + e); }
  try {
    const r = await fetch(target, {method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({text: "match destination ::/0 then discard"})});
    log("cors", "status " + r.status);
  } catch (e) { log("cors", "failed " + e); }
  await new Promise(resolve => {
    document.getElementById("sink").addEventListener("load", resolve, {once: true});
    document.getElementById("form").submit();
  });
  log("form", "submitted");
  const done = document.createElement("p");
  done.id = "done";
  done.textContent = "done";
  document.body.appendChild(done);
}
attack();
</script>
`

// No web page can write through the example configuration's listener
// (loopback, no tokens): a page served from another loopback origin tries
// a no-cors text/plain fetch, a JSON fetch and a text/plain form in
// Debian's chromium, and a page whose DNS name was rebound to the
// listener (chromium maps rebind.test to 127.0.0.1) posts JSON from what
// it takes for its own origin. Nothing is stored. Clients that are not
// browsers: a foreign Host is 421, text/plain from the listener's own
// host is 415, and JSON from it is stored.
func TestWebPageCannotWrite(t *testing.T) {
	b := newBrowser(t, chromedp.Flag("host-resolver-rules", "MAP rebind.test 127.0.0.1"))
	port := birdtest.FreePort(t, "127.0.0.1")
	d := startAPIOnly(t, fmt.Sprintf("listen = %q\n", fmt.Sprintf("127.0.0.1:%d", port)))
	target := fmt.Sprintf("http://127.0.0.1:%d/v1/rules", port)

	// The attacker's page, on another loopback address.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	page := fmt.Sprintf(attackPage, target)
	evil := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, page)
	})}
	go evil.Serve(ln)
	t.Cleanup(func() { evil.Close() })

	b.step("the attacker's page tries to write",
		chromedp.Navigate("http://"+ln.Addr().String()+"/"),
		chromedp.WaitVisible(chromedp.CSS("#done")))
	t.Logf("the attacker's page:\n%s", b.text("#log"))
	if got := d.storedRules(); len(got) != 0 {
		t.Errorf("a page of another origin stored %q", got)
	}
	if n := d.logCount(`write refused: from a web page`); n < 2 {
		t.Errorf("%d refusals of a web page's write logged, want at least 2 (the no-cors fetch and the form)", n)
	}

	// DNS rebinding: the page's origin is rebind.test:PORT, which now
	// resolves to the listener; to the browser the write is same-origin.
	rebound := fmt.Sprintf("http://rebind.test:%d", port)
	b.step("a rebound name opens the listener", chromedp.Navigate(rebound+"/ui/"))
	status := run(b, "a same-origin JSON write from the rebound page",
		chromedp.Evaluate[int](`fetch("/v1/rules", {method: "POST", headers: {"Content-Type": "application/json"},
			body: JSON.stringify({text: "match destination 198.51.100.0/24 then discard"})}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if status != http.StatusMisdirectedRequest {
		t.Errorf("the rebound page's write got %d, want 421", status)
	}
	if got := d.storedRules(); len(got) != 0 {
		t.Errorf("a rebound page stored %q", got)
	}

	// The same requests as curl makes them.
	post := func(host, ctype, text string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", target, strings.NewReader(`{"text": "`+text+`"}`))
		req.Host = host
		req.Header.Set("Content-Type", ctype)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	own := fmt.Sprintf("127.0.0.1:%d", port)
	if code, body := post("attacker.example", "text/plain", "match destination 0.0.0.0/0 then discard"); code != http.StatusMisdirectedRequest || !strings.Contains(body, "[api] hosts") {
		t.Errorf("Host attacker.example, text/plain: %d %s; want 421 naming [api] hosts", code, body)
	}
	if code, body := post("attacker.example:"+fmt.Sprint(port), "application/json", "match destination 0.0.0.0/0 then discard"); code != http.StatusMisdirectedRequest {
		t.Errorf("Host attacker.example, JSON: %d %s; want 421", code, body)
	}
	if code, body := post(own, "text/plain", "match destination 0.0.0.0/0 then discard"); code != http.StatusUnsupportedMediaType || !strings.Contains(body, "Content-Type: application/json") {
		t.Errorf("text/plain from the listener's host: %d %s; want 415 saying what to send", code, body)
	}
	if got := d.storedRules(); len(got) != 0 {
		t.Fatalf("stored %q", got)
	}
	const ok = "match destination 203.0.113.7/32 protocol udp then discard"
	for _, host := range []string{own, fmt.Sprintf("localhost:%d", port)} {
		if code, body := post(host, "application/json; charset=utf-8", ok); code != http.StatusCreated && code != http.StatusOK {
			t.Errorf("JSON with Host %s: %d %s", host, code, body)
		}
	}
	if got := d.storedRules(); len(got) != 1 || !strings.Contains(got[0], "203.0.113.7/32") {
		t.Errorf("stored %q, want the one JSON rule", got)
	}
}

// tokenRequest makes one request over the daemon's TCP listener with a
// bearer token (a JSON body when body is not empty).
func tokenRequest(t *testing.T, url, secret, method, path, body string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url+path, r)
	req.Header.Set("Authorization", "Bearer "+secret)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// eventStream is an open GET /v1/events.
type eventStream struct {
	r      *bufio.Reader
	cancel context.CancelFunc
}

func openEvents(t *testing.T, url, secret string) *eventStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/events: %d", resp.StatusCode)
	}
	return &eventStream{r: bufio.NewReader(resp.Body), cancel: cancel}
}

// until reads the stream until a line containing want, and fails if the
// stream ends first (or within the stream's 60 s bound).
func (s *eventStream) until(t *testing.T, want string) {
	t.Helper()
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("the event stream ended before %q: %v", want, err)
		}
		if strings.Contains(line, want) {
			return
		}
	}
}

// ends reads the stream to its end, which must come from the daemon (a
// clean end of the response), not from the 60 s bound.
func (s *eventStream) ends(t *testing.T, what string) {
	t.Helper()
	_, err := io.Copy(io.Discard, s.r)
	if err != nil {
		t.Fatalf("%s: the event stream did not end: %v", what, err)
	}
}

// Tokens reload on SIGHUP: a removed token gets 401 at once and its open
// event stream ends; a rotated token's old secret gets 401 and its new
// one works; an added token works; an unchanged token's stream goes on.
// A token file that others may read makes the reload refused, naming the
// chmod that fixes it, and check-config says the same.
func TestTokensReloadOnSIGHUP(t *testing.T) {
	port := birdtest.FreePort(t, "127.0.0.1")
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	secrets := t.TempDir()
	const (
		keepSecret  = "keep-secret-0123456789"
		goneSecret  = "gone-secret-0123456789"
		rotOld      = "rotated-old-0123456789"
		rotNew      = "rotated-new-0123456789"
		addedSecret = "added-secret-0123456789"
	)
	rotFile := filepath.Join(secrets, "rotated.token")
	if err := os.WriteFile(rotFile, []byte(rotOld+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	token := func(name, role, secret string) string {
		return fmt.Sprintf("[[api.token]]\nname = %q\nrole = %q\ntoken = %q\n", name, role, secret)
	}
	listen := fmt.Sprintf("listen = \"127.0.0.1:%d\"\n", port)
	rotated := fmt.Sprintf("[[api.token]]\nname = \"rotated\"\nrole = \"write\"\ntoken_file = %q\n", rotFile)
	d := startAPIOnly(t, listen+token("keep", "read", keepSecret)+token("gone", "read", goneSecret)+rotated)

	for _, s := range []string{keepSecret, goneSecret, rotOld} {
		if code, body := tokenRequest(t, url, s, "GET", "/v1/rules", ""); code != http.StatusOK {
			t.Fatalf("before the reload: %d %s", code, body)
		}
	}
	keep := openEvents(t, url, keepSecret)
	gone := openEvents(t, url, goneSecret)
	keep.until(t, "retry:")
	gone.until(t, "retry:")

	reload := func() {
		t.Helper()
		if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	reloaded := d.logCount(`configuration reloaded`)
	if err := os.WriteFile(rotFile, []byte(rotNew+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.writeAPIOnly(listen + token("keep", "read", keepSecret) + rotated + token("added", "write", addedSecret))
	reload()
	// The reload logs this once it is done; the tokens are applied first.
	waitFor(t, 30*time.Second, "the reload done (log)", func() bool {
		return d.logCount(`configuration reloaded`) > reloaded
	})
	if n := d.logCount(`reload: API tokens applied: added=\["added"\] removed=\["gone"\] changed=\["rotated"\]`); n != 1 {
		t.Errorf("the reload's log names the tokens added, removed and changed %d times, want 1:\n%s", n, d.logTail(20))
	}
	if n := d.logCount(`only take effect after a restart`); n != 0 {
		t.Errorf("the reload says a restart is needed:\n%s", d.logTail(20))
	}
	for _, c := range []struct {
		what, secret string
		want         int
	}{{"removed", goneSecret, 401}, {"rotated, old secret", rotOld, 401}, {"rotated, new secret", rotNew, 200},
		{"added", addedSecret, 200}, {"unchanged", keepSecret, 200}} {
		if code, body := tokenRequest(t, url, c.secret, "GET", "/v1/rules", ""); code != c.want {
			t.Errorf("%s token after the reload: %d %s, want %d", c.what, code, body, c.want)
		}
	}
	gone.ends(t, "the removed token's stream")
	for _, c := range []struct {
		what, secret string
		want         int
	}{{"removed", goneSecret, 401}, {"rotated, old secret", rotOld, 401}} {
		code, body := tokenRequest(t, url, c.secret, "POST", "/v1/rules", `{"text": "match destination 192.0.2.66/32 then discard"}`)
		if code != c.want {
			t.Errorf("%s token writes: %d %s, want %d", c.what, code, body, c.want)
		}
	}
	code, body := tokenRequest(t, url, rotNew, "POST", "/v1/rules", `{"text": "match destination 203.0.113.7/32 protocol udp then discard", "ttl": "10m"}`)
	if code != http.StatusCreated {
		t.Fatalf("the rotated token's new secret writes: %d %s", code, body)
	}
	// The unchanged token's stream is still open: it hears that rule.
	keep.until(t, "203.0.113.7/32")
	if code, body = tokenRequest(t, url, addedSecret, "POST", "/v1/rules", `{"text": "match destination 203.0.113.8/32 protocol udp then discard", "ttl": "10m"}`); code != http.StatusCreated {
		t.Fatalf("the added token writes: %d %s", code, body)
	}
	if got := d.storedRules(); len(got) != 2 {
		t.Errorf("stored %q, want the rotated and the added token's rules", got)
	}

	// A token file others can read: the reload is refused, check-config
	// says which chmod fixes it, and the tokens stay as they were.
	if err := os.Chmod(rotFile, 0o644); err != nil {
		t.Fatal(err)
	}
	refused := d.logCount(`reload refused`)
	reload()
	waitFor(t, 30*time.Second, "the reload refused (log)", func() bool { return d.logCount(`reload refused`) > refused })
	if n := d.logCount(regexp.QuoteMeta("chmod 600 " + rotFile)); n == 0 {
		t.Errorf("the refused reload does not say `chmod 600 %s`:\n%s", rotFile, d.logTail(10))
	}
	check := exec.Command(binary, "check-config", "--config", d.conf)
	var errBuf bytes.Buffer
	check.Stderr = &errBuf
	err := check.Run()
	exit, errOut := check.ProcessState.ExitCode(), errBuf.String()
	if err == nil || !strings.Contains(errOut, "has mode 0644") || !strings.Contains(errOut, "chmod 600 "+rotFile) {
		t.Errorf("check-config with a 0644 token file: exit %d, %s", exit, errOut)
	}
	if code, body := tokenRequest(t, url, rotNew, "GET", "/v1/rules", ""); code != http.StatusOK {
		t.Errorf("after a refused reload the token no longer works: %d %s", code, body)
	}
}
