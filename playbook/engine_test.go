package playbook_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/notify"
	"github.com/ribkeeper/ribkeeper/playbook"
	"github.com/ribkeeper/ribkeeper/signals"
	"github.com/ribkeeper/ribkeeper/store"
)

const base = `
[bgp]
asn = 65000
router_id = "192.0.2.1"

[[source]]
name = "fnm"
kind = "gobgp"
prefixes = ["203.0.113.0/24", "2001:db8::/32"]
max_new_rules_per_minute = -1
`

// escalating rate-limits, then discards, then blackholes.
const escalating = `
[[playbook]]
name = "udp-flood"
sources = ["fnm"]
protocols = ["udp"]
min_pps = 1000
quiet_after = "5m"
hold_down = "5m"

[[playbook.step]]
rules = ["match destination {target} protocol {protocol} destination-port {dst_ports} then rate-limit 125000"]
ttl = "20m"
escalate_after = "1m"
escalate_signals = 4

[[playbook.step]]
rules = ["match destination {target} protocol {protocol} destination-port {dst_ports} then discard"]
ttl = "20m"
escalate_after = "2m"

[[playbook.step]]
rtbh = true
ttl = "30m"
`

var start = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

type recorder struct {
	mu     sync.Mutex
	events []notify.Event
}

func (r *recorder) Notify(e notify.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) kinds() []notify.Kind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []notify.Kind
	for _, e := range r.events {
		out = append(out, e.Kind)
	}
	return out
}

type rig struct {
	t     *testing.T
	clk   *clock.Fake
	st    *store.Store
	gate  *admit.Gate
	eng   *playbook.Engine
	notes *recorder
	cfg   *config.Config
	stop  func()
	// changed wakes eventually after every incident change (Config.Changed).
	changed chan struct{}
}

