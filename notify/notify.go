package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/clock"
)

// The notifier's contract:
//
//   - Notify never blocks and never fails: it appends the event to the
//     queue of every target that wants its kind and returns. A producer (the
//     reconcile loop, the speaker's peer watch, the playbook engine) is never
//     delayed by a receiver, however slow or down.
//   - Each target's queue is bounded (Target.Queue events). When it is full
//     the oldest event is dropped and counted; the next delivery says how
//     many were dropped before it (dropped_before), so a receiver knows it
//     missed some.
//   - Each target is delivered in order, one event at a time, by its own
//     goroutine: an event is retried, with exponential backoff on the
//     injected clock (DefaultMinBackoff doubling to DefaultMaxBackoff), until
//     the receiver accepts it (2xx), or refuses it for good (a 4xx other
//     than 408 and 429: the event is dropped, counted as failed and logged,
//     so that one bad event does not stop every later one). Every delivery
//     carries the event's id: a receiver that saw a retry twice can tell.
//   - Kinds of target: "webhook" POSTs the event as JSON, signed with
//     HMAC-SHA256 (see Sign); "slack" POSTs a Slack-compatible message
//     {"text": ...} (Slack's incoming webhooks, Mattermost, Rocket.Chat).

// Target kinds.
const (
	KindWebhook = "webhook"
	KindSlack   = "slack"
)

// Defaults of a target and of the retry schedule.
const (
	DefaultQueue      = 1000
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = 5 * time.Minute
	// DefaultTimeout bounds one delivery attempt.
	DefaultTimeout = 10 * time.Second
)

// Headers of a webhook delivery.
const (
	HeaderSignature = "X-Ribkeeper-Signature" // "sha256=" + hex HMAC
	HeaderTimestamp = "X-Ribkeeper-Timestamp" // Unix seconds, signed
	HeaderEvent     = "X-Ribkeeper-Event"     // the event's kind
	HeaderDelivery  = "X-Ribkeeper-Delivery"  // the event's id
)

// Target is one receiver of notifications.
type Target struct {
	Name string
	Kind string // KindWebhook or KindSlack
	URL  string
	// Secret signs webhook deliveries (required for KindWebhook).
	Secret string
	// Kinds, if any, are the only kinds of events sent to it.
	Kinds []Kind
	// Queue bounds the events waiting for it (0: DefaultQueue).
	Queue int
}

func (t Target) wants(k Kind) bool { return len(t.Kinds) == 0 || slices.Contains(t.Kinds, k) }

// TargetStatus is the delivery state of one target, for status and
// metrics.
type TargetStatus struct {
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	Queued    int       `json:"queued"`
	Delivered uint64    `json:"delivered"`
	Retries   uint64    `json:"retries"`
	Failed    uint64    `json:"failed"`  // refused for good by the receiver
	Dropped   uint64    `json:"dropped"` // pushed out of a full queue
	LastError string    `json:"last_error,omitempty"`
	LastErrAt time.Time `json:"last_error_at,omitzero"`
	LastOKAt  time.Time `json:"last_delivered_at,omitzero"`
	// NextTry is when a failed delivery is tried again (zero: not waiting).
	NextTry time.Time `json:"next_try_at,omitzero"`
}

// Notifier delivers events to its targets. The zero value is not usable;
// use New. A nil *Notifier drops every event (no targets configured).
type Notifier struct {
	log    hclog.Logger
	clk    clock.Clock
	client *http.Client
	site   string
	minB   time.Duration
	maxB   time.Duration

	mu      sync.Mutex
	seq     uint64
	targets []*target
	ctx     context.Context // set by Run; targets added later start on it
	wg      sync.WaitGroup

	// settled, if set, is called after each delivery attempt is recorded
	// (tests wait on it).
	settled func()
}

// Option configures a Notifier.
type Option func(*Notifier)

// WithClient sets the HTTP client of deliveries (tests; a proxy).
func WithClient(c *http.Client) Option { return func(n *Notifier) { n.client = c } }

// WithBackoff sets the retry schedule.
func WithBackoff(min, max time.Duration) Option {
	return func(n *Notifier) { n.minB, n.maxB = min, max }
}

// New returns a notifier for targets; site names this appliance in every
// message. Deliveries start with Run.
func New(log hclog.Logger, clk clock.Clock, site string, targets []Target, opts ...Option) *Notifier {
	n := &Notifier{log: log, clk: clk, site: site, minB: DefaultMinBackoff, maxB: DefaultMaxBackoff,
		client: &http.Client{Timeout: DefaultTimeout}}
	for _, o := range opts {
		o(n)
	}
	for _, t := range targets {
		n.targets = append(n.targets, n.newTarget(t))
	}
	return n
}

// Notify queues e for every target that wants it. It never blocks.
func (n *Notifier) Notify(e Event) {
	if n == nil {
		return
	}
	if e.At.IsZero() {
		e.At = n.clk.Now()
	}
	n.mu.Lock()
	n.seq++
	env := envelope{ID: n.seq, Event: e}
	targets := n.targets
	n.mu.Unlock()
	for _, t := range targets {
		if t.cfg.wants(e.Kind) {
			t.push(env)
		}
	}
}

