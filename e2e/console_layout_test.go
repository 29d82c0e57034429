package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// brokenWords lists the words (runs of non-space characters) in the text
// under the elements sel selects that the browser laid out over more than
// one line: an address broken in the middle, ipv4-flowspec or tcp-flags
// broken at its hyphen.
func brokenWords(sel string) string {
	return `(() => {
  const out = [];
  for (const root of document.querySelectorAll(` + fmt.Sprintf("%q", sel) + `)) {
    const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const nodes = [];
    for (let n = walk.nextNode(); n; n = walk.nextNode()) nodes.push(n);
    // A word can span text nodes (spans side by side): join the text of
    // each element's nodes and map offsets back.
    let text = '', map = [];
    const flush = () => {
      for (const m of text.matchAll(/\S+/g)) {
        const r = document.createRange();
        const a = map[m.index], b = map[m.index + m[0].length - 1];
        r.setStart(a[0], a[1]);
        r.setEnd(b[0], b[1] + 1);
        const tops = new Set();
        for (const q of r.getClientRects()) if (q.width > 0) tops.add(Math.round(q.top));
        if (tops.size > 1) out.push(m[0]);
      }
      text = ''; map = [];
    };
    let parent = null;
    for (const n of nodes) {
      const block = n.parentElement.closest('td,li,div,p,dd');
      if (block !== parent) { flush(); parent = block; }
      for (let i = 0; i < n.data.length; i++) { text += n.data[i]; map.push([n, i]); }
    }
    flush();
  }
  return out.join(' | ');
})()`
}

