package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
)

// The event stream (GET /v1/events) is a server-sent event stream of
// changes to rules and peers, for the console and for detectors and
// scripts:
//
//	id: 1764021234567001
//	event: rule
//	data: {"id": 12, "state": "active", ...}
//
// Event types and their data:
//
//	hello  {"id": N}: the first event of a stream opened without
//	       Last-Event-ID: load the state now, then apply what follows
//	reset  {"id": N, "reason": "..."}: events were lost (the client's
//	       Last-Event-ID is older than the events kept, or from an earlier
//	       run of the daemon): load the state again
//	rule   a rule (as GET /v1/rules/{id}, without delivery) that changed
//	       in the store: added, updated, withdrawn, expired, by any
//	       appliance sharing the store; a scoped token's stream has only
//	       the rules it may see (for the others, an id line alone)
//	rules  {"changed": N}: more rules changed at once than are sent one
//	       by one (N counts the rules, or for a large bulk change the
//	       store's history entries): list them again
//	peer   a peer (as GET /v1/peers) whose session state changed;
//	       state "removed" for a neighbor no longer configured
//	incident  an incident of the playbook engine (as GET /v1/incidents
//	       lists it, without its timeline) that opened, escalated, ended,
//	       or whose rules or state changed; a scoped token's stream has
//	       only the incidents whose target lies inside its prefixes (for
//	       the others, an id line alone)
//	pass   a reconcile pass (as GET /v1/status's last_pass) that changed
//	       the RIB or the store, failed, or found a different number of
//	       rules in the RIB as wanted (a rule's delivery changed)
//
// Ids increase monotonically and survive nothing: they start at the
// daemon's start time in microseconds, so that an id of an earlier run is
// older than every id of this one. A client that reconnects with the
// header Last-Event-ID (or ?last_event_id=) gets every event after it that
// is still kept (the last DefaultEventRing events, at most
// DefaultEventRingBytes of them), or reset when one was lost. A comment
// line is sent every 20 s to keep proxies from closing an idle stream.
//
// What a client can make the daemon hold is bounded: the ring by count
// and by bytes; a rule event larger than DefaultMaxEventBytes is kept and
// sent reduced ({"id", "state", "truncated": true, "note"}: read the rule
// with GET /v1/rules/{id}); a stream that falls behind by more than
// subscriberBuffer events or the ring's bytes is closed (its client
// resumes with Last-Event-ID), and a stream that takes no data for
// streamWriteTimeout is dropped; the number of streams is capped per
// token and in total (limits.go).
//
// A scoped token's stream carries nothing global: rule events of other
// scopes are an id line alone, a rules event has no count ({}), a pass
// event has only started, duration_seconds and result, and a peer event
// has no path counts (sent, held_back are 0).

// Event types of the stream.
const (
	EventHello = "hello"
	EventReset = "reset"
	EventRule  = "rule"
	EventRules = "rules"
	EventPeer  = "peer"
	EventPass  = "pass"
	// EventIncident: incidents.go.
	EventIncident = "incident"
)

// DefaultEventRing is how many recent events a stream keeps for clients
// that reconnect.
const DefaultEventRing = 1024

// DefaultEventRingBytes bounds the bytes of the events kept for clients
// that reconnect ([api] event_ring_bytes): the oldest go first.
const DefaultEventRingBytes = 4 << 20

// DefaultMaxEventBytes is the largest event kept and sent as it is ([api]
// max_event_bytes); a larger rule event is reduced to its id and state.
const DefaultMaxEventBytes = 64 << 10

// eventOverhead is what an event costs besides its bytes (its struct in
// the ring, the slices' headers), so that many tiny events count too.
const eventOverhead = 128

// maxRuleEvents is how many rules changed at once are sent one by one;
// beyond it a single rules event asks clients to list them again.
const maxRuleEvents = 100

// maxEntriesPerRule bounds the history entries (the change and its
// status writes) one rule change usually makes: beyond maxRuleEvents times
// as many new entries, the changed rules are not read at all.
const maxEntriesPerRule = 4

