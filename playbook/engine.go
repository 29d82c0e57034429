package playbook

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/notify"
	"github.com/ribkeeper/ribkeeper/signals"
	"github.com/ribkeeper/ribkeeper/store"
)

// Gate is the admission gate as the engine writes through it
// (implemented by *admit.Gate).
type Gate interface {
	Add(ctx context.Context, a admit.Actor, req admit.Request) (store.Rule, bool, error)
	Withdraw(ctx context.Context, a admit.Actor, id int64) (store.Rule, error)
	Validate(ctx context.Context, a admit.Actor, req admit.Request) (admit.Verdict, error)
}

// Rules reads stored rules (implemented by *store.Store).
type Rules interface {
	GetBrief(ctx context.Context, id int64) (store.Rule, error)
}

// Notifier takes notifications; Notify must not block.
type Notifier interface {
	Notify(notify.Event)
}

// Config configures an Engine.
type Config struct {
	Gate Gate
	// Store keeps the incidents across restarts (Load); nil: in memory
	// only.
	Store Store
	// Rules, if set, lets the engine see that a rule it would extend was
	// withdrawn by someone else meanwhile, and leave it withdrawn (nil:
	// an extension stores it again).
	Rules    Rules
	Notifier Notifier // nil: no notifications
	// Changed, if set, is called with a copy of an incident after each
	// change of its state, step or rules (the event stream); it must not
	// block.
	Changed func(Incident)
	Clock   clock.Clock // nil: the system clock
	Log     hclog.Logger
}

// The engine is the daemon's signals.Sink.
var _ signals.Sink = (*Engine)(nil)

// ErrRefused is wrapped by the errors of signals the engine refuses.
var ErrRefused = errors.New("signal refused")

// Engine correlates signals into incidents and applies playbooks. It is
// safe for concurrent use.
type Engine struct {
	cfg   Config
	rules atomic.Pointer[ruleset]
	wake  chan struct{}

	mu     sync.Mutex
	open   map[key]*incident
	ended  []Incident // oldest first, at most KeepEnded
	lastID int64
	armed  time.Time // the deadline the timer is set for (zero: none)

	// refs counts, per stored rule, the open incidents' entries that hold
	// it active: incidents for one target and different vectors may
	// store the same rule, which goes only when the last lets it go.
	// writeMu makes each write and its count one step (lock order:
	// incident, writeMu, mu).
	writeMu sync.Mutex
	refs    map[int64]int

	// dirty are the incidents to save (persist.go).
	saveMu   sync.Mutex
	dirty    map[*incident]bool
	saveWake chan struct{}

	stats struct {
		accepted, unmatched atomic.Int64
	}
}

// key identifies an incident: target and vector.
type key struct {
	target netip.Prefix
	vector string
}

// ruleset is what the engine takes from a configuration.
type ruleset struct {
	sources   map[string]config.Source
	playbooks []config.Playbook
	bounds    config.Incidents
}

// New returns an engine for cfg's sources and playbooks; run it with Run.
func New(c Config, file *config.Config) *Engine {
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Log == nil {
		c.Log = hclog.NewNullLogger()
	}
	e := &Engine{cfg: c, wake: make(chan struct{}, 1), open: map[key]*incident{}, refs: map[int64]int{}, dirty: map[*incident]bool{}, saveWake: make(chan struct{}, 1)}
	e.SetConfig(file)
	return e
}

// SetConfig takes the sources, playbooks and bounds of file (on reload);
// file passed Check. Open incidents keep their playbook.
func (e *Engine) SetConfig(file *config.Config) {
	rs := &ruleset{sources: map[string]config.Source{}, playbooks: file.Playbooks, bounds: file.Incidents}
	for _, s := range file.Sources {
		rs.sources[s.Name] = s
	}
	if rs.bounds.MaxOpen <= 0 {
		rs.bounds.MaxOpen = config.DefaultMaxOpen
	}
	if rs.bounds.MaxTimeline <= 0 {
		rs.bounds.MaxTimeline = config.DefaultMaxTimeline
	}
	if rs.bounds.KeepEnded <= 0 {
		rs.bounds.KeepEnded = config.DefaultKeepEnded
	}
	e.rules.Store(rs)
}