// The console at 800 and 1400 px: no address, family or rule keyword is
// broken inside; the place in the routers' order does not change under a
// filter; a shadowed rule's own page says so; times name their zone, in
// the history too; a TTL error does not widen its field; the RTBH form
// has its own help; the header says what the login may do. With the
// router gone the overview raises an alarm naming it by its description.
func TestConsoleLayoutAndAlarm(t *testing.T) {
	b := newBrowser(t)
	d, bird, url := consolePair(t)
	withConfig(t, d, bird, "local_address", `description = "lab BIRD edge-1"`)

	wide := d.addRule("--ttl", "30m", "match destination 198.51.100.0/24 source 0.0.0.0/0 then discard")
	shadowed := d.addRule("--ttl", "30m", "match destination 198.51.100.0/24 protocol ==6 then discard")
	d.addRule("--ttl", "30m", "--reason", "SYN flood from a botnet seen on the edge", "match destination 198.51.100.200/32 source 203.0.113.128/25 protocol tcp destination-port ==443 tcp-flags =S&!=A then rate-limit 125000")
	d.addRule("--ttl", "30m", "match destination 2001:db8:ffff:1234::/64 source 2001:db8:aaaa:bbbb::/64 next-header ==17 destination-port ==53 then discard")
	d.mustCLI("route", "add", "--ttl", "30m", "--blackhole", "198.51.100.20/32")
	// An update of the expiry: its history shows the old and new times.
	d.mustCLI("rule", "add", "--ttl", "2h", "match destination 198.51.100.0/24 protocol ==6 then discard")

	// The description: in the CLI's table and JSON.
	if out := d.mustCLI("peers"); !strings.Contains(out, "lab BIRD edge-1") {
		t.Errorf("peers does not show the neighbor's description:\n%s", out)
	}
	var pl api.PeerList
	if err := json.Unmarshal([]byte(d.mustCLI("peers", "--json")), &pl); err != nil || len(pl.Peers) != 1 || pl.Peers[0].Description != "lab BIRD edge-1" {
		t.Errorf("peers --json: %v %+v", err, pl)
	}

	b.step("open the console", chromedp.Navigate(url+"/"), chromedp.WaitVisible(chromedp.CSS("#login-token")))
	b.login(consoleWriteToken)
	if who := b.text("#who"); !strings.Contains(who, "ops") || !strings.Contains(who, "can change rules") {
		t.Errorf("header reads %q, want the token's name and what it may do", who)
	}
	b.step("overview: the session is up, the peer described",
		chromedp.WaitVisible(chromedp.CSS(`#peers tr[data-peer="127.0.0.2"] .p-established`)),
		chromedp.WaitVisible(chromedp.CSS(`#peers tr[data-peer="127.0.0.2"] .peer-desc`)))
	if desc := b.text(`#peers tr[data-peer="127.0.0.2"] .peer-desc`); desc != "lab BIRD edge-1" {
		t.Errorf("peer description reads %q", desc)
	}
	if n := eval[int](b, `document.querySelectorAll(".count.c-alarm").length + (document.querySelector("#peer-alarm").hidden ? 0 : 1)`); n != 0 {
		t.Errorf("%d alarms with the session up", n)
	}

	for _, width := range []int64{800, 1400} {
		b.step(fmt.Sprintf("rules page at %d px", width), chromedp.EmulateViewport(width, 900),
			js(`location.hash = "#/rules"`),
			chromedp.WaitVisible(chromedp.CSS(`#rules-table tr[data-rule="`+shadowed+`"]`)))
		b.shot(fmt.Sprintf("rules-%d", width))
		if broken := eval[string](b, brokenWords("#rules-table td")); broken != "" {
			t.Errorf("at %d px, words broken over lines in the rules table: %s", width, broken)
		}
		b.step(fmt.Sprintf("overview at %d px", width), js(`location.hash = "#/"`),
			chromedp.WaitVisible(chromedp.CSS(`#peers tr[data-peer="127.0.0.2"]`)))
		b.shot(fmt.Sprintf("overview-%d", width))
		if broken := eval[string](b, brokenWords("#peers td, #counts")); broken != "" {
			t.Errorf("at %d px, words broken over lines on the overview: %s", width, broken)
		}
	}

	// The place in the routers' order is the server's: a filter that
	// hides the first rule leaves the others' numbers as they are.
	b.step("rules page", js(`location.hash = "#/rules"`),
		chromedp.WaitVisible(chromedp.CSS(`#rules-table tr[data-rule="`+shadowed+`"]`)))
	precOf := `document.querySelector('#rules-table tr[data-rule="` + shadowed + `"] td.num .small').textContent`
	before := eval[string](b, precOf)
	b.step("filter out the wider rule", chromedp.SendKeys(chromedp.CSS("#f-text"), "protocol"),
		chromedp.WaitNotPresent(chromedp.CSS(`#rules-table tr[data-rule="`+wide+`"]`)))
	if after := eval[string](b, precOf); after != before || before == "" {
		t.Errorf("rule %s's place reads %q unfiltered and %q filtered", shadowed, before, after)
	}
	b.step("clear the filter", clearInput("#f-text"))

	// The shadowed rule's own page warns, and its times name a zone.
	b.step("shadowed rule's page", js(`location.hash = "#/rules/`+shadowed+`"`),
		chromedp.WaitVisible(chromedp.CSS("#rule-card .shadow")),
		chromedp.WaitVisible(chromedp.Search(`//table[@id="history"]//td[text()="updated"]`)))
	b.shot("rule-page-1400")
	if warn := b.text("#rule-card .shadow"); !strings.Contains(warn, "rule "+wide) {
		t.Errorf("the shadow warning reads %q, want rule %s named", warn, wide)
	}
	created := eval[string](b, `[...document.querySelectorAll("#rule-card dt")].find((e) => e.textContent === "created").nextElementSibling.textContent`)
	history := b.text("#history tbody")
	if !strings.Contains(created, "UTC") && !strings.Contains(created, "GMT") {
		t.Errorf("created reads %q: no time zone", created)
	}
	if strings.Contains(history, "T") && strings.Contains(history, "Z\n") || strings.Contains(history, ":00Z") || !strings.Contains(history, "expires_at") {
		t.Errorf("history shows raw ISO times or no expiry change:\n%s", history)
	}

	// A TTL error does not widen its field and shift the form.
	b.step("add page", js(`location.hash = "#/add"`), chromedp.WaitVisible(chromedp.CSS("#add-ttl")))
	layout := `JSON.stringify([document.querySelector("#add-ttl").getBoundingClientRect().width, document.querySelector("#add-reason").getBoundingClientRect().left])`
	calm := eval[string](b, layout)
	b.step("a bad TTL", clearInput("#add-ttl"), chromedp.SendKeys(chromedp.CSS("#add-text"), "match destination 198.51.100.7/32 then discard"),
		chromedp.SendKeys(chromedp.CSS("#add-ttl"), "5 fortnights"),
		chromedp.WaitVisible(chromedp.CSS("#add-ttl-feedback .error")))
	b.shot("add-ttl-error-1400")
	if bad := eval[string](b, layout); bad != calm {
		t.Errorf("the TTL field and the reason field moved from %s to %s with the error shown", calm, bad)
	}
	b.step("the RTBH form", chromedp.Click(chromedp.CSS(`input[name="kind"][value="rtbh"]`)))
	if help := b.text("#add-help"); !strings.Contains(help, "blackhole") || strings.Contains(help, "match") {
		t.Errorf("the RTBH form's help reads %q", help)
	}

	// The router goes away: the overview raises the alarm.
	if _, err := bird.Birdc("disable", "up0"); err != nil {
		t.Fatal(err)
	}
	b.step("overview with the router gone", js(`location.hash = "#/"`),
		chromedp.WaitVisible(chromedp.CSS("#peer-alarm")),
		chromedp.WaitVisible(chromedp.CSS(".count.c-alarm")))
	b.shot("overview-router-gone-1400")
	if alarm := b.text("#peer-alarm"); !strings.Contains(alarm, "every BGP session is down") || !strings.Contains(alarm, "lab BIRD edge-1") {
		t.Errorf("the alarm reads %q", alarm)
	}
	b.step("overview at 800 px with the router gone", chromedp.EmulateViewport(800, 900))
	b.shot("overview-router-gone-800")
	if broken := eval[string](b, brokenWords("#peer-alarm, #peers td")); broken != "" {
		t.Errorf("at 800 px, words broken over lines in the alarm: %s", broken)
	}
	b.noProblems()
}

// A listener without tokens has no login: the header says so, and what
// anyone reaching it may do, instead of the actor name "tcp".
func TestConsoleTokenlessHeader(t *testing.T) {
	b := newBrowser(t)
	port := birdtest.FreePort(t, "127.0.0.1")
	startAPIOnly(t, fmt.Sprintf("listen = %q\n", fmt.Sprintf("127.0.0.1:%d", port)))
	b.step("open the console", chromedp.Navigate(fmt.Sprintf("http://127.0.0.1:%d/ui/", port)),
		chromedp.WaitVisible(chromedp.CSS("#who")))
	who := b.text("#who")
	if !strings.Contains(who, "no login (listener without tokens)") || !strings.Contains(who, "can change rules") || strings.HasPrefix(who, "tcp") {
		t.Errorf("header reads %q", who)
	}
	b.noProblems()
}