// subscriberBuffer is how many events may wait for a slow client before
// its stream is closed (it reconnects with Last-Event-ID and misses
// nothing that is still kept). The bytes waiting are bounded too, by the
// ring's bytes: every stream's queue is a run of the latest events, so
// all of them together hold at most that many bytes beyond the ring.
const subscriberBuffer = 256

// streamWriteTimeout is how long a stream may take to accept one batch of
// events: a client that stops reading (its TCP window full) is dropped
// instead of holding its events and its handler forever.
const streamWriteTimeout = 30 * time.Second

// streamKeepalive is the interval of the comment lines of an idle stream.
const streamKeepalive = 20 * time.Second

// RuleFeed is what the event stream reads of the store (implemented by
// *store.Store): the revision of desired state and what changed after
// one.
type RuleFeed interface {
	Revision(ctx context.Context) (int64, error)
	ChangedSince(ctx context.Context, rev int64) (store.Delta, error)
	Get(ctx context.Context, id int64) (store.Rule, error)
}

// PeerFeed is what the event stream reads of the BGP speaker (implemented
// by *bgp.Speaker).
type PeerFeed interface {
	Peers(ctx context.Context) ([]bgp.PeerStatus, error)
}

// streamEvent is one event as sent.
type streamEvent struct {
	id   uint64
	typ  string
	data []byte
	// scoped, if set, is what a scoped token's stream gets instead of
	// data: the event without global counts.
	scoped []byte
	// match is the rule's match for a rule event (zero otherwise): a
	// scoped token's stream leaves out rules outside its prefixes.
	match flowspec.Match
	// target is the incident's target for an incident event: a scoped
	// token's stream leaves out incidents outside its prefixes.
	target netip.Prefix
}

// size is what ev costs to keep.
func (ev *streamEvent) size() int {
	return eventOverhead + len(ev.data) + len(ev.scoped) + ev.match.Len()
}

// Events is the event stream: a bounded ring of recent events and the
// streams reading it. Run watches the sources; Nudge (API writes) and the
// reconciler's passes (Recorder) wake it.
type Events struct {
	log      hclog.Logger
	rules    RuleFeed
	peers    PeerFeed
	size     int // events kept, at most
	maxBytes int // bytes of the events kept, at most
	maxEvent int // bytes of one event kept as it is
	limits   StreamLimits
	// writeTimeout bounds how long a stream may take to accept a batch
	// of events (streamWriteTimeout).
	writeTimeout time.Duration
	wake         chan struct{}
	// streams counts the subscribers, for Nudge to read without mu.
	streams atomic.Int64

	mu     sync.Mutex
	ring   []streamEvent // oldest first; ids are consecutive
	held   int           // the size of the events in ring
	last   uint64        // id of the newest event; base when none yet
	base   uint64        // ids of this run are > base
	subs   map[*subscriber]struct{}
	open   streamCount // streams open, per actor and in total (limits.go)
	closed bool
	pass   *reconcile.PassResult // a pass to report, set by PassDone

	// Owned by the goroutine calling poll.
	rev       int64
	revKnown  bool
	lostTrack bool
	peerSeen  map[string]string // address → what was last reported
	peersRead bool
}

type subscriber struct {
	ch   chan streamEvent
	gone chan struct{} // closed when the hub drops the subscriber
	// pending is the size of the events in ch: the hub adds, the stream
	// subtracts what it took.
	pending atomic.Int64
	who     streamOwner // whose stream it is (limits.go)
}

// EventsOption tunes Events.
type EventsOption func(*Events)

// WithEventRing keeps n recent events for reconnecting clients (default
// DefaultEventRing).
func WithEventRing(n int) EventsOption {
	return func(e *Events) {
		if n > 0 {
			e.size = n
		}
	}
}

// WithEventBytes bounds the bytes of the events kept to ring (default
// DefaultEventRingBytes) and keeps an event larger than event (default
// DefaultMaxEventBytes, at most ring) reduced; 0 keeps a default.
func WithEventBytes(ring, event int) EventsOption {
	return func(e *Events) {
		if ring > 0 {
			e.maxBytes = ring
		}
		if event > 0 {
			e.maxEvent = event
		}
	}
}

