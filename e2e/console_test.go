package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

const (
	consoleWriteToken = "console-write-0123456789"
	consoleReadToken  = "console-read-0123456789"
	// consoleScopedToken is a read token that sees 198.51.100.0/24 only.
	consoleScopedToken = "console-scoped-0123456789"
)

// chromium returns the path of Debian's chromium, or fails (CI) or skips
// the test when it is missing.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium not found but CI is set: .ci/run must install Debian's chromium package")
	}
	t.Skip("chromium not found (apt-get install chromium to run the console's browser tests)")
	return ""
}

// consolePair starts BIRD and a ribkeeper whose TCP listener (and so the
// console) has a write and a read token, and returns the listener's URL.
func consolePair(t *testing.T) (*daemon, *birdtest.Router, string) {
	t.Helper()
	birdtest.Binary(t)
	dir := t.TempDir()
	port := birdtest.FreePort(t, "127.0.0.1")
	// The pair's store text follows the [api] section's socket key: the
	// listener's keys go first, then the store's own section.
	api := fmt.Sprintf(`listen = "127.0.0.1:%d"
[[api.token]]
name = "ops"
role = "write"
token = %q
[[api.token]]
name = "viewer"
role = "read"
token = %q
[[api.token]]
name = "customer"
role = "read"
token = %q
prefixes = ["198.51.100.0/24"]
`, port, consoleWriteToken, consoleReadToken, consoleScopedToken)
	d, bird := startPair(t, pair{
		rkAddr: "127.0.0.1", birdAddr: "127.0.0.2", site: "e2e", dir: dir,
		store: api + fmt.Sprintf("[store]\npath = %q\n", filepath.Join(dir, "rk.db")),
	})
	return d, bird, fmt.Sprintf("http://127.0.0.1:%d", port)
}

// browser is one headless chromium tab. It collects every console error,
// warning and uncaught exception of the pages, and saves screenshots.
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots string

	mu       sync.Mutex
	problems []string
}

func newBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) *browser {
	t.Helper()
	path := chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1360, 900),
	}
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx, shots: shotDir(t)}
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	start, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	// The first action starts the browser, which lives as long as ctx:
	// it must not run under the timeout.
	errc := make(chan error, 1)
	go func() { errc <- chromedp.Do(ctx) }()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("start chromium (%s): %v", path, err)
		}
	case <-start.Done():
		t.Fatalf("chromium (%s) did not start within 60 s", path)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			b.console(m)
		}
	}()
	return b
}

// shotDir is where screenshots go: $ARTIFACTS/console/TEST if set, else
// the test's temporary directory.
func shotDir(t *testing.T) string {
	if a := os.Getenv("ARTIFACTS"); a != "" {
		dir := filepath.Join(a, "console", t.Name())
		if err := os.MkdirAll(dir, 0o755); err == nil {
			return dir
		}
	}
	return t.TempDir()
}

// console records the page's errors, warnings and exceptions. The API's
// error answers (401 before login, 400 for a typo) are part of the pages'
// work, and Chrome logs each as a failed load: network entries about /v1/
// are not problems. Anything else at error or warning level is a fault of
// the pages (a missing file, a CSP violation, a script error).
func (b *browser) console(m chromedp.ConsoleMessage) {
	switch m.Type {
	case chromedp.ConsoleError, chromedp.ConsoleWarning, chromedp.ConsoleException, "assert":
	default:
		return
	}
	if m.Source == "network" && strings.Contains(m.URL, "/v1/") {
		return
	}
	b.problem("%s at %s:%d: %s", m.Type, m.URL, m.Line+1, m.Text)
}

func (b *browser) problem(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}