func newRig(t *testing.T, toml string) *rig {
	t.Helper()
	cfg, err := config.Parse("t.toml", []byte(toml))
	if err != nil {
		t.Fatal(err)
	}
	if es := playbook.Check(cfg); len(es) > 0 {
		t.Fatal(es)
	}
	clk := clock.NewFake(start)
	st, err := store.Open(context.Background(), store.Config{Driver: "sqlite", Path: filepath.Join(t.TempDir(), "rk.db"), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	g := admit.New(admit.Config{Store: st, Guardrails: cfg.Guardrails, Limits: cfg.Limits, Clock: clk})
	r := &rig{t: t, clk: clk, st: st, gate: g, notes: &recorder{}, cfg: cfg, changed: make(chan struct{}, 1)}
	r.start()
	return r
}

// start runs a new engine over the rig's gate and store, with the
// incidents the store kept.
func (r *rig) start() {
	r.t.Helper()
	r.eng = playbook.New(playbook.Config{Gate: r.gate, Store: r.st, Rules: r.st, Notifier: r.notes, Clock: r.clk,
		Changed: func(playbook.Incident) {
			select {
			case r.changed <- struct{}{}:
			default:
			}
		}}, r.cfg)
	if err := r.eng.Load(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.eng.Run(ctx) }()
	r.stop = func() { cancel(); <-done }
	r.t.Cleanup(r.stop)
}

func sig(target string, state signals.State) signals.Signal {
	return signals.Signal{Source: "fnm", Target: netip.MustParsePrefix(target), State: state, PPS: 50000,
		Vector: signals.Vector{Protocol: "udp", DstPorts: []uint16{53}}, AttackID: "a-1"}
}

func (r *rig) accept(s signals.Signal) {
	r.t.Helper()
	if err := r.eng.Accept(context.Background(), s); err != nil {
		r.t.Fatalf("Accept: %v", err)
	}
}

// eventually waits, for at most 30 s, until cond holds: it checks again
// after each incident change and each timer the engine arms (what every
// condition of these tests waits for).
func (r *rig) eventually(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-r.changed:
		case <-r.clk.Armed():
		case <-deadline:
			r.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (r *rig) incident(id int64) playbook.Incident {
	r.t.Helper()
	inc, ok := r.eng.Get(id)
	if !ok {
		r.t.Fatalf("no incident %d", id)
	}
	return inc
}

// active returns the store's active rules by text.
func (r *rig) active() map[string]store.Rule {
	r.t.Helper()
	rules, err := r.st.List(context.Background(), store.Active)
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[string]store.Rule{}
	for _, x := range rules {
		if !x.WithdrawRequested {
			out[x.Text] = x
		}
	}
	return out
}

const (
	rateLimit = "match destination 203.0.113.10/32 protocol ==udp destination-port ==53 then rate-limit 125000"
	discard   = "match destination 203.0.113.10/32 protocol ==udp destination-port ==53 then discard"
	rtbh      = "route 203.0.113.10/32 then blackhole"
)

func (r *rig) wantActive(what string, texts ...string) {
	r.t.Helper()
	got := r.active()
	if len(got) != len(texts) {
		r.t.Fatalf("%s: active rules %v, want %v", what, keys(got), texts)
	}
	for _, text := range texts {
		if _, ok := got[text]; !ok {
			r.t.Fatalf("%s: active rules %v, want %v", what, keys(got), texts)
		}
	}
}

func keys(m map[string]store.Rule) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Escalation by time: rate-limit, then after escalate_after discard (the
// same match, updated in place), then blackhole (a new rule, the FlowSpec
// one withdrawn after it is stored). Every rule's history records the
// incident, playbook, step, source and signal, with the source as actor.
func TestEscalationByTime(t *testing.T) {
	r := newRig(t, base+escalating)
	r.accept(sig("203.0.113.10/32", signals.Start))
	r.wantActive("step 1", rateLimit)
	inc := r.incident(1)
	if inc.Step != 0 || inc.State != playbook.Active || inc.Playbook != "udp-flood" {
		t.Fatalf("incident = %+v", inc)
	}
	first := r.active()[rateLimit]
	if first.Actor != "fnm" || !strings.Contains(first.Reason, "incident 1: playbook udp-flood step 1/3, source fnm, signal 203.0.113.10/32") {
		t.Fatalf("rule actor %q reason %q", first.Actor, first.Reason)
	}
	hist, err := r.st.History(context.Background(), first.ID)
	if err != nil || len(hist) == 0 || hist[0].Actor != "fnm" || !strings.Contains(hist[0].New["reason"], "playbook udp-flood step 1/3") {
		t.Fatalf("history = %+v, %v", hist, err)
	}

	r.clk.Advance(59 * time.Second)
	r.accept(sig("203.0.113.10/32", signals.Ongoing))
	if inc := r.incident(1); inc.Step != 0 {
		t.Fatalf("escalated before escalate_after: step %d", inc.Step)
	}
	r.clk.Advance(time.Second)
	r.eventually("step 2", func() bool { return r.incident(1).Step == 1 })
	r.wantActive("step 2", discard)
	if got := r.active()[discard]; got.ID != first.ID || !strings.Contains(got.Reason, "step 2/3") {
		t.Fatalf("step 2 rule %d (%q), want rule %d updated", got.ID, got.Reason, first.ID)
	}

	r.clk.Advance(time.Minute)
	r.accept(sig("203.0.113.10/32", signals.Ongoing))
	r.clk.Advance(time.Minute)
	r.eventually("step 3", func() bool { return r.incident(1).Step == 2 })
	r.wantActive("step 3", rtbh)
	inc = r.incident(1)
	states := map[string]string{}
	for _, x := range inc.Rules {
		states[x.Text] = x.State
	}
	if states[rtbh] != playbook.RuleActive || states[discard] != playbook.RuleWithdrawn || states[rateLimit] != playbook.RuleReplaced {
		t.Fatalf("incident rules %+v", inc.Rules)
	}
	if k := r.notes.kinds(); fmt.Sprint(k) != fmt.Sprint([]notify.Kind{notify.IncidentOpened, notify.IncidentEscalated, notify.IncidentEscalated}) {
		t.Fatalf("notifications %v", k)
	}
}

// Escalation by count: escalate_signals signals in a step move it on,
// however little time passed.
func TestEscalationBySignals(t *testing.T) {
	r := newRig(t, base+escalating)
	r.accept(sig("203.0.113.10/32", signals.Start))
	for range 2 {
		r.accept(sig("203.0.113.10/32", signals.Ongoing))
	}
	if inc := r.incident(1); inc.Step != 0 || inc.StepSignals != 3 {
		t.Fatalf("after 3 signals: step %d, %d signals", inc.Step, inc.StepSignals)
	}
	r.accept(sig("203.0.113.10/32", signals.Ongoing))
	if inc := r.incident(1); inc.Step != 1 || inc.StepSignals != 0 {
		t.Fatalf("after 4 signals: step %d, %d signals in it", inc.Step, inc.StepSignals)
	}
	r.wantActive("step 2", discard)
}

// The TTL is extended while signals keep coming, once less than half of
// it is left; without signals the rule keeps its expiry.
func TestTTLExtension(t *testing.T) {
	r := newRig(t, base+`
[[playbook]]
name = "p"
[[playbook.step]]
rules = ["match destination {target} then discard"]
ttl = "20m"
`)
	const text = "match destination 203.0.113.10/32 then discard"
	r.accept(sig("203.0.113.10/32", signals.Start))
	exp0 := r.active()[text].ExpiresAt
	if !exp0.Equal(start.Add(20 * time.Minute)) {
		t.Fatalf("expires %v, want %v", exp0, start.Add(20*time.Minute))
	}
	r.clk.Advance(4 * time.Minute)
	r.accept(sig("203.0.113.10/32", signals.Ongoing))
	if got := r.active()[text].ExpiresAt; !got.Equal(exp0) {
		t.Fatalf("extended with more than half the TTL left: %v", got)
	}
	r.clk.Advance(4 * time.Minute)
	r.accept(sig("203.0.113.10/32", signals.Ongoing))
	r.clk.Advance(3 * time.Minute) // 11 minutes in: 9 left of 20
	r.accept(sig("203.0.113.10/32", signals.Ongoing))
	if got, want := r.active()[text].ExpiresAt, start.Add(31*time.Minute); !got.Equal(want) {
		t.Fatalf("expires %v after a signal with 9m left, want %v", got, want)
	}
	if inc := r.incident(1); inc.Extended != 1 {
		t.Fatalf("extended %d times", inc.Extended)
	}
}

// The end: an end signal starts hold-down; the rules stay until it is
// over, then the incident ends and its rules are withdrawn. Without an
// end signal, quiet_after without signals does the same.
func TestHoldDown(t *testing.T) {
	r := newRig(t, base+escalating)
	r.accept(sig("203.0.113.10/32", signals.Start))
	r.clk.Advance(10 * time.Second)
	r.accept(sig("203.0.113.10/32", signals.End))
	if inc := r.incident(1); inc.State != playbook.Holding || !inc.EndsAt.Equal(start.Add(10*time.Second+5*time.Minute)) {
		t.Fatalf("after end: %s until %v", inc.State, inc.EndsAt)
	}
	// No escalation during hold-down, although escalate_after passes.
	r.clk.Advance(5*time.Minute - time.Second)
	r.eventually("the timer's pass", func() bool { at, ok := r.clk.Next(); return ok && at.Equal(start.Add(10*time.Second+5*time.Minute)) })
	if inc := r.incident(1); inc.State != playbook.Holding || inc.Step != 0 {
		t.Fatalf("during hold-down: %s step %d", inc.State, inc.Step)
	}
	r.wantActive("during hold-down", rateLimit)
	r.clk.Advance(time.Second)
	r.eventually("the end", func() bool { return r.incident(1).State == playbook.Ended })
	r.wantActive("after the end")
	if k := r.notes.kinds(); k[len(k)-1] != notify.IncidentEnded {
		t.Fatalf("notifications %v", k)
	}

	// Quiet: no signal for quiet_after (5m), then hold_down (5m).
	r.accept(sig("203.0.113.10/32", signals.Start))
	second := r.eng.List(nil, 1)[0]
	if second.ID == 1 || second.State != playbook.Active {
		t.Fatalf("a new attack after the end: %+v", second)
	}
	r.clk.Advance(time.Minute) // escalates (escalate_after 1m) but signals none
	r.eventually("step 2", func() bool { return r.incident(second.ID).Step == 1 })
	r.clk.Advance(4 * time.Minute)
	r.eventually("quiet", func() bool { return r.incident(second.ID).State == playbook.Holding })
	r.wantActive("quiet hold-down", rtbh) // escalate_after of step 2 came first
	// A signal during hold-down resumes the incident.
	r.accept(sig("203.0.113.10/32", signals.Ongoing))
	if inc := r.incident(second.ID); inc.State != playbook.Active {
		t.Fatalf("signal during hold-down: %s", inc.State)
	}
	r.clk.Advance(5 * time.Minute)
	r.eventually("quiet again", func() bool { return r.incident(second.ID).State == playbook.Holding })
	r.clk.Advance(5 * time.Minute)
	r.eventually("the end", func() bool { return r.incident(second.ID).State == playbook.Ended })
	r.wantActive("after the second end")
}

// Shadow mode: the incident records what would be written, each rule
// checked by the gate, and the store stays empty through escalation.
func TestShadowWritesNothing(t *testing.T) {
	r := newRig(t, base+strings.Replace(escalating, `name = "udp-flood"`, "name = \"udp-flood\"\nshadow = true", 1))
	for range 4 {
		r.accept(sig("203.0.113.10/32", signals.Ongoing))
	}
	r.clk.Advance(2 * time.Minute)
	r.eventually("step 3", func() bool { return r.incident(1).Step == 2 })
	all, err := r.st.List(context.Background(), "")
	if err != nil || len(all) != 0 {
		t.Fatalf("shadow mode stored %d rules (%v)", len(all), err)
	}
	inc := r.incident(1)
	if !inc.Shadow || len(inc.Rules) != 3 {
		t.Fatalf("incident %+v", inc)
	}
	for _, x := range inc.Rules {
		if x.State != playbook.RuleShadow || x.ID != 0 || x.ExpiresAt.IsZero() {
			t.Fatalf("shadow rule %+v", x)
		}
	}
	// The end withdraws nothing and ends it.
	r.clk.Advance(10 * time.Minute)
	r.eventually("the end", func() bool { return r.incident(1).State == playbook.Ended })
}

// A playbook whose rules fall outside a source's scope is refused at
// load: a prefix outside its own, an action the source may not use.
func TestOutsideScopeRefusedAtLoad(t *testing.T) {
	const head = `
[bgp]
asn = 65000
router_id = "192.0.2.1"

[[source]]
name = "fnm"
kind = "gobgp"
prefixes = ["203.0.113.0/24"]
actions = ["rate-limit", "discard"]

[[playbook]]
name = "p"
`
	const steps = `
[[playbook.step]]
rules = ["match destination {target} then discard"]
ttl = "1h"
escalate_after = "1m"
[[playbook.step]]
rtbh = true
ttl = "1h"
`
	for _, tc := range []struct {
		body string
		want []string // key, line's start, message
	}{
		{`prefixes = ["198.51.100.0/24"]` + steps, []string{
			"playbook.0.prefixes", "prefixes", `entry 1, 198.51.100.0/24, is outside the prefixes of source "fnm"`,
			"playbook.0.step.0", "[[playbook.step]]", `rules entry 1, "match destination {target} then discard", is outside the scope of source "fnm"`,
		}},
		{steps, []string{
			"playbook.0.step.1", "[[playbook.step]]", `rules entry 1, "route {target} then blackhole", is outside the scope of source "fnm"`,
			"playbook.0.step.1", "[[playbook.step]]", `may not use action rtbh`,
		}},
	} {
		text := head + tc.body
		cfg, err := config.Parse("t.toml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		es := playbook.Check(cfg)
		lines := strings.Split(text, "\n")
		for i := 0; i < len(tc.want); i += 3 {
			found := false
			for _, e := range es {
				if e.Key == tc.want[i] && strings.Contains(e.Msg, tc.want[i+2]) && e.Line > 0 && strings.HasPrefix(lines[e.Line-1], tc.want[i+1]) {
					found = true
				}
			}
			if !found {
				t.Errorf("Check = %v; lacks %s (line %s...): %s", es, tc.want[i], tc.want[i+1], tc.want[i+2])
			}
		}
	}
	// Inside its scope, it passes.
	ok, err := config.Parse("t.toml", []byte(base+escalating))
	if err != nil {
		t.Fatal(err)
	}
	if es := playbook.Check(ok); len(es) != 0 {
		t.Fatalf("a playbook inside its scope refused: %v", es)
	}
}

// Signals are refused from unknown sources and for targets outside the
// source's prefixes; a signal no playbook matches opens nothing.
func TestRefusedSignals(t *testing.T) {
	r := newRig(t, base+escalating)
	s := sig("203.0.113.10/32", signals.Start)
	s.Source = "nope"
	err := r.eng.Accept(context.Background(), s)
	if !errors.Is(err, playbook.ErrRefused) || !strings.Contains(err.Error(), `unknown source "nope"`) || !strings.Contains(err.Error(), "[[source]]") {
		t.Fatalf("unknown source: %v", err)
	}
	err = r.eng.Accept(context.Background(), sig("198.51.100.1/32", signals.Start))
	if !errors.Is(err, playbook.ErrRefused) || !strings.Contains(err.Error(), "outside the prefixes of source") {
		t.Fatalf("outside the source: %v", err)
	}
	low := sig("203.0.113.10/32", signals.Start)
	low.PPS = 10 // below min_pps
	r.accept(low)
	if err := r.eng.Accept(context.Background(), signals.Signal{Source: "fnm"}); !errors.Is(err, signals.ErrInvalid) {
		t.Fatalf("invalid signal: %v", err)
	}
	if n := r.eng.Open(); n != 0 || len(r.active()) != 0 {
		t.Fatalf("%d incidents, %d rules after refused signals", n, len(r.active()))
	}
}

// Bounds: [incidents] max_open refuses the signal that would open one
// more, naming the setting; a timeline keeps max_timeline entries and
// counts the rest; keep_ended ended incidents are kept.
func TestBounds(t *testing.T) {
	r := newRig(t, base+"[incidents]\nmax_open = 2\nmax_timeline = 4\nkeep_ended = 1\n"+escalating)
	r.accept(sig("203.0.113.10/32", signals.Start))
	r.accept(sig("203.0.113.11/32", signals.Start))
	err := r.eng.Accept(context.Background(), sig("203.0.113.12/32", signals.Start))
	if !errors.Is(err, playbook.ErrRefused) || !strings.Contains(err.Error(), "[incidents] max_open") {
		t.Fatalf("third incident: %v", err)
	}
	// Signals for open incidents still count.
	for range 4 {
		r.accept(sig("203.0.113.10/32", signals.Ongoing))
	}
	r.clk.Advance(3 * time.Minute)
	r.eventually("step 3", func() bool { return r.incident(1).Step == 2 })
	inc := r.incident(1)
	if len(inc.Timeline) != 4 || inc.Omitted == 0 {
		t.Fatalf("timeline %d entries, %d omitted", len(inc.Timeline), inc.Omitted)
	}
	r.accept(sig("203.0.113.10/32", signals.End))
	r.accept(sig("203.0.113.11/32", signals.End))
	r.clk.Advance(5 * time.Minute)
	r.eventually("both ended", func() bool { return r.eng.Open() == 0 })
	if l := r.eng.List(nil, 0); len(l) != 1 {
		t.Fatalf("%d ended incidents kept, want 1 (keep_ended)", len(l))
	}
	r.accept(sig("203.0.113.12/32", signals.Start))
}

// A restart loses no incident: an open one goes on at its step, escalates
// on time, and its hold-down, due while the daemon was down, ends it and
// withdraws its rules; ids go on from the last one.
func TestRestartKeepsIncidents(t *testing.T) {
	r := newRig(t, base+escalating)
	r.accept(sig("203.0.113.10/32", signals.Start))
	r.accept(sig("203.0.113.11/32", signals.Start))
	r.clk.Advance(30 * time.Second)
	r.accept(sig("203.0.113.11/32", signals.End)) // hold-down until 5m30s
	r.stop()

	r.start()
	if inc := r.incident(1); inc.State != playbook.Active || inc.Step != 0 || !inc.StepAt.Equal(start) || len(inc.Rules) != 1 || inc.Rules[0].State != playbook.RuleActive {
		t.Fatalf("incident 1 after restart: %+v", inc)
	}
	if inc := r.incident(2); inc.State != playbook.Holding || !inc.EndsAt.Equal(start.Add(30*time.Second+5*time.Minute)) {
		t.Fatalf("incident 2 after restart: %+v", inc)
	}
	// Escalation by time goes on from when the step began.
	r.clk.Advance(30 * time.Second)
	r.eventually("step 2 after the restart", func() bool { return r.incident(1).Step == 1 })
	r.wantActive("after the restart", discard, "match destination 203.0.113.11/32 protocol ==udp destination-port ==53 then rate-limit 125000")
	r.stop()

	// Down past incident 2's hold-down: it ends at the first pass.
	r.clk.Advance(10 * time.Minute)
	r.start()
	r.eventually("incident 2 ended", func() bool { return r.incident(2).State == playbook.Ended })
	r.eventually("incident 1 quiet, then ended", func() bool { return r.incident(1).State == playbook.Ended })
	r.wantActive("after both ended")
	r.accept(sig("203.0.113.12/32", signals.Start))
	if l := r.eng.List(nil, 1); l[0].ID != 3 {
		t.Fatalf("a new incident after restarts has id %d, want 3", l[0].ID)
	}
	r.stop()
	r.start()
	if l := r.eng.List(nil, 0); len(l) != 3 || l[1].State != playbook.Ended || len(l[1].Timeline) == 0 {
		t.Fatalf("after another restart: %+v", l)
	}
}

// quiet_after = "never", for detectors that report an attack once (a
// FastNetMon ban): the incident stays until an end signal, and the
// timer extends the rules' TTL meanwhile.
func TestNeverQuiet(t *testing.T) {
	r := newRig(t, base+`
[[playbook]]
name = "ban"
quiet_after = "never"
hold_down = "2m"
[[playbook.step]]
rtbh = true
ttl = "10m"
`)
	r.accept(sig("203.0.113.10/32", signals.Start))
	for i := 1; i <= 12; i++ { // an hour without signals
		r.clk.Advance(5 * time.Minute)
		want := start.Add(time.Duration(i)*5*time.Minute + 10*time.Minute)
		r.eventually(fmt.Sprintf("the TTL extended at %dm (%+v)", i*5, r.incident(1)), func() bool { return r.incident(1).Rules[0].ExpiresAt.Equal(want) })
	}
	r.wantActive("after an hour without signals", rtbh)
	if got := r.active()[rtbh].ExpiresAt; !got.Equal(start.Add(70 * time.Minute)) {
		t.Fatalf("stored expiry %v", got)
	}
	if inc := r.incident(1); inc.State != playbook.Active || inc.Extended != 12 {
		t.Fatalf("incident %s, extended %d times", inc.State, inc.Extended)
	}
	r.accept(sig("203.0.113.10/32", signals.End))
	r.clk.Advance(2 * time.Minute)
	r.eventually("the end", func() bool { return r.incident(1).State == playbook.Ended })
	r.wantActive("after the end")
}

// The rules last through hold-down: a rule that would expire before it
// ends is extended when it starts.
func TestHoldDownOutlivesTTL(t *testing.T) {
	r := newRig(t, base+`
[[playbook]]
name = "p"
[[playbook.step]]
rules = ["match destination {target} then discard"]
ttl = "10m"
`)
	const text = "match destination 203.0.113.10/32 then discard"
	r.accept(sig("203.0.113.10/32", signals.Start))
	r.clk.Advance(4 * time.Minute)
	r.accept(sig("203.0.113.10/32", signals.Ongoing)) // 6m left: not extended
	r.clk.Advance(5 * time.Minute)                    // quiet at 9m: hold-down until 14m
	r.eventually("hold-down", func() bool { return r.incident(1).State == playbook.Holding })
	if got, want := r.active()[text].ExpiresAt, start.Add(19*time.Minute); !got.Equal(want) {
		t.Fatalf("expires %v in hold-down until %v; want %v", got, r.incident(1).EndsAt, want)
	}
	r.clk.Advance(5 * time.Minute)
	r.eventually("the end", func() bool { return r.incident(1).State == playbook.Ended })
	r.wantActive("after the end")
}

// A source over its rate of new rules ([[source]]
// max_new_rules_per_minute) gets its rule when its turn comes, on the
// timer, without another signal.
func TestRateLimitedRuleRetried(t *testing.T) {
	r := newRig(t, strings.Replace(base, "max_new_rules_per_minute = -1", "max_new_rules_per_minute = 1", 1)+`
[[playbook]]
name = "ban"
quiet_after = "never"
[[playbook.step]]
rtbh = true
ttl = "10m"
`)
	r.accept(sig("203.0.113.10/32", signals.Start))
	r.accept(sig("203.0.113.11/32", signals.Start))
	inc := r.incident(2)
	if inc.Rules[0].State != playbook.RuleFailed || !strings.Contains(inc.Rules[0].Error, "max_new_rules_per_minute") {
		t.Fatalf("second rule within the minute: %+v", inc.Rules)
	}
	r.stop() // the retry survives a restart
	r.start()
	r.clk.Advance(time.Minute)
	r.eventually("the retry", func() bool { return r.incident(2).Rules[0].State == playbook.RuleActive })
	r.wantActive("both", rtbh, "route 203.0.113.11/32 then blackhole")
}

// A reload (SetConfig) applies to incidents opened after it: an open one
// keeps the playbook it opened with, a removed source is unknown from then
// on.
func TestReloadKeepsOpenIncidents(t *testing.T) {
	r := newRig(t, base+escalating)
	r.accept(sig("203.0.113.10/32", signals.Start))
	next, err := config.Parse("t.toml", []byte(base+`
[[source]]
name = "am"
kind = "alertmanager"
secret = "0123456789abcdef0123"

[[playbook]]
name = "blackhole-all"
[[playbook.step]]
rtbh = true
ttl = "1h"
`))
	if err != nil {
		t.Fatal(err)
	}
	r.eng.SetConfig(next)
	r.accept(sig("203.0.113.11/32", signals.Start))
	r.accept(sig("203.0.113.10/32", signals.Ongoing))
	if a, b := r.incident(1), r.incident(2); a.Playbook != "udp-flood" || b.Playbook != "blackhole-all" {
		t.Fatalf("after reload: incident 1 %s, incident 2 %s", a.Playbook, b.Playbook)
	}
	r.wantActive("after reload", rateLimit, "route 203.0.113.11/32 then blackhole")
	s := sig("203.0.113.12/32", signals.Start)
	s.Source = "am"
	r.accept(s)
	r.eng.SetConfig(r.cfg) // "am" removed again
	if err := r.eng.Accept(context.Background(), s); !errors.Is(err, playbook.ErrRefused) {
		t.Fatalf("a removed source: %v", err)
	}
}

// IPv6 targets get IPv6 rules from the same templates.
func TestIPv6Target(t *testing.T) {
	r := newRig(t, base+escalating)
	r.accept(sig("2001:db8::10/128", signals.Start))
	r.wantActive("ipv6", "match destination 2001:db8::10/128 protocol ==udp destination-port ==53 then rate-limit 125000")
	r.clk.Advance(time.Minute)
	r.eventually("step 2", func() bool { return r.incident(1).Step == 1 })
	r.clk.Advance(2 * time.Minute)
	r.eventually("step 3", func() bool { return r.incident(1).Step == 2 })
	r.wantActive("ipv6 blackhole", "route 2001:db8::10/128 then blackhole")
}

// Under concurrent signals for many targets, with the clock moving and
// incidents escalating, ending and reopening, every incident's rules are
// withdrawn once it ends: when all have ended, nothing is left in the
// store.
func TestConcurrentSignalsLeaveNothingBehind(t *testing.T) {
	r := newRig(t, base+escalating)
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				state := signals.Ongoing
				switch (i + g) % 17 {
				case 0:
					state = signals.End
				case 1:
					state = signals.Start
				}
				s := sig(fmt.Sprintf("203.0.113.%d/32", 20+(i*7+g)%12), state)
				if err := r.eng.Accept(context.Background(), s); err != nil {
					t.Error(err)
					return
				}
				if i%50 == 0 && g == 0 {
					r.clk.Advance(40 * time.Second)
				}
			}
		}()
	}
	wg.Wait()
	if r.eng.Open() == 0 || len(r.active()) == 0 {
		t.Fatalf("%d incidents open, %d rules: the test did not get going", r.eng.Open(), len(r.active()))
	}
	for i := range 12 {
		r.accept(sig(fmt.Sprintf("203.0.113.%d/32", 20+i), signals.End))
	}
	r.clk.Advance(5 * time.Minute)
	r.eventually("every incident ended", func() bool { return r.eng.Open() == 0 })
	r.wantActive("after every incident ended")
	for _, inc := range r.eng.List(nil, 0) {
		for _, x := range inc.Rules {
			if x.State == playbook.RuleActive {
				t.Errorf("incident %d ended with rule %d active", inc.ID, x.ID)
			}
		}
	}
}

// Incidents for one target and different vectors may store the same
// rule: it stays while one of them still needs it.
func TestSharedRuleStaysWhileNeeded(t *testing.T) {
	r := newRig(t, base+`
[[playbook]]
name = "p"
hold_down = "1m"
[[playbook.step]]
rules = ["match destination {target} then discard"]
ttl = "1h"
`)
	const text = "match destination 203.0.113.10/32 then discard"
	dns, ntp := sig("203.0.113.10/32", signals.Start), sig("203.0.113.10/32", signals.Start)
	ntp.Vector.DstPorts = []uint16{123}
	r.accept(dns)
	r.accept(ntp)
	if a, b := r.incident(1), r.incident(2); a.Rules[0].ID != b.Rules[0].ID {
		t.Fatalf("two rules %d, %d for one match", a.Rules[0].ID, b.Rules[0].ID)
	}
	dns.State = signals.End
	r.accept(dns)
	r.clk.Advance(time.Minute)
	r.eventually("the dns incident ended", func() bool { return r.incident(1).State == playbook.Ended })
	r.wantActive("the ntp incident still needs it", text)
	ntp.State = signals.End
	r.accept(ntp)
	r.clk.Advance(time.Minute)
	r.eventually("the ntp incident ended", func() bool { return r.incident(2).State == playbook.Ended })
	r.wantActive("both ended")
}

// An operator's withdrawal stands: the incident does not store the rule
// again when it would extend its TTL.
func TestOperatorWithdrawalStands(t *testing.T) {
	r := newRig(t, base+`
[[playbook]]
name = "p"
[[playbook.step]]
rules = ["match destination {target} then discard"]
ttl = "20m"
`)
	r.accept(sig("203.0.113.10/32", signals.Start))
	id := r.incident(1).Rules[0].ID
	if _, err := r.gate.Withdraw(context.Background(), admit.Actor{Name: "noc", Source: admit.SourceSocket}, id); err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{4, 4, 3} { // signals 4, 8, 11 minutes in: never quiet
		r.clk.Advance(d * time.Minute)
		r.accept(sig("203.0.113.10/32", signals.Ongoing)) // the last one with less than half the TTL left
	}
	if n := r.eng.Open(); n != 1 {
		t.Fatalf("%d incidents open", n)
	}
	r.wantActive("after the operator's withdrawal")
	if x := r.incident(1).Rules[0]; x.State != playbook.RuleWithdrawn || !strings.Contains(x.Error, "withdrawn outside the incident") {
		t.Fatalf("incident rule %+v", x)
	}
}