// NewEvents returns an event stream over rules and peers (either may be
// nil). now gives the time the first id is taken from (nil: time.Now).
func NewEvents(log hclog.Logger, rules RuleFeed, peers PeerFeed, now func() time.Time, opts ...EventsOption) *Events {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if now == nil {
		now = time.Now
	}
	base := uint64(max(now().UnixMicro(), 0))
	e := &Events{
		log: log, rules: rules, peers: peers, size: DefaultEventRing,
		maxBytes: DefaultEventRingBytes, maxEvent: DefaultMaxEventBytes,
		limits:       StreamLimits{PerToken: DefaultStreamsPerToken, Total: DefaultMaxStreams},
		writeTimeout: streamWriteTimeout,
		wake:         make(chan struct{}, 1), base: base, last: base,
		subs: map[*subscriber]struct{}{},
		open: streamCount{byActor: map[string]int{}, moved: make(chan struct{}, 1)},
	}
	for _, o := range opts {
		o(e)
	}
	e.maxEvent = min(e.maxEvent, e.maxBytes)
	return e
}

// HeldBytes is what the events kept for reconnecting clients cost, as
// bounded by WithEventBytes.
func (e *Events) HeldBytes() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.held
}

// Nudge asks Run to look for changes now; it never blocks. With no
// stream open it does nothing: Run would read nothing (step), the next
// stream to open nudges it, and its poll finds every change since the
// last. Every write and every reconcile pass nudges, and a wake-up of
// Run for nothing took a turn on the cores from the next write's early
// announcement.
func (e *Events) Nudge() {
	if e.streams.Load() == 0 {
		return
	}
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Run watches the sources until ctx is done, then ends every stream. It
// reads the current state first (changes before it are not events), and
// then at every Nudge and reconcile pass — while a stream is open. With
// none open it reads nothing (during a bulk load every pass would
// otherwise cost a store read and a ListPeer in GoBGP's loop): the next
// stream to open nudges it, and that poll reports everything that
// changed since the last one, so a client resuming with Last-Event-ID
// still misses nothing.
func (e *Events) Run(ctx context.Context) error {
	defer e.close()
	e.poll(ctx)
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-e.wake:
		case <-retry.C:
		}
		if !e.step(ctx) {
			retry.Reset(time.Second)
		}
	}
}

// step is one wake-up of Run: a poll while a stream is open, nothing
// otherwise. false means a source could not be read (retry).
func (e *Events) step(ctx context.Context) bool {
	if !e.watched() {
		return true
	}
	return e.poll(ctx)
}

// watched reports whether a stream is open.
func (e *Events) watched() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.subs) > 0
}

// poll emits the events of what changed since the last poll; false when
// a source could not be read (to be retried).
func (e *Events) poll(ctx context.Context) bool {
	ok := e.pollRules(ctx)
	ok = e.pollPeers(ctx) && ok
	e.mu.Lock()
	p := e.pass
	e.pass = nil
	e.mu.Unlock()
	if p != nil {
		pass := passFromReconcile(*p)
		e.emit(EventPass, pass, scopedPass(pass))
	}
	return ok
}

func (e *Events) pollRules(ctx context.Context) bool {
	if e.rules == nil {
		return true
	}
	if !e.revKnown {
		rev, err := e.rules.Revision(ctx)
		if err != nil {
			// Streams opened meanwhile loaded a state this one cannot
			// follow from: they get reset once the store answers.
			e.lostTrack = true
			e.readFailed("revision", err)
			return false
		}
		e.rev, e.revKnown = rev, true
		if e.lostTrack {
			e.lostTrack = false
			// Its data names its own id, as the reset of subscribe does.
			e.emit(EventReset, resetData{ID: e.lastID() + 1, Reason: "the store could not be read for a while"}, nil)
		}
		return true
	}
	rev, err := e.rules.Revision(ctx)
	if err != nil {
		e.readFailed("revision", err)
		return false
	}
	if rev <= e.rev {
		return true
	}
	if rev-e.rev > maxRuleEvents*maxEntriesPerRule {
		// A bulk change: do not read it all only to say "list again".
		e.emit(EventRules, rulesData{Changed: int(rev - e.rev)}, struct{}{})
		e.rev = rev
		return true
	}
	d, err := e.rules.ChangedSince(ctx, e.rev)
	if err != nil {
		e.readFailed("changes", err)
		return false
	}
	if d.Next <= e.rev {
		return true
	}
	ids := make([]int64, 0, len(d.Active)+len(d.Gone))
	for _, r := range d.Active {
		ids = append(ids, r.ID)
	}
	ids = append(ids, d.Gone...)
	if len(ids) > maxRuleEvents {
		e.emit(EventRules, rulesData{Changed: len(ids)}, struct{}{})
		e.rev = d.Next
		return true
	}
	slices.Sort(ids)
	for _, id := range ids {
		r, err := e.rules.Get(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue // purged meanwhile
		}
		if err != nil {
			// Keep e.rev: the next poll sends these again, which is
			// harmless (a rule event carries the whole rule).
			e.readFailed("rule", err)
			return false
		}
		e.emitRule(r)
	}
	e.rev = d.Next
	return true
}