// Actor is the admission gate's actor of source s.
func Actor(s config.Source) admit.Actor {
	return admit.Actor{Name: s.Name, Source: admit.SourceSignal, Scope: admit.Scope{
		Prefixes: s.Prefixes, Actions: s.Actions, MaxActive: s.MaxActiveRules,
		MaxNewPerMinute: s.MaxNewRulesPerMinute, NeverExpires: s.NeverExpires,
	}}
}

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// Accept takes one signal: it opens, feeds or ends an incident, and
// returns once the incident's rules for it are written. An error refuses
// the signal itself (invalid, unknown source, outside the source's scope,
// too many incidents); a rule the gate refuses is recorded in the
// incident, not returned.
func (e *Engine) Accept(ctx context.Context, s signals.Signal) error {
	if err := s.Check(); err != nil {
		return err
	}
	rs := e.rules.Load()
	src, ok := rs.sources[s.Source]
	if !ok {
		return refused("unknown source %q: signals come only from a configured [[source]]; add one with name = %q, or fix the sender's name", s.Source, s.Source)
	}
	actor := Actor(src)
	if len(src.Prefixes) > 0 && !actor.Scope.Covers(s.Target) {
		return refused("target %s is outside the prefixes of source %q: widen its [[source]] prefixes, or send signals only for targets inside them", s.Target, s.Source)
	}
	now := e.cfg.Clock.Now()
	e.stats.accepted.Add(1)
	k := key{target: s.Target, vector: s.Vector.Key()}
	for {
		e.mu.Lock()
		inc := e.open[k]
		if inc == nil {
			if s.State == signals.End {
				e.mu.Unlock()
				e.stats.unmatched.Add(1)
				return nil // nothing to end
			}
			pb, ok := match(rs, s)
			if !ok {
				e.mu.Unlock()
				e.stats.unmatched.Add(1)
				return nil
			}
			if len(e.open) >= rs.bounds.MaxOpen {
				e.mu.Unlock()
				return refused("%d incidents are open, the most allowed ([incidents] max_open): this signal for %s opens none; raise max_open, or narrow the playbooks' match",
					len(e.open), s.Target)
			}
			e.lastID++
			inc = &incident{pb: pb, actor: actor, maxTimeline: rs.bounds.MaxTimeline}
			inc.inc = Incident{ID: e.lastID, Target: s.Target, Vector: s.Vector, Source: s.Source, Playbook: pb.Name,
				Shadow: pb.Shadow, Steps: len(pb.Steps), State: Active, OpenedAt: now, StepAt: now, LastSignal: now}
			inc.mu.Lock() // nobody else has it yet
			e.open[k] = inc
			e.mu.Unlock()
			e.opened(ctx, inc, s, now)
			inc.mu.Unlock()
			return nil
		}
		e.mu.Unlock()
		inc.mu.Lock()
		if inc.inc.State == Ended {
			inc.mu.Unlock()
			continue // ended meanwhile: the signal may open a new one
		}
		e.signal(ctx, inc, s, now)
		inc.mu.Unlock()
		return nil
	}
}

// match returns the first playbook of rs that matches s.
func match(rs *ruleset, s signals.Signal) (config.Playbook, bool) {
	for _, p := range rs.playbooks {
		if matches(p, s) {
			return p, true
		}
	}
	return config.Playbook{}, false
}

// matches reports whether p applies to s.
func matches(p config.Playbook, s signals.Signal) bool {
	if len(p.Sources) > 0 && !slices.Contains(p.Sources, s.Source) {
		return false
	}
	proto := lower(s.Vector.Protocol)
	if len(p.Protocols) > 0 && !slices.Contains(p.Protocols, proto) {
		return false
	}
	if len(p.DstPorts) > 0 && !slices.ContainsFunc(s.Vector.DstPorts, func(port uint16) bool { return slices.Contains(p.DstPorts, port) }) {
		return false
	}
	if s.PPS < p.MinPPS || s.BPS < p.MinBPS || s.Confidence < p.MinConfidence {
		return false
	}
	if len(p.Prefixes) > 0 && !(admit.Scope{Prefixes: p.Prefixes}).Covers(s.Target) {
		return false
	}
	// The signal carries what the templates use.
	for _, st := range p.Steps {
		for _, t := range st.Rules {
			if t.Uses(config.PlaceProtocol) && proto == "" || t.Uses(config.PlaceDstPorts) && len(s.Vector.DstPorts) == 0 ||
				t.Uses(config.PlaceSrcPorts) && len(s.Vector.SrcPorts) == 0 || t.Uses(config.PlaceTCPFlags) && s.Vector.TCPFlags == "" {
				return false
			}
		}
	}
	return true
}