// step runs actions within 30 s and fails the test naming what it waited for.
func (b *browser) step(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		sctx, scancel := context.WithTimeout(b.ctx, 10*time.Second)
		defer scancel()
		if shot, err := chromedp.Run(sctx, chromedp.FullScreenshot(100)); err == nil {
			p := filepath.Join(b.shots, "failed.png")
			os.WriteFile(p, shot, 0o644)
			b.t.Logf("screenshot of the failure: %s", p)
		}
		if text, err := chromedp.Run(sctx, chromedp.Evaluate[string](`location.hash + "\n" + document.body.innerText`)); err == nil {
			b.t.Logf("the page (%s) reads:\n%s", b.shots, text)
		}
		b.t.Fatalf("browser: %s: %v", what, err)
	}
}

// shot saves a screenshot of the whole page as NAME.png.
func (b *browser) shot(name string) {
	b.t.Helper()
	buf := run(b, "screenshot "+name, chromedp.FullScreenshot(100))
	p := filepath.Join(b.shots, name+".png")
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", p)
}

// run runs one action within 30 s and returns its value.
func run[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatalf("browser: %s: %v", what, err)
	}
	return v
}

// eval returns the value of a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	return run(b, "evaluate "+expr, chromedp.Evaluate[T](expr))
}

// text returns the text of the element sel selects.
func (b *browser) text(sel string) string {
	b.t.Helper()
	return run(b, "text of "+sel, chromedp.Text(chromedp.CSS(sel)))
}

// clearInput empties an input, as selecting its text and deleting it
// would. (chromedp's SetValue cannot set "".)
func clearInput(sel string) chromedp.Action[chromedp.Void] {
	return js(`(() => { const e = document.querySelector(` + strconv.Quote(sel) + `); e.value = ""; e.dispatchEvent(new Event("input", {bubbles: true})); })()`)
}

// js is an action that runs JavaScript in the page.
func js(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[any](expr)(ctx, t)
		return err
	})
}

// noProblems fails the test for every console error, warning or
// exception the pages produced.
func (b *browser) noProblems() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		b.t.Errorf("page problem: %s", p)
	}
}

func (b *browser) login(token string) {
	b.t.Helper()
	b.step("log in",
		chromedp.WaitVisible(chromedp.CSS("#login-token")),
		chromedp.SendKeys(chromedp.CSS("#login-token"), token),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS("#nav")),
		chromedp.WaitVisible(chromedp.CSS("#live.on")))
}

const (
	consoleCLIRule  = "match destination 198.51.100.20/32 protocol tcp destination-port ==443 then discard"
	consoleCLIFlow  = "flow4 { dst 198.51.100.20/32; proto 6; dport 443; }"
	consoleFormRule = "match destination 203.0.113.50/32 protocol udp source-port ==123 then discard"
	consoleFormFlow = "flow4 { dst 203.0.113.50/32; proto 17; sport 123; }"
	consoleTypo     = "match destinaton 203.0.113.50/32 protocol udp source-port ==123 then discard"
)