func (e *Events) readFailed(what string, err error) {
	e.log.Debug("event stream: reading the store failed; retrying", "what", what, "error", err)
}

func (e *Events) pollPeers(ctx context.Context) bool {
	if e.peers == nil {
		return true
	}
	peers, err := e.peers.Peers(ctx)
	if err != nil {
		// The speaker is starting or restarting: its peers come back
		// with it, and their changes are events then.
		e.log.Trace("event stream: peers unavailable", "error", err)
		return true
	}
	first := !e.peersRead
	e.peersRead = true
	if e.peerSeen == nil {
		e.peerSeen = map[string]string{}
	}
	present := make(map[string]bool, len(peers))
	for _, p := range peers {
		present[p.Address] = true
		key := p.State + "\x00" + p.LastError + "\x00" + strconv.Itoa(p.Flaps)
		if old, ok := e.peerSeen[p.Address]; ok && old == key {
			continue
		}
		e.peerSeen[p.Address] = key
		if !first {
			peer := peerFromBGP(p)
			e.emit(EventPeer, peer, scopedPeer(peer))
		}
	}
	for addr := range e.peerSeen {
		if !present[addr] {
			delete(e.peerSeen, addr)
			e.emit(EventPeer, Peer{Address: addr, State: PeerRemoved, Families: []string{}}, nil)
		}
	}
	return true
}

// PeerRemoved is the state of a peer event for a neighbor no longer
// configured.
const PeerRemoved = "removed"

type resetData struct {
	ID     uint64 `json:"id"`
	Reason string `json:"reason,omitempty"`
}

type rulesData struct {
	Changed int `json:"changed"`
}

// emit appends an event to the ring and sends it to every stream; a
// stream too slow to take it is closed (its client reconnects). scoped,
// if not nil, is what a scoped token's stream gets instead of v.
func (e *Events) emit(typ string, v, scoped any) {
	ev := streamEvent{typ: typ, data: mustJSON(v)}
	if scoped != nil {
		ev.scoped = mustJSON(scoped)
	}
	e.push(ev)
}

// emitRule emits the rule event of r: the rule as GET /v1/rules/{id}
// shows it, or, when that is larger than the largest event kept, its id
// and state and where to read it.
func (e *Events) emitRule(r store.Rule) {
	data := mustJSON(ruleFromStore(r))
	if len(data) > e.maxEvent {
		out := ruleFromStore(r)
		data = mustJSON(truncatedRule{ID: r.ID, State: out.State, Truncated: true, Note: fmt.Sprintf(
			"the rule is larger than an event may be (%d bytes, [api] max_event_bytes = %d): read it with GET /v1/rules/%d",
			len(data), e.maxEvent, r.ID)})
	}
	e.push(streamEvent{typ: EventRule, data: data, match: r.Rule.Match})
}

// truncatedRule is the data of a rule event too large to send whole.
type truncatedRule struct {
	ID        int64  `json:"id"`
	State     string `json:"state"`
	Truncated bool   `json:"truncated"`
	Note      string `json:"note"`
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic("api: encoding an event: " + err.Error()) // our own types only
	}
	return data
}

