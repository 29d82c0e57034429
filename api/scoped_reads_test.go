package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/metrics"
	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
)

// countsServer is the TCP API over a real SQLite store with status,
// series and events, and the tokens of scopedServer: "cust" (write,
// 192.0.2.0/24), "noc" (write, unscoped), "view" (read, 192.0.2.0/25).
type countsServer struct {
	url    string
	st     *store.Store
	rib    *fakeRIB
	series *api.Series
	events *api.Events
	rec    reconcile.Recorder
}

func newCountsServer(t *testing.T) *countsServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, store.Config{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "rk.db")})
	if err != nil {
		t.Fatal(err)
	}
	cs := &countsServer{st: st, rib: newFakeRIB()}
	cs.rib.setPeers([]bgp.PeerStatus{{Address: "192.0.2.254", ASN: 65001, State: "established", Sent: 9, HeldBack: 2}})
	passes := &fakePasses{last: reconcile.PassResult{Started: time.Now(), Added: 4, Withdrawn: 2}}
	cs.series = api.NewSeries(nil, api.SeriesSources{Rules: st, Peers: cs.rib}, time.Minute, 10, nil)
	cs.events = api.NewEvents(nil, st, cs.rib, nil)
	cs.rec = cs.events.Recorder(nil)
	mx := metrics.New(nil)
	srv := api.New(nil, st, newGate(st, admit.Config{Changed: cs.events.Nudge}), cs.rib, api.WithReconciler(passes), api.WithMetrics(mx.Handler(), mx),
		api.WithSeries(cs.series), api.WithEvents(cs.events))
	h, err := srv.TCPHandler([]api.Token{
		{Name: "cust", Role: api.RoleWrite, Secret: custSecret, Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}},
		{Name: "noc", Role: api.RoleWrite, Secret: nocSecret},
		{Name: "view", Role: api.RoleRead, Secret: viewSecret, Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/25")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	done := make(chan error, 1)
	go func() { done <- cs.events.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		hs.Close()
		st.Close()
	})
	cs.url = hs.URL
	return cs
}