// The console end to end, in a real browser against a real ribkeeper and
// BIRD: log in; a rule added with the CLI appears without a reload; a typo
// in the form is shown at the offending word; a rule added with the form
// reaches BIRD; the withdraw buttons (after a confirmation) empty BIRD;
// a read token sees no control that changes anything. No page logs an
// error.
func TestConsole(t *testing.T) {
	b := newBrowser(t)
	d, bird, url := consolePair(t)

	b.step("open the console", chromedp.Navigate(url+"/"), chromedp.WaitVisible(chromedp.CSS("#login-token")))
	path := eval[string](b, "location.pathname")
	if path != "/ui/" {
		t.Errorf("/ led to %q, want /ui/", path)
	}
	b.shot("1-login")

	// A wrong token is refused inline.
	b.step("wrong token",
		chromedp.SendKeys(chromedp.CSS("#login-token"), "not-a-token-at-all"),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS("#login-error")),
		clearInput("#login-token"))
	b.login(consoleWriteToken)
	b.step("overview shows the BIRD session established",
		chromedp.WaitVisible(chromedp.CSS(`#peers tr[data-peer="127.0.0.2"] .p-established`)))
	who := b.text("#who")
	if !strings.Contains(who, "ops") || !strings.Contains(who, "can change rules") {
		t.Errorf("header says %q, want the token name ops and what it may do", who)
	}
	b.shot("2-overview")

	// Live: a rule added with the CLI appears in the open list, without
	// a reload (a marker set on the page survives), delivered to BIRD.
	b.step("rules page", chromedp.Click(chromedp.CSS(`#nav a[data-view="rules"]`)),
		chromedp.WaitVisible(chromedp.CSS("#view-rules")),
		js(`window.noReload = "still here"`))
	cliID := d.addRule("--ttl", "30m", "--reason", "added with the CLI", consoleCLIRule)
	bird.WaitRoutes(t, "ft4", 10*time.Second, "CLI rule in BIRD", has(consoleCLIFlow, discardExt))
	b.step("the CLI rule appears live, delivered to 1/1 peers",
		chromedp.WaitVisible(chromedp.CSS(`#rules-table tr[data-rule="`+cliID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#rules-table tr[data-rule="`+cliID+`"] .deliv.ok`)))
	marker := eval[string](b, `window.noReload || ""`)
	if marker != "still here" {
		t.Errorf("the page was reloaded to show the new rule (marker %q)", marker)
	}
	left := b.text(`#rules-table tr[data-rule="` + cliID + `"] [data-expires]`)
	if !strings.Contains(left, "m") {
		t.Errorf("time left of a 30m rule reads %q", left)
	}
	b.shot("3-rules-live")

	// An RTBH route is checked by the same parser as it is typed.
	b.step("add page: an RTBH route",
		chromedp.Click(chromedp.CSS(`#nav a[data-view="add"]`)),
		chromedp.WaitVisible(chromedp.CSS("#add-text")),
		chromedp.Click(chromedp.CSS(`input[name="kind"][value="rtbh"]`)),
		chromedp.SendKeys(chromedp.CSS("#add-text"), "route 203.0.113.9/32 then blackhole"),
		chromedp.WaitVisible(chromedp.CSS("#add-text-feedback .ok")))
	if ok := b.text("#add-text-feedback .ok"); !strings.Contains(ok, "ipv4-unicast") {
		t.Errorf("an RTBH route validates as %q, want ipv4-unicast", ok)
	}

	// A rule a guardrail would refuse says which as it is typed.
	b.step("add page: a rule the guardrails refuse",
		clearInput("#add-text"),
		chromedp.Click(chromedp.CSS(`input[name="kind"][value="flowspec"]`)),
		chromedp.SendKeys(chromedp.CSS("#add-text"), "match protocol udp then discard"),
		chromedp.WaitVisible(chromedp.CSS(`#add-text[aria-invalid="true"]`)))
	if msg := b.text("#add-text-feedback .error"); !strings.Contains(msg, "guardrail destination_required") {
		t.Errorf("a rule without a destination validates with %q, want the guardrail named", msg)
	}

	// A typo is shown at the offending word as it is typed, and again
	// when submitted; nothing is stored.
	b.step("add page with a typo",
		clearInput("#add-text"),
		chromedp.Click(chromedp.CSS(`input[name="kind"][value="flowspec"]`)),
		chromedp.SendKeys(chromedp.CSS("#add-text"), consoleTypo),
		chromedp.WaitVisible(chromedp.CSS("#add-text-error")))
	bad, msg := b.text("#add-text-feedback mark.bad"), b.text("#add-text-error")
	if bad != "destinaton" || !strings.Contains(msg, "column 7") {
		t.Errorf("inline error marks %q with %q; want destinaton at column 7", bad, msg)
	}
	// The inline error is already shown, so waiting for it says nothing
	// about the answer to the submission: wait for the selection the
	// answer makes (the test's deadline bounds the wait).
	const selection = `(() => { const t = document.querySelector("#add-text"); return t.value.slice(t.selectionStart, t.selectionEnd); })()`
	b.step("submit the typo", chromedp.Click(chromedp.CSS("#add-submit")),
		chromedp.WaitVisible(chromedp.CSS(`#add-text[aria-invalid="true"]`)),
		chromedp.WaitVisible(chromedp.CSS("#add-text-error")),
		chromedp.Poll[chromedp.Void](selection+` === "destinaton"`, chromedp.WithPollingTimeout(30*time.Second)))
	selected := eval[string](b, selection)
	if selected != "destinaton" {
		t.Errorf("after submitting, the selection in the rule field is %q, want the offending word", selected)
	}
	b.shot("4-add-typo")
	if out := d.mustCLI("rule", "list", "--json"); strings.Contains(out, "203.0.113.50") {
		t.Fatalf("a rule with a typo was stored:\n%s", out)
	}

	// The fixed rule goes in through the form and reaches BIRD.
	b.step("add the fixed rule",
		clearInput("#add-text"),
		chromedp.SendKeys(chromedp.CSS("#add-text"), consoleFormRule),
		clearInput("#add-ttl"),
		chromedp.SendKeys(chromedp.CSS("#add-ttl"), "10m"),
		chromedp.SendKeys(chromedp.CSS("#add-reason"), "added with the console"),
		chromedp.WaitVisible(chromedp.CSS("#add-text-feedback .ok")),
		chromedp.Click(chromedp.CSS("#add-submit")),
		chromedp.WaitVisible(chromedp.CSS("#view-rule")),
		chromedp.WaitVisible(chromedp.CSS("#rule-card h1")))
	bird.WaitRoutes(t, "ft4", 10*time.Second, "form rule in BIRD", has(consoleFormFlow, discardExt))
	hash := eval[string](b, "location.hash")
	formID := strings.TrimPrefix(hash, "#/rules/")
	if formID == hash || formID == "" {
		t.Fatalf("after adding, the page is %q, want the rule's page", hash)
	}
	if r := d.show(formID); r["actor"] != "ops" || r["reason"] != "added with the console" {
		t.Errorf("rule added with the form: actor %v reason %v, want ops and the reason typed", r["actor"], r["reason"])
	}
	b.step("the rule's history shows its creation by ops",
		chromedp.WaitVisible(chromedp.Search(`//table[@id="history"]//td[text()="created"]`)))
	b.shot("5-rule-page")

	// Withdraw with the button, after a confirmation: on the rule's page,
	// then the CLI's rule from the list. BIRD ends up empty.
	b.step("withdraw from the rule's page",
		chromedp.WaitVisible(chromedp.CSS("#rule-card button.withdraw")),
		js(`document.querySelector("#rule-card button.withdraw").click()`),
		chromedp.WaitVisible(chromedp.CSS("#confirm-ok")))
	b.shot("6-confirm")
	b.step("confirm", chromedp.Click(chromedp.CSS("#confirm-ok")),
		chromedp.WaitNotVisible(chromedp.CSS("#confirm")))
	bird.WaitRoutes(t, "ft4", 10*time.Second, "form rule gone from BIRD", lacks(consoleFormFlow))
	b.step("the rule's page turns withdrawn live",
		chromedp.WaitVisible(chromedp.CSS("#rule-card h1 .s-withdrawn")))
	b.step("withdraw the CLI rule from the list",
		chromedp.Click(chromedp.CSS(`#nav a[data-view="rules"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#rules-table tr[data-rule="`+cliID+`"] button.withdraw`)),
		// The list may be drawn again (a live update) between finding
		// the button and clicking it: click the one that is there.
		js(`document.querySelector('#rules-table tr[data-rule="`+cliID+`"] button.withdraw').click()`),
		chromedp.WaitVisible(chromedp.CSS("#confirm-ok")),
		chromedp.Click(chromedp.CSS("#confirm-ok")))
	bird.WaitRoutes(t, "ft4", 10*time.Second, "BIRD empty", func(m map[string]birdtest.Route) bool { return len(m) == 0 })
	b.step("both rules withdrawn in the list",
		chromedp.WaitVisible(chromedp.CSS(`#rules-table tr[data-rule="`+cliID+`"] .s-withdrawn`)),
		chromedp.WaitVisible(chromedp.CSS(`#rules-table tr[data-rule="`+formID+`"] .s-withdrawn`)))
	b.shot("7-withdrawn")

	// A read token: the same pages, no control that changes anything
	// (not even those the write token's pages drew before).
	readID := d.addRule("--ttl", "30m", consoleCLIRule)
	b.step("the write token sees the new rule's withdraw button",
		chromedp.WaitVisible(chromedp.CSS(`#rules-table tr[data-rule="`+readID+`"] button.withdraw`)))
	b.step("log out", chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#login-token")))
	b.login(consoleReadToken)
	b.step("read-only rules page",
		chromedp.Click(chromedp.CSS(`#nav a[data-view="rules"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#rules-table tr[data-rule="`+readID+`"] .s-active`)))
	controls := eval[int](b, `document.querySelectorAll("button.withdraw").length + (document.querySelector("#nav-add").hidden ? 0 : 1)`)
	if controls != 0 {
		t.Errorf("a read token sees %d write controls (withdraw buttons, the add link)", controls)
	}
	b.shot("8-read-only-rules")
	b.step("read-only rule page", js(`location.hash = "#/rules/`+readID+`"`),
		chromedp.WaitVisible(chromedp.CSS("#rule-card h1 .s-active")))
	controls = eval[int](b, `document.querySelectorAll("button.withdraw").length`)
	if controls != 0 {
		t.Errorf("a read token sees a withdraw button on a rule's page")
	}
	b.step("the add page is not there for a read token", js(`location.hash = "#/add"`),
		chromedp.WaitVisible(chromedp.CSS("#view-overview")))
	b.shot("9-read-only-overview")

	// A scoped token sees its prefixes, and only the rules inside them.
	b.step("log out again", chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#login-token")))
	b.login(consoleScopedToken)
	b.step("scoped rules page",
		js(`location.hash = "#/rules"`),
		chromedp.WaitVisible(chromedp.CSS(`#rules-table tr[data-rule="`+readID+`"]`)))
	if n := eval[int](b, `document.querySelectorAll('#rules-table tr[data-rule="`+formID+`"]').length`); n != 0 {
		t.Errorf("a token scoped to 198.51.100.0/24 sees rule %s (203.0.113.50)", formID)
	}
	if who := b.text("#who"); !strings.Contains(who, "198.51.100.0/24") {
		t.Errorf("the header of a scoped token reads %q, want its prefix", who)
	}
	b.shot("10-scoped")
	b.noProblems()
}

// The console outlives a restart of the daemon: it shows that it is
// reconnecting, and once the daemon is back its event ids are from an
// earlier run, so it is told to reload (reset) and follows changes again.
func TestConsoleReconnects(t *testing.T) {
	b := newBrowser(t)
	d, bird, url := consolePair(t)
	b.step("open the console", chromedp.Navigate(url+"/ui/#/rules"))
	b.login(consoleWriteToken)
	first := d.addRule("--ttl", "30m", consoleCLIRule)
	b.step("the rule appears", chromedp.WaitVisible(chromedp.CSS(`#rules-table tr[data-rule="`+first+`"]`)),
		js(`window.noReload = "still here"`))

	d.stop()
	b.step("the page says it is reconnecting", chromedp.WaitVisible(chromedp.CSS("#live.off")))
	b.shot("reconnecting")
	d.start()
	waitFor(t, 30*time.Second, "BGP session with BIRD established again", func() bool { return bird.Established(0) })
	b.step("the page is live again", chromedp.WaitVisible(chromedp.CSS("#live.on")))
	second := d.addRule("--ttl", "30m", consoleFormRule)
	b.step("a rule added after the restart appears live",
		chromedp.WaitVisible(chromedp.CSS(`#rules-table tr[data-rule="`+second+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#rules-table tr[data-rule="`+first+`"]`)))
	if marker := eval[string](b, `window.noReload || ""`); marker != "still here" {
		t.Errorf("the page was reloaded (marker %q)", marker)
	}
	b.shot("after-restart")
	b.noProblems()
}