// push numbers ev, keeps it in the ring (dropping the oldest events
// beyond its count and bytes) and queues it for every stream.
func (e *Events) push(ev streamEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.last++
	ev.id = e.last
	sz := ev.size()
	for len(e.ring) > 0 && (len(e.ring) >= e.size || e.held+sz > e.maxBytes) {
		e.held -= e.ring[0].size()
		e.ring[0] = streamEvent{} // let its bytes go
		e.ring = e.ring[1:]
	}
	e.ring = append(e.ring, ev)
	e.held += sz
	for s := range e.subs {
		if len(s.ch) < cap(s.ch) && s.pending.Load()+int64(sz) <= int64(e.maxBytes) {
			s.pending.Add(int64(sz))
			s.ch <- ev
			continue
		}
		e.drop(s)
	}
}

func (e *Events) lastID() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

// close ends every stream; later subscribers are refused.
func (e *Events) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for s := range e.subs {
		e.drop(s)
	}
}

// drop stops sending to s (too slow, or the daemon is stopping); its
// stream ends and still counts until its handler has returned.
func (e *Events) drop(s *subscriber) {
	delete(e.subs, s)
	e.streams.Add(-1)
	close(s.gone)
}

// subscribe registers a stream of who, refused (429) when who has as
// many open as the limits allow, or (503) when the daemon is stopping.
// Without a last id (have false) the stream starts with hello; with one,
// with the kept events after it, or reset when some after it are no
// longer kept.
func (e *Events) subscribe(who streamOwner, lastID uint64, have bool) (first []streamEvent, s *subscriber, refused *Error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, nil, newError(http.StatusServiceUnavailable, CodeUnavailable, "", "the daemon is stopping; reconnect to it once it is back")
	}
	if err := e.open.add(who, e.limits); err != nil {
		return nil, nil, err
	}
	s = &subscriber{ch: make(chan streamEvent, subscriberBuffer), gone: make(chan struct{}), who: who}
	e.subs[s] = struct{}{}
	e.streams.Add(1)
	// What changed while no stream was open has not been read yet.
	e.Nudge()
	switch {
	case !have:
		return []streamEvent{e.control(EventHello, resetData{ID: e.last})}, s, nil
	case lastID == e.last:
		return nil, s, nil
	case lastID > e.last || lastID < e.base:
		return []streamEvent{e.control(EventReset, resetData{ID: e.last, Reason: "the event id is not from this run of the daemon"})}, s, nil
	}
	oldest := e.last + 1 - uint64(len(e.ring))
	if lastID+1 < oldest {
		return []streamEvent{e.control(EventReset, resetData{ID: e.last, Reason: "events after this id are no longer kept"})}, s, nil
	}
	for _, ev := range e.ring {
		if ev.id > lastID {
			first = append(first, ev)
		}
	}
	return first, s, nil
}

// control is an event that is not kept in the ring; it carries the id of
// the newest event, so that a client resumes from there.
func (e *Events) control(typ string, v any) streamEvent {
	data, _ := json.Marshal(v)
	return streamEvent{id: e.last, typ: typ, data: data}
}

// unsubscribe ends s and frees its place under the stream limits.
func (e *Events) unsubscribe(s *subscriber) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.subs[s]; ok {
		e.drop(s)
	}
	e.open.remove(s.who)
}

// Recorder returns a reconcile.Recorder that tells next everything (nil:
// nothing) and wakes the stream after every pass: the pass may have
// finished rules (withdrawn, expired), and it ran because something
// changed (the store, the RIB, a peer's session).
func (e *Events) Recorder(next reconcile.Recorder) reconcile.Recorder {
	return &eventsRecorder{next: next, e: e, adopted: -1}
}

type eventsRecorder struct {
	next    reconcile.Recorder
	e       *Events
	adopted int // Adopted of the previous pass (PassDone is called from one goroutine)
}