// SetTargets replaces the targets (a reload). A target whose name and
// settings are unchanged keeps its queue and counters; others start empty,
// and the queue of a removed or changed one is dropped (and logged).
func (n *Notifier) SetTargets(targets []Target) {
	n.mu.Lock()
	old := map[string]*target{}
	for _, t := range n.targets {
		old[t.cfg.Name] = t
	}
	var next []*target
	for _, cfg := range targets {
		if cfg.Queue <= 0 {
			cfg.Queue = DefaultQueue
		}
		if t, ok := old[cfg.Name]; ok && sameTarget(t.cfg, cfg) {
			next = append(next, t)
			delete(old, cfg.Name)
			continue
		}
		t := n.newTarget(cfg)
		next = append(next, t)
		if n.ctx != nil {
			n.start(t)
		}
	}
	n.targets = next
	n.mu.Unlock()
	for _, t := range old {
		t.stop()
		if q := t.status().Queued; q > 0 {
			n.log.Warn("notification target removed or changed; its queued events are dropped", "target", t.cfg.Name, "dropped", q)
		}
	}
}

func sameTarget(a, b Target) bool {
	return a.Name == b.Name && a.Kind == b.Kind && a.URL == b.URL && a.Secret == b.Secret &&
		slices.Equal(a.Kinds, b.Kinds) && a.Queue == b.Queue
}

// Status returns the delivery state of every target, in configuration
// order.
func (n *Notifier) Status() []TargetStatus {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	targets := n.targets
	n.mu.Unlock()
	out := make([]TargetStatus, 0, len(targets))
	for _, t := range targets {
		out = append(out, t.status())
	}
	return out
}

// Run delivers until ctx is done.
func (n *Notifier) Run(ctx context.Context) error {
	if n == nil {
		<-ctx.Done()
		return nil
	}
	n.mu.Lock()
	n.ctx = ctx
	for _, t := range n.targets {
		n.start(t)
	}
	n.mu.Unlock()
	<-ctx.Done()
	n.wg.Wait()
	return nil
}

// start runs t's delivery loop; n.mu is held.
func (n *Notifier) start(t *target) {
	ctx, cancel := context.WithCancel(n.ctx)
	t.cancel = cancel
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		t.deliverLoop(ctx)
	}()
}

// envelope is a queued event with its id.
type envelope struct {
	ID    uint64
	Event Event
}

// target is one receiver's queue and delivery loop.
type target struct {
	n      *Notifier
	cfg    Target
	wake   chan struct{}
	cancel context.CancelFunc

	mu      sync.Mutex
	q       []envelope
	dropped uint64 // dropped since the last delivery (reported in it)
	st      TargetStatus
}

func (n *Notifier) newTarget(cfg Target) *target {
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	return &target{n: n, cfg: cfg, wake: make(chan struct{}, 1),
		st: TargetStatus{Name: cfg.Name, Kind: cfg.Kind}}
}

func (t *target) push(e envelope) {
	t.mu.Lock()
	if len(t.q) >= t.cfg.Queue {
		// Drop the oldest. Copy down rather than reslice, so the backing
		// array does not creep forward and grow.
		copy(t.q, t.q[1:])
		t.q = t.q[:len(t.q)-1]
		t.dropped++
		t.st.Dropped++
	}
	t.q = append(t.q, e)
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// head returns the oldest queued event and how many were dropped before
// it.
func (t *target) head() (envelope, uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.q) == 0 {
		return envelope{}, 0, false
	}
	return t.q[0], t.dropped, true
}

// done removes the event with id from the head (unless a full queue
// already pushed it out) and records the outcome.
func (t *target) done(id uint64, reportedDropped uint64, ok bool, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.q) > 0 && t.q[0].ID == id {
		copy(t.q, t.q[1:])
		t.q = t.q[:len(t.q)-1]
	}
	t.dropped -= min(t.dropped, reportedDropped)
	t.st.NextTry = time.Time{}
	if ok {
		t.st.Delivered++
		t.st.LastOKAt = now
	} else {
		t.st.Failed++
	}
	if len(t.q) == 0 && cap(t.q) > 64 {
		t.q = nil // let a burst's backing array go
	}
}

func (t *target) failed(err error, now, next time.Time) {
	t.mu.Lock()
	t.st.Retries++
	t.st.LastError, t.st.LastErrAt, t.st.NextTry = err.Error(), now, next
	t.mu.Unlock()
}

func (t *target) status() TargetStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.st
	s.Queued = len(t.q)
	return s
}

func (t *target) stop() {
	if t.cancel != nil {
		t.cancel()
	}
}