func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// opened applies the first step of a new incident; the caller holds
// inc.mu.
func (e *Engine) opened(ctx context.Context, inc *incident, s signals.Signal, now time.Time) {
	inc.inc.Signals, inc.inc.StepSignals = 1, 1
	inc.inc.PeakPPS, inc.inc.PeakBPS, inc.inc.AttackID = s.PPS, s.BPS, printable(s.AttackID, signals.MaxIDBytes)
	mode := ""
	if inc.pb.Shadow {
		mode = " (shadow: nothing is written)"
	}
	inc.note(now, "opened", "signal from %s: %s%s; playbook %s%s", s.Source, describe(s), detail(s), inc.pb.Name, mode)
	e.cfg.Log.Info("incident opened", "incident", inc.inc.ID, "target", s.Target, "vector", s.Vector.Key(), "source", s.Source, "playbook", inc.pb.Name, "shadow", inc.pb.Shadow)
	e.applyStep(ctx, inc, now, s)
	e.schedule(inc)
	e.notify(inc, notify.IncidentOpened, now, fmt.Sprintf("incident %d opened: %s under attack (%s), playbook %s", inc.inc.ID, inc.inc.Target, describe(s), inc.pb.Name))
	e.changed(inc)
}

// signal feeds one more signal to inc; the caller holds inc.mu.
func (e *Engine) signal(ctx context.Context, inc *incident, s signals.Signal, now time.Time) {
	in := &inc.inc
	in.Signals++
	in.StepSignals++
	in.LastSignal = now
	in.PeakPPS, in.PeakBPS = max(in.PeakPPS, s.PPS), max(in.PeakBPS, s.BPS)
	changed := false
	if s.State == signals.End {
		if in.State == Active {
			e.hold(ctx, inc, now, now.Add(inc.pb.HoldDown), "end signal from "+s.Source)
		}
	} else {
		if in.State == Holding {
			in.State, in.EndsAt = Active, time.Time{}
			inc.note(now, "resumed", "signal from %s during hold-down: the attack goes on", s.Source)
			changed = true
		}
		st := inc.pb.Steps[in.Step]
		if in.Step+1 < len(inc.pb.Steps) && st.EscalateSignals > 0 && in.StepSignals >= int64(st.EscalateSignals) {
			e.escalate(ctx, inc, now, fmt.Sprintf("%d signals in step %d (escalate_signals)", in.StepSignals, in.Step+1), s)
			changed = false // escalate reported it
		} else if e.refresh(ctx, inc, now, s) {
			changed = true
		}
	}
	e.schedule(inc)
	switch {
	case changed:
		e.changed(inc)
	case now.Sub(inc.savedAt) >= saveEvery:
		e.save(inc, now)
	}
}

// escalate moves inc to its next step; the caller holds inc.mu.
func (e *Engine) escalate(ctx context.Context, inc *incident, now time.Time, why string, s signals.Signal) {
	in := &inc.inc
	in.Step++
	in.StepAt, in.StepSignals = now, 0
	inc.note(now, "escalated", "to step %d of %d after %s", in.Step+1, in.Steps, why)
	e.cfg.Log.Info("incident escalated", "incident", in.ID, "step", in.Step+1, "why", why)
	e.applyStep(ctx, inc, now, s)
	e.notify(inc, notify.IncidentEscalated, now, fmt.Sprintf("incident %d on %s escalated to step %d of %d (%s)", in.ID, in.Target, in.Step+1, in.Steps, why))
	e.changed(inc)
}

// end withdraws inc's rules and closes it; the caller holds inc.mu.
func (e *Engine) end(ctx context.Context, inc *incident, now time.Time) {
	in := &inc.inc
	for i := range in.Rules {
		r := &in.Rules[i]
		if r.State != RuleActive {
			continue
		}
		e.withdraw(ctx, inc, r, now, "incident ended")
	}
	in.State, in.EndedAt = Ended, now
	inc.note(now, "ended", "after hold-down; %d signals in all", in.Signals)
	e.cfg.Log.Info("incident ended", "incident", in.ID, "target", in.Target, "signals", in.Signals)
	snap := inc.snapshot()
	e.mu.Lock()
	delete(e.open, key{target: in.Target, vector: in.Vector.Key()})
	keep := e.rules.Load().bounds.KeepEnded
	if len(e.ended) >= keep {
		n := len(e.ended) - keep + 1
		clear(e.ended[:n])
		e.ended = e.ended[n:]
	}
	e.ended = append(e.ended, snap)
	inc.due = time.Time{}
	e.mu.Unlock()
	e.save(inc, now)
	e.notify(inc, notify.IncidentEnded, now, fmt.Sprintf("incident %d on %s ended after %d signals", in.ID, in.Target, in.Signals))
	if e.cfg.Changed != nil {
		e.cfg.Changed(snap)
	}
}