// PassDone reports a pass that changed the RIB or the store, failed, or
// saw a different number of rules in the RIB as wanted: a rule announced
// ahead of its commit is adopted by a pass that changes nothing, and
// that is when the routers have it.
func (r *eventsRecorder) PassDone(p reconcile.PassResult) {
	if r.next != nil {
		r.next.PassDone(p)
	}
	adopted := p.Adopted != r.adopted
	r.adopted = p.Adopted
	if !p.Skipped && (p.Changed() || p.Errors > 0 || p.Err != "" || adopted) {
		r.e.mu.Lock()
		r.e.pass = &p
		r.e.mu.Unlock()
	}
	r.e.Nudge()
}

func (r *eventsRecorder) Announced(f flowspec.Family, op string) {
	if r.next != nil {
		r.next.Announced(f, op)
	}
}

func (r *eventsRecorder) Withdrawn(f flowspec.Family, op string) {
	if r.next != nil {
		r.next.Withdrawn(f, op)
	}
}

func (r *eventsRecorder) ExpiryLateness(d time.Duration) {
	if r.next != nil {
		r.next.ExpiryLateness(d)
	}
}

// getEvents handles GET /v1/events: the event stream.
func (s *Server) getEvents(w http.ResponseWriter, r *http.Request) {
	e := s.opts.events
	raw := r.Header.Get("Last-Event-ID")
	if raw == "" {
		raw = r.URL.Query().Get("last_event_id")
	}
	var (
		lastID uint64
		have   bool
	)
	if raw = strings.TrimSpace(raw); raw != "" {
		id, err := strconv.ParseUint(raw, 10, 64)
		if err != nil {
			writeError(w, newError(http.StatusBadRequest, CodeInvalidID, "Last-Event-ID",
				"Last-Event-ID %q is not an event id (a number from an id: line); leave it out to start afresh", raw))
			return
		}
		lastID, have = id, true
	}
	first, sub, refused := e.subscribe(ownerOf(r), lastID, have)
	if refused != nil {
		// The connection is what the limit protects: do not keep it.
		w.Header().Set("Connection", "close")
		if refused.Status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "10")
			s.log.Warn("event stream refused", "actor", actor(r), "reason", refused.Message)
		}
		writeError(w, refused)
		return
	}
	defer e.unsubscribe(sub)
	scope := scopeOf(r.Context())

	rc := http.NewResponseController(w)
	// The server's write timeout would end the stream: each batch of
	// events gets its own deadline instead.
	deadline := func() { _ = rc.SetWriteDeadline(time.Now().Add(e.writeTimeout)) }
	deadline()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	// Tell EventSource clients how long to wait before reconnecting.
	if _, err := fmt.Fprint(w, "retry: 2000\n\n"); err != nil {
		return
	}
	for _, ev := range first {
		if writeEvent(w, scope, ev) != nil {
			return
		}
	}
	if rc.Flush() != nil {
		return
	}
	// take writes one queued event and frees its place in the queue.
	take := func(ev streamEvent) error {
		sub.pending.Add(-int64(ev.size()))
		return writeEvent(w, scope, ev)
	}
	keep := time.NewTicker(streamKeepalive)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev := <-sub.ch:
			deadline()
			if take(ev) != nil {
				return
			}
			// Send what else is queued before flushing.
			for more := true; more; {
				select {
				case ev := <-sub.ch:
					if take(ev) != nil {
						return
					}
				default:
					more = false
				}
			}
		case <-sub.gone:
			// Too slow, or the daemon is stopping: the client reconnects
			// from the last id it got, and what is still kept is sent
			// again then.
			return
		case <-keep.C:
			deadline()
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return
			}
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// writeEvent sends ev as id (the caller's scope; nil: everything) may see
// it: a rule event of a rule outside its prefixes is an id line alone, so
// that the client's Last-Event-ID still moves on; other events go in
// their scoped form (without global counts).
func writeEvent(w http.ResponseWriter, id *identity, ev streamEvent) error {
	data := ev.data
	if id.scoped() {
		if ev.typ == EventRule && !id.sees(ev.match) || ev.typ == EventIncident && len(id.prefixes) > 0 && !id.covers(ev.target) {
			_, err := fmt.Fprintf(w, "id: %d\n\n", ev.id)
			return err
		}
		if ev.scoped != nil {
			data = ev.scoped
		}
	}
	_, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.id, ev.typ, data)
	return err
}