func (cs *countsServer) get(t *testing.T, secret, path string, v any) string {
	t.Helper()
	req, _ := http.NewRequest("GET", cs.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// sseStream is an open GET /v1/events of one token.
type sseStream struct {
	t *testing.T
	r *bufio.Reader
}

func (cs *countsServer) stream(t *testing.T, secret string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	req, _ := http.NewRequestWithContext(ctx, "GET", cs.url+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		cancel()
		t.Fatalf("GET /v1/events: %v %v", resp, err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return &sseStream{t: t, r: bufio.NewReader(resp.Body)}
}

// until reads events up to the first of type typ and returns its data.
func (s *sseStream) until(typ string) string {
	s.t.Helper()
	return s.each(typ)[typ]
}

// each reads events until it has seen one of every type in types, in
// whatever order they come, and returns the data of the first of each.
func (s *sseStream) each(types ...string) map[string]string {
	s.t.Helper()
	got := map[string]string{}
	var cur, data string
	for len(got) < len(types) {
		line, err := s.r.ReadString('\n')
		if err != nil {
			s.t.Fatalf("waiting for events %v (got %v): %v", types, got, err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if _, seen := got[cur]; !seen && slices.Contains(types, cur) {
				got[cur] = data
			}
			cur, data = "", ""
		case strings.HasPrefix(line, "event: "):
			cur = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
	return got
}

// A scoped token sees its own world in status, series and events: the
// counts of the rules inside its prefixes, not the appliance's; no pass
// counts, no totals since start, no path counts of peers (their sessions
// yes); the known sites only as a write token.
func TestScopedTokenSeesItsOwnCounts(t *testing.T) {
	cs := newCountsServer(t)
	ctx := context.Background()
	add := func(text string) int64 {
		t.Helper()
		r, _, err := cs.st.Upsert(ctx, store.Input{Rule: mustParse(t, text), Actor: "noc"})
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	for i := range 4 {
		add(fmt.Sprintf("match destination 198.51.100.%d/32 then discard", i+1))
	}
	add("match protocol gre then discard")
	add("match destination 192.0.2.7/32 then discard")   // view's /25 and cust's /24
	add("match destination 192.0.2.200/32 then discard") // cust's /24 only
	gone := add("match destination 192.0.2.8/32 then discard")
	if _, err := cs.st.Withdraw(ctx, gone, "noc"); err != nil {
		t.Fatal(err)
	}
	if err := cs.st.Finish(ctx, gone, store.Withdrawn); err != nil {
		t.Fatal(err)
	}

	// Status.
	for _, c := range []struct {
		name, secret      string
		active, withdrawn int
		global, sites     bool
		sent              int
	}{
		{"view", viewSecret, 1, 1, false, false, 0},
		{"cust", custSecret, 2, 1, false, true, 0},
		{"noc", nocSecret, 7, 1, true, true, 9},
	} {
		var st api.Status
		raw := cs.get(t, c.secret, "/v1/status", &st)
		if st.Rules == nil || st.Rules.Active != c.active || st.Rules.Withdrawn != c.withdrawn {
			t.Errorf("%s: status rules %+v, want %d active, %d withdrawn", c.name, st.Rules, c.active, c.withdrawn)
		}
		if (st.LastPass != nil) != c.global || (st.SinceStart != nil) != c.global {
			t.Errorf("%s: status %s: last_pass and since_start shown = %v %v, want %v", c.name, raw, st.LastPass != nil, st.SinceStart != nil, c.global)
		}
		if (len(st.Sites) > 0) != c.sites {
			t.Errorf("%s: status sites %v, want listed = %v", c.name, st.Sites, c.sites)
		}
		if len(st.Peers) != 1 || st.Peers[0].State != "established" || st.Peers[0].Sent != c.sent || (st.Peers[0].HeldBack != 0) != c.global {
			t.Errorf("%s: status peers %+v, want the session with sent %d", c.name, st.Peers, c.sent)
		}
		var pl api.PeerList
		cs.get(t, c.secret, "/v1/peers", &pl)
		if len(pl.Peers) != 1 || pl.Peers[0].State != "established" || pl.Peers[0].Sent != c.sent || (pl.Peers[0].HeldBack != 0) != c.global {
			t.Errorf("%s: peers %+v, want the session with sent %d", c.name, pl.Peers, c.sent)
		}
	}

	// The Prometheus metrics count the whole appliance: not for a scoped
	// token.
	for _, c := range []struct {
		secret string
		want   int
	}{{viewSecret, http.StatusForbidden}, {custSecret, http.StatusForbidden}, {nocSecret, http.StatusOK}} {
		req, _ := http.NewRequest("GET", cs.url+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+c.secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET /metrics: %d, want %d", resp.StatusCode, c.want)
		}
	}

	// Series: a scoped token's starts when it asks, with its own counts
	// and no drift repairs.
	cs.series.Sample(ctx)
	var body api.SeriesBody
	cs.get(t, viewSecret, "/v1/series", &body)
	if len(body.Points) != 1 || body.Points[0].Active != 1 {
		t.Errorf("view's series %+v, want one point with 1 active rule", body.Points)
	}
	cs.series.Sample(ctx)
	for _, c := range []struct {
		secret string
		want   []int
	}{{viewSecret, []int{1, 1}}, {custSecret, []int{2}}, {nocSecret, []int{7, 7}}} {
		cs.get(t, c.secret, "/v1/series", &body)
		var got []int
		for _, p := range body.Points {
			got = append(got, p.Active)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("series active counts %v, want %v", got, c.want)
		}
	}

	// Events: the pass, a bulk change, a peer's change.
	view, noc := cs.stream(t, viewSecret), cs.stream(t, nocSecret)
	view.until(api.EventHello)
	noc.until(api.EventHello)
	cs.rec.PassDone(reconcile.PassResult{Started: time.Now(), Added: 3, Withdrawn: 1})
	var ins []store.Input
	for i := range 101 {
		ins = append(ins, store.Input{Rule: mustParse(t, fmt.Sprintf("match destination 203.0.113.%d/32 then discard", i)), Actor: "noc"})
	}
	if _, err := cs.st.UpsertMany(ctx, ins); err != nil {
		t.Fatal(err)
	}
	cs.rib.setPeers([]bgp.PeerStatus{{Address: "192.0.2.254", ASN: 65001, State: "idle", Sent: 9, HeldBack: 2}})
	cs.events.Nudge()
	for _, c := range []struct {
		name  string
		s     *sseStream
		scope bool
	}{{"noc", noc, false}, {"view", view, true}} {
		evs := c.s.each(api.EventPass, api.EventRules, api.EventPeer)
		pass, rules, peer := evs[api.EventPass], evs[api.EventRules], evs[api.EventPeer]
		if shown := strings.Contains(pass, `"added"`); shown == c.scope || !strings.Contains(pass, `"result":"ok"`) {
			t.Errorf("%s's pass event %s: counts shown = %v, want %v", c.name, pass, shown, !c.scope)
		}
		if (rules == "{}") != c.scope {
			t.Errorf("%s's rules event %s", c.name, rules)
		}
		if !strings.Contains(peer, `"state":"idle"`) || strings.Contains(peer, `"sent":9`) == c.scope {
			t.Errorf("%s's peer event %s", c.name, peer)
		}
	}
}