// ref adds d to the count of open incidents' entries holding rule id
// active and returns it; the caller holds writeMu.
func (e *Engine) ref(id int64, d int) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.refs[id] + d
	if n <= 0 {
		delete(e.refs, id)
		return 0
	}
	e.refs[id] = n
	return n
}

// schedule records inc's next deadline and wakes Run when it is earlier
// than the one the timer is set for; the caller holds inc.mu.
func (e *Engine) schedule(inc *incident) {
	e.scheduleAt(inc, inc.deadlines().next())
}

func (e *Engine) scheduleAt(inc *incident, d time.Time) {
	e.mu.Lock()
	inc.due = d
	wake := !d.IsZero() && (e.armed.IsZero() || d.Before(e.armed))
	if wake {
		e.armed = d
	}
	e.mu.Unlock()
	if wake {
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
}

// Run drives the incidents' deadlines (escalation by time, the end of an
// attack without signals, the end of hold-down) from the clock, and saves
// changed incidents, until ctx is done; it returns after the last save.
func (e *Engine) Run(ctx context.Context) error {
	saved := make(chan struct{})
	go func() { defer close(saved); e.saver(ctx) }()
	defer func() { <-saved }()
	t := e.cfg.Clock.NewTimer()
	defer t.Stop()
	for {
		next := e.pass(ctx)
		if next.IsZero() {
			t.Stop()
		}
		for !next.IsZero() {
			// A timer counts from the clock's time when it is reset: if
			// the clock jumped between reading it and the reset (a
			// stepped clock), reset again, or the timer would fire late
			// by the jump.
			now := e.cfg.Clock.Now()
			t.Reset(next.Sub(now))
			if e.cfg.Clock.Now().Sub(now) <= time.Millisecond {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		case <-e.wake:
		}
	}
}

// pass acts on every incident whose deadline has come and returns the
// next deadline (zero: none).
func (e *Engine) pass(ctx context.Context) time.Time {
	now := e.cfg.Clock.Now()
	var due []*incident
	e.mu.Lock()
	for _, inc := range e.open {
		if !inc.due.IsZero() && !inc.due.After(now) {
			due = append(due, inc)
		}
	}
	e.mu.Unlock()
	for _, inc := range due {
		inc.mu.Lock()
		if inc.inc.State != Ended {
			e.deadlines(ctx, inc, now)
		}
		inc.mu.Unlock()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var next time.Time
	for _, inc := range e.open {
		if !inc.due.IsZero() && (next.IsZero() || inc.due.Before(next)) {
			next = inc.due
		}
	}
	e.armed = next
	return next
}

// deadlines acts on what is due for inc at now; the caller holds inc.mu.
func (e *Engine) deadlines(ctx context.Context, inc *incident, now time.Time) {
	in := &inc.inc
	due := func(t time.Time) bool { return !t.IsZero() && !t.After(now) }
	for range 4 { // each move changes the state or the step: a few at most
		d := inc.deadlines()
		switch {
		case in.State == Holding && due(d.end):
			e.end(ctx, inc, now)
			return
		case due(d.quiet) && (d.escalate.IsZero() || !d.quiet.After(d.escalate)):
			e.hold(ctx, inc, now, d.quiet.Add(inc.pb.HoldDown), fmt.Sprintf("no signal for %s (quiet_after)", inc.pb.QuietAfter))
			continue
		case due(d.escalate):
			st := inc.pb.Steps[in.Step]
			e.escalate(ctx, inc, now, fmt.Sprintf("%s in step %d (escalate_after)", st.EscalateAfter, in.Step+1), signals.Signal{Source: in.Source})
			continue
		case due(d.refresh) || due(d.retry):
			if e.refresh(ctx, inc, now, signals.Signal{Source: in.Source}) {
				e.changed(inc)
			}
		}
		break
	}
	d := inc.deadlines().next()
	if !d.IsZero() && !d.After(now) {
		// Still due after acting on it: a failure (logged) or a bug; do
		// not spin on it.
		e.cfg.Log.Debug("incident deadline still due after its pass; trying again later", "incident", in.ID)
		d = now.Add(retryEvery)
	}
	e.scheduleAt(inc, d)
}

// hold starts inc's hold-down, until endsAt, and extends its rules'
// TTL so they last until then; the caller holds inc.mu.
func (e *Engine) hold(ctx context.Context, inc *incident, now, endsAt time.Time, why string) {
	in := &inc.inc
	in.State, in.EndsAt = Holding, endsAt
	inc.note(now, "attack-ended", "%s: the rules stay until %s (hold_down %s)", why, endsAt.UTC().Format(time.RFC3339), inc.pb.HoldDown)
	if !inc.pb.Shadow {
		st := inc.pb.Steps[in.Step]
		ttl := st.TTL.String()
		reason := inc.reason(signals.Signal{Source: in.Source})
		for i := range in.Rules {
			r := &in.Rules[i]
			if r.State != RuleActive || r.ExpiresAt.IsZero() || !r.ExpiresAt.Before(endsAt) {
				continue
			}
			e.extend(ctx, inc, r, ttl, reason, now)
		}
	}
	e.changed(inc)
}

func (e *Engine) notify(inc *incident, kind notify.Kind, now time.Time, summary string) {
	if e.cfg.Notifier == nil {
		return
	}
	in := &inc.inc
	ids := make([]int64, 0, len(in.Rules))
	for _, r := range in.Rules {
		if r.ID != 0 && r.State == RuleActive {
			ids = append(ids, r.ID)
		}
	}
	e.cfg.Notifier.Notify(notify.Event{Kind: kind, At: now, Summary: summary, Incident: &notify.Incident{
		ID: in.ID, Target: in.Target.String(), Vector: in.Vector.Key(), Source: in.Source, Playbook: in.Playbook, Step: in.Step, Rules: ids,
	}})
}

// changed saves inc and tells the event stream; the caller holds
// inc.mu.
func (e *Engine) changed(inc *incident) {
	e.save(inc, e.cfg.Clock.Now())
	if e.cfg.Changed != nil {
		e.cfg.Changed(inc.snapshot())
	}
}

// describe is a signal's vector and rate for people.
func describe(s signals.Signal) string {
	out := s.Target.String()
	v := s.Vector
	if v.Protocol != "" {
		out += " " + printable(v.Protocol, 16)
	}
	for _, l := range []struct {
		name  string
		ports []uint16
	}{{"dst", v.DstPorts}, {"src", v.SrcPorts}} {
		for i, p := range l.ports {
			if i == 0 {
				out += " " + l.name + " "
			} else {
				out += ","
			}
			out += fmt.Sprint(p)
		}
	}
	if v.TCPFlags != "" {
		out += " flags " + printable(v.TCPFlags, 64)
	}
	if s.PPS > 0 {
		out += fmt.Sprintf(" %d pps", s.PPS)
	}
	if s.BPS > 0 {
		out += fmt.Sprintf(" %d bps", s.BPS)
	}
	if s.Confidence > 0 {
		out += fmt.Sprintf(" confidence %.2f", s.Confidence)
	}
	return out
}

func detail(s signals.Signal) string {
	out := ""
	if s.AttackID != "" {
		out += " attack " + printable(s.AttackID, 64)
	}
	if s.Detail != "" {
		out += " (" + printable(s.Detail, 128) + ")"
	}
	return out
}

// Get returns the incident with id, open or among the ended ones kept.
func (e *Engine) Get(id int64) (Incident, bool) {
	e.mu.Lock()
	var found *incident
	for _, inc := range e.open {
		if inc.inc.ID == id { // ID never changes: readable under e.mu
			found = inc
			break
		}
	}
	if found == nil {
		defer e.mu.Unlock()
		for i := len(e.ended) - 1; i >= 0; i-- {
			if e.ended[i].ID == id {
				return e.ended[i], true
			}
		}
		return Incident{}, false
	}
	e.mu.Unlock()
	found.mu.Lock()
	defer found.mu.Unlock()
	return found.snapshot(), true
}

// List returns the open incidents and the ended ones kept, newest first,
// at most limit (0: all) of those keep says (nil: all).
func (e *Engine) List(keep func(netip.Prefix) bool, limit int) []Incident {
	e.mu.Lock()
	open := make([]*incident, 0, len(e.open))
	for _, inc := range e.open {
		if keep == nil || keep(inc.inc.Target) {
			open = append(open, inc)
		}
	}
	var out []Incident
	for i := len(e.ended) - 1; i >= 0; i-- {
		if keep == nil || keep(e.ended[i].Target) {
			out = append(out, e.ended[i])
		}
	}
	e.mu.Unlock()
	snaps := make([]Incident, 0, len(open)+len(out))
	for _, inc := range open {
		inc.mu.Lock()
		snaps = append(snaps, inc.snapshot())
		inc.mu.Unlock()
	}
	snaps = append(snaps, out...)
	slices.SortStableFunc(snaps, func(a, b Incident) int {
		switch {
		case a.ID > b.ID:
			return -1
		case a.ID < b.ID:
			return 1
		}
		return 0
	})
	if limit > 0 && len(snaps) > limit {
		snaps = snaps[:limit]
	}
	return snaps
}

// Open returns how many incidents are open.
func (e *Engine) Open() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.open)
}
