package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/playbook"
	"github.com/ribkeeper/ribkeeper/signals"
	"github.com/ribkeeper/ribkeeper/store"
)

// Incidents are read like rules: GET /v1/incidents and /v1/incidents/{id}
// show a scoped token only those whose target lies inside its prefixes
// (another scope's is a 404, as an unknown one), and the event stream
// carries them as "incident" events, an id line alone for another
// scope's.
func TestIncidentsScoped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, store.Config{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "rk.db")})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("t.toml", []byte(`
[bgp]
asn = 65000
router_id = "203.0.113.1"
[[source]]
name = "det"
kind = "gobgp"
[[playbook]]
name = "any"
[[playbook.step]]
rules = ["match destination {target} then discard"]
ttl = "1h"
`))
	if err != nil {
		t.Fatal(err)
	}
	rib := newFakeRIB()
	events := api.NewEvents(nil, st, rib, nil)
	gate := newGate(st, admit.Config{Changed: events.Nudge})
	eng := playbook.New(playbook.Config{Gate: gate, Changed: events.Incident}, cfg)
	srv := api.New(nil, st, gate, rib, api.WithEvents(events), api.WithIncidents(eng))
	h, err := srv.TCPHandler([]api.Token{
		{Name: "cust", Role: api.RoleWrite, Secret: custSecret, Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}},
		{Name: "noc", Role: api.RoleWrite, Secret: nocSecret},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	done := make(chan error, 1)
	go func() { done <- events.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; hs.Close(); st.Close() })
	cs := &countsServer{url: hs.URL, st: st}

	custEvents := cs.stream(t, custSecret)
	custEvents.until(api.EventHello)
	nocEvents := cs.stream(t, nocSecret)
	nocEvents.until(api.EventHello)

	accept := func(target string) {
		t.Helper()
		if err := eng.Accept(ctx, signals.Signal{Source: "det", Target: netip.MustParsePrefix(target), State: signals.Start, PPS: 9000}); err != nil {
			t.Fatal(err)
		}
	}
	accept("198.51.100.10/32") // incident 1: outside cust's prefixes
	accept("192.0.2.10/32")    // incident 2

	var all, mine api.IncidentList
	cs.get(t, nocSecret, "/v1/incidents", &all)
	cs.get(t, custSecret, "/v1/incidents", &mine)
	if len(all.Incidents) != 2 || all.Incidents[0].ID != 2 || all.Incidents[1].Target != "198.51.100.10/32" {
		t.Fatalf("noc's incidents %+v", all.Incidents)
	}
	if len(mine.Incidents) != 1 || mine.Incidents[0].Target != "192.0.2.10/32" || mine.Incidents[0].Timeline != nil {
		t.Fatalf("cust's incidents %+v", mine.Incidents)
	}
	if r := mine.Incidents[0].Rules; len(r) != 1 || r[0].State != "active" || r[0].Text != "match destination 192.0.2.10/32 then discard" || r[0].ExpiresAt == nil {
		t.Fatalf("incident rules %+v", r)
	}
	var one api.Incident
	cs.get(t, custSecret, "/v1/incidents/2", &one)
	if one.Playbook != "any" || one.Step != 1 || one.State != "active" || len(one.Timeline) == 0 || one.Timeline[0].Kind != "opened" {
		t.Fatalf("incident 2 = %+v", one)
	}
	for _, c := range []struct {
		secret, path string
		code         int
	}{
		{custSecret, "/v1/incidents/1", http.StatusNotFound},
		{nocSecret, "/v1/incidents/1", http.StatusOK},
		{nocSecret, "/v1/incidents/99", http.StatusNotFound},
		{nocSecret, "/v1/incidents/x", http.StatusBadRequest},
		{nocSecret, "/v1/incidents?limit=0", http.StatusBadRequest},
	} {
		req, _ := http.NewRequest("GET", hs.URL+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+c.secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("GET %s: %d, want %d", c.path, resp.StatusCode, c.code)
		}
	}

	// Events: noc gets incident 1 first, cust only incident 2.
	if data := nocEvents.until(api.EventIncident); !strings.Contains(data, `"id":1,`) {
		t.Fatalf("noc's first incident event: %s", data)
	}
	if data := custEvents.until(api.EventIncident); !strings.Contains(data, `"target":"192.0.2.10/32"`) || strings.Contains(data, "198.51.100") {
		t.Fatalf("cust's first incident event: %s", data)
	}
}

// The CLI lists incidents and shows one with its rules and timeline.
func TestCLIIncidents(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "rk.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg, err := config.Parse("t.toml", []byte(`
[bgp]
asn = 65000
router_id = "203.0.113.1"
[[source]]
name = "det"
kind = "gobgp"
[[playbook]]
name = "dns-amp"
protocols = ["udp"]
shadow = true
[[playbook.step]]
rules = ["match destination {target} protocol {protocol} source-port {src_ports} then discard"]
ttl = "1h"
`))
	if err != nil {
		t.Fatal(err)
	}
	gate := newGate(st, admit.Config{})
	eng := playbook.New(playbook.Config{Gate: gate}, cfg)
	ts := startServerGate(t, st, gate, api.WithIncidents(eng))

	code, out, errOut := runCLI(t, ts.sock, "incidents")
	if code != 0 || out != "no incidents\n" {
		t.Fatalf("incidents (none): exit %d, %q, %q", code, out, errOut)
	}
	if err := eng.Accept(ctx, signals.Signal{Source: "det", Target: netip.MustParsePrefix("192.0.2.10/32"), State: signals.Start, PPS: 9000,
		Vector: signals.Vector{Protocol: "udp", SrcPorts: []uint16{53}}, AttackID: "fnm-77"}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, ts.sock, "incidents")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if code != 0 || len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "ID STATE TARGET VECTOR SOURCE PLAYBOOK STEP SIGNALS RULES OPENED" {
		t.Fatalf("incidents: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	for _, want := range []string{"1 ", "active (shadow)", "192.0.2.10/32", "udp src 53", "det", "dns-amp", "1/1"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("incidents row %q lacks %q", lines[1], want)
		}
	}
	code, out, errOut = runCLI(t, ts.sock, "incidents", "show", "1")
	if code != 0 {
		t.Fatalf("incidents show: exit %d, %q", code, errOut)
	}
	for _, want := range []string{"state:", "active (shadow: nothing is written)", "playbook:", "dns-amp, step 1 of 1", "attack id:", "fnm-77",
		"rules:", "shadow", "match destination 192.0.2.10/32 protocol ==udp source-port ==53 then discard", "timeline:", "opened"} {
		if !strings.Contains(out, want) {
			t.Errorf("incidents show lacks %q:\n%s", want, out)
		}
	}
	if code, _, errOut := runCLI(t, ts.sock, "incidents", "show", "2"); code != 1 || !strings.Contains(errOut, "no incident with id 2") {
		t.Errorf("incidents show 2: exit %d, %q", code, errOut)
	}
}