// deliverLoop sends the queue's head until ctx is done.
func (t *target) deliverLoop(ctx context.Context) {
	n := t.n
	timer := n.clk.NewTimer()
	defer timer.Stop()
	backoff := n.minB
	for {
		env, dropped, ok := t.head()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-t.wake:
				continue
			}
		}
		wait, retry := t.attempt(ctx, env, dropped, backoff)
		if n.settled != nil {
			n.settled()
		}
		switch {
		case ctx.Err() != nil:
			return
		case !retry:
			backoff = n.minB
			continue
		}
		backoff = min(backoff*2, n.maxB)
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		}
	}
}

// attempt delivers env once and records the outcome; retry says to try
// again after wait.
func (t *target) attempt(ctx context.Context, env envelope, dropped uint64, backoff time.Duration) (wait time.Duration, retry bool) {
	n := t.n
	err := t.deliver(ctx, env, dropped)
	now := n.clk.Now()
	var perm *permanentError
	switch {
	case err == nil:
		t.done(env.ID, dropped, true, now)
		return 0, false
	case errors.As(err, &perm):
		t.done(env.ID, dropped, false, now)
		n.log.Error("notification refused by the receiver; dropped (fix the receiver or the target's url)",
			"target", t.cfg.Name, "event", env.Event.Kind, "id", env.ID, "error", err)
		return 0, false
	case ctx.Err() != nil:
		return 0, false
	}
	wait = backoff
	if ra, ok := retryAfter(err); ok && ra > wait {
		wait = min(ra, n.maxB)
	}
	t.failed(err, now, now.Add(wait))
	n.log.Warn("notification not delivered; will retry", "target", t.cfg.Name, "event", env.Event.Kind,
		"id", env.ID, "retry_in", wait, "error", err)
	return wait, true
}

// permanentError is a receiver's refusal that retrying will not change.
type permanentError struct{ msg string }

func (e *permanentError) Error() string { return e.msg }

// retryError is a receiver's answer asking to retry, possibly after a
// while.
type retryError struct {
	msg   string
	after time.Duration
}

func (e *retryError) Error() string { return e.msg }

func retryAfter(err error) (time.Duration, bool) {
	var r *retryError
	if errors.As(err, &r) && r.after > 0 {
		return r.after, true
	}
	return 0, false
}

// deliver makes one attempt.
func (t *target) deliver(ctx context.Context, env envelope, dropped uint64) error {
	var v any = t.n.payload(env, dropped)
	if t.cfg.Kind == KindSlack {
		v = map[string]string{"text": t.n.slackText(env.Event, dropped)}
	}
	body, err := json.Marshal(v)
	if err != nil {
		return &permanentError{msg: fmt.Sprintf("cannot encode the event: %v", err)}
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return &permanentError{msg: fmt.Sprintf("bad url: %v", err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ribkeeper-notify")
	if t.cfg.Kind == KindWebhook {
		ts := strconv.FormatInt(t.n.clk.Now().Unix(), 10)
		req.Header.Set(HeaderTimestamp, ts)
		req.Header.Set(HeaderSignature, Sign(t.cfg.Secret, ts, body))
		req.Header.Set(HeaderEvent, string(env.Event.Kind))
		req.Header.Set(HeaderDelivery, strconv.FormatUint(env.ID, 10))
	}
	resp, err := t.n.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	msg := fmt.Sprintf("%s answered %s %s", t.cfg.URL, resp.Status, strings.TrimSpace(string(snippet)))
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return nil
	case c == http.StatusRequestTimeout || c == http.StatusTooManyRequests || c >= 500:
		r := &retryError{msg: msg}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			r.after = time.Duration(s) * time.Second
		}
		return r
	default:
		return &permanentError{msg: msg}
	}
}

// Sign returns the signature header value of a webhook delivery:
// "sha256=" and the hex HMAC-SHA256, under secret, of the timestamp header's
// value, a dot, and the body. A receiver recomputes it and compares in
// constant time, and refuses a timestamp far from its clock.
func Sign(secret, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Payload is the JSON body of a webhook delivery.
type Payload struct {
	ID       uint64    `json:"id"`
	Kind     Kind      `json:"kind"`
	At       time.Time `json:"at"`
	Site     string    `json:"site"`
	Summary  string    `json:"summary"`
	Incident *Incident `json:"incident,omitempty"`
	Rule     *Rule     `json:"rule,omitempty"`
	Peer     *Peer     `json:"peer,omitempty"`
	// DroppedBefore counts events this target's full queue dropped since
	// the previous delivery.
	DroppedBefore uint64 `json:"dropped_before,omitempty"`
}

func (n *Notifier) payload(env envelope, dropped uint64) Payload {
	e := env.Event
	return Payload{ID: env.ID, Kind: e.Kind, At: e.At.UTC(), Site: n.site, Summary: e.Summary,
		Incident: e.Incident, Rule: e.Rule, Peer: e.Peer, DroppedBefore: dropped}
}

func (n *Notifier) slackText(e Event, dropped uint64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] %s: %s", n.site, e.Kind, e.Summary)
	if dropped > 0 {
		fmt.Fprintf(&b, " (%d earlier notifications were dropped: the queue was full)", dropped)
	}
	return b.String()
}
