package ingest

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/signals"
)

// Error codes of the ways in, in the API's error shape.
const (
	CodeUnknownSource = "unknown_source"    // 404: no HTTP [[source]] of that name
	CodeUnauthorized  = "unauthorized"      // 401: bad or missing signature, stale timestamp, bad bearer secret
	CodeReplay        = "replay"            // 409: a signature already seen within the window
	CodeReplayFull    = "replay_cache_full" // 429: the source's replay cache is full; retry after Retry-After
	CodeInvalidBody   = "invalid_body"      // 400: the body is not what the source's kind sends
	CodeInvalidSignal = "invalid_signal"    // 400: a signal is not valid; field names which
	CodeTooMany       = "too_many_signals"  // 413: more signals in one request than max_signals_per_request
	CodeBodyTooLarge  = "body_too_large"    // 413: the API's body limit
	CodeRefused       = "signal_refused"    // 422: the Sink refused a signal; results say which and why
	CodeUnavailable   = "unavailable"       // 503: the request was cancelled before its signals were taken
)

// Ingest serves POST /v1/signals/{source} (see the package comment).
type Ingest struct {
	log    hclog.Logger
	sink   signals.Sink
	recent *signals.Recent
	clock  clock.Clock
	mu     sync.Mutex // serialises SetSources
	set    atomic.Pointer[sourceSet]
}

// source is one [[source]] of an HTTP kind, ready to check requests.
type source struct {
	cfg    config.Source
	digest [sha256.Size]byte // of the secret, for bearer kinds
	replay *replayCache      // webhook only
	firing *firingSet        // alertmanager only
	// The unauthenticated refusals recorded in the current second.
	mu         sync.Mutex
	refusedSec int64
	refusedN   int
}

type sourceSet struct {
	byName map[string]*source
	// other names sources of other kinds (gobgp), for a precise 404.
	other map[string]string
}

// New returns the ways in for sources (those of kind gobgp are not
// served here), handing accepted signals to sink and recording every
// signal in recent. A nil clock is the real one.
func New(log hclog.Logger, sources []config.Source, sink signals.Sink, recent *signals.Recent, clk clock.Clock) (*Ingest, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if clk == nil {
		clk = clock.Real{}
	}
	if sink == nil || recent == nil {
		return nil, errors.New("ingest: a sink and a ring of recent signals are needed")
	}
	in := &Ingest{log: log, sink: sink, recent: recent, clock: clk}
	if err := in.SetSources(sources); err != nil {
		return nil, err
	}
	return in, nil
}

// SetSources replaces the sources (a reload). A webhook source that keeps
// its name, secret, window and cache size keeps its replay cache, so a
// request accepted before the reload is still a replay after it; an
// alertmanager source keeps the alerts it saw firing.
func (in *Ingest) SetSources(sources []config.Source) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	prev := in.set.Load()
	next := &sourceSet{byName: map[string]*source{}, other: map[string]string{}}
	for _, c := range sources {
		switch c.Kind {
		case config.SourceWebhook, config.SourceAlertmanager, config.SourceFastNetMon:
		default:
			next.other[c.Name] = c.Kind
			continue
		}
		if c.Secret == "" {
			return fmt.Errorf("ingest: source %q has no secret", c.Name)
		}
		if _, dup := next.byName[c.Name]; dup {
			return fmt.Errorf("ingest: source %q is named twice", c.Name)
		}
		s := &source{cfg: c, digest: sha256.Sum256([]byte(c.Secret))}
		var old *source
		if prev != nil {
			old = prev.byName[c.Name]
		}
		switch c.Kind {
		case config.SourceWebhook:
			if old != nil && old.replay != nil && old.cfg.Secret == c.Secret &&
				old.cfg.TimestampWindow == c.TimestampWindow && old.cfg.ReplayCache == c.ReplayCache {
				s.replay = old.replay
			} else {
				s.replay = newReplayCache(max(c.ReplayCache, 1))
			}
		case config.SourceAlertmanager:
			if old != nil && old.firing != nil {
				s.firing = old.firing
			} else {
				s.firing = newFiringSet(maxFiring)
			}
		}
		next.byName[c.Name] = s
	}
	in.set.Store(next)
	return nil
}

// ServeHTTP handles POST /v1/signals/{source}. The API has bounded the
// body already; a body read past its limit is refused with 413.
func (in *Ingest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("source")
	set := in.set.Load()
	src, ok := set.byName[name]
	if !ok {
		if kind, other := set.other[name]; other {
			writeError(w, newError(http.StatusNotFound, CodeUnknownSource, "",
				"source %q is of kind %s: it sends over its own listener, not to /v1/signals", clip(name), kind))
			return
		}
		writeError(w, newError(http.StatusNotFound, CodeUnknownSource, "",
			"no [[source]] named %q of kind webhook, alertmanager or fastnetmon: send to /v1/signals/NAME with the name of a [[source]] of the daemon's configuration", clip(name)))
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			in.refuseUnauthenticated(w, src, newError(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "",
				"request body is larger than %d bytes (the API's body limit): send fewer signals per request", tooLarge.Limit))
			return
		}
		in.refuseUnauthenticated(w, src, newError(http.StatusBadRequest, CodeInvalidBody, "", "reading the body: %v", err))
		return
	}
	var sigs []signals.Signal
	var e *Error
	switch src.cfg.Kind {
	case config.SourceWebhook:
		if e = in.verifySignature(r, src, body); e == nil {
			sigs, e = in.readWebhook(src, body)
		}
	case config.SourceAlertmanager:
		if e = bearer(r, src); e == nil {
			in.alertmanager(w, r, src, body)
			return
		}
	case config.SourceFastNetMon:
		if e = bearer(r, src); e == nil {
			var s signals.Signal
			if s, e = in.readFastNetMon(src, body); e == nil {
				sigs = []signals.Signal{s}
			}
		}
	}
	if e != nil {
		if e.Code == CodeUnauthorized {
			in.refuseUnauthenticated(w, src, e)
		} else {
			in.refuse(w, src, e)
		}
		return
	}
	in.deliver(w, r.Context(), src, sigs, nil)
}

// refuse answers e to an authenticated request and records it for the
// source.
func (in *Ingest) refuse(w http.ResponseWriter, src *source, e *Error) {
	in.log.Warn("signal request refused", "source", src.cfg.Name, "code", e.Code, "reason", e.Message)
	in.recent.Add(signals.Record{Via: src.cfg.Kind, Signal: signals.Signal{Source: src.cfg.Name, At: in.clock.Now()},
		Reason: e.Message})
	writeError(w, e)
}

// maxUnauthenticatedPerSecond bounds the records (and log lines) of
// requests refused before they were authenticated, per source and
// second: anyone who reaches the listener can send those, and they must
// not push the source's real signals out of the ring.
const maxUnauthenticatedPerSecond = 10

// refuseUnauthenticated answers e to a request not (yet) authenticated,
// and records and logs it within maxUnauthenticatedPerSecond.
func (in *Ingest) refuseUnauthenticated(w http.ResponseWriter, src *source, e *Error) {
	now := in.clock.Now()
	src.mu.Lock()
	if sec := now.Unix(); sec != src.refusedSec {
		src.refusedSec, src.refusedN = sec, 0
	}
	src.refusedN++
	keep := src.refusedN <= maxUnauthenticatedPerSecond
	src.mu.Unlock()
	if !keep {
		writeError(w, e)
		return
	}
	in.refuse(w, src, e)
}

// Result is what became of one signal (or alert) of a request.
type Result struct {
	Target   string `json:"target,omitempty"`
	State    string `json:"state,omitempty"`
	Accepted bool   `json:"accepted"`
	Error    string `json:"error,omitempty"`
}

// Answer is the body of an answer to a request whose signals were read:
// 200 when every one was accepted, else 422 with Error set.
type Answer struct {
	Accepted int      `json:"accepted"`
	Refused  int      `json:"refused"`
	Results  []Result `json:"results"`
	Error    *Error   `json:"error,omitempty"`
}

// deliver hands sigs to the Sink, recording each, and answers. early
// holds results of items refused before (alerts that could not be read),
// already recorded.
func (in *Ingest) deliver(w http.ResponseWriter, ctx context.Context, src *source, sigs []signals.Signal, early []Result) {
	sink := in.recent.Recording(in.sink, src.cfg.Kind, in.clock.Now)
	out := Answer{Results: make([]Result, 0, len(sigs)+len(early))}
	out.Results = append(out.Results, early...)
	out.Refused = len(early)
	var first string
	if len(early) > 0 {
		first = early[0].Error
	}
	for _, s := range sigs {
		res := Result{Target: s.Target.String(), State: string(s.State), Accepted: true}
		if err := sink.Accept(ctx, s); err != nil {
			if ctx.Err() != nil {
				writeError(w, newError(http.StatusServiceUnavailable, CodeUnavailable, "",
					"the request ended before its signals were taken; send it again"))
				return
			}
			res.Accepted, res.Error = false, err.Error()
			out.Refused++
			if first == "" {
				first = res.Target + ": " + res.Error
			}
			in.log.Warn("signal refused", "source", src.cfg.Name, "target", res.Target, "state", res.State, "reason", res.Error)
		} else {
			out.Accepted++
		}
		out.Results = append(out.Results, res)
	}
	if out.Refused == 0 {
		writeJSON(w, http.StatusOK, out)
		return
	}
	out.Error = newError(http.StatusUnprocessableEntity, CodeRefused, "",
		"%d of %d signals refused; the first: %s (results say which and why)", out.Refused, len(out.Results), clip(first))
	writeJSON(w, http.StatusUnprocessableEntity, out)
}

// bearer checks the source's secret as "Authorization: Bearer SECRET".
func bearer(r *http.Request, src *source) *Error {
	scheme, secret, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
		return newError(http.StatusUnauthorized, CodeUnauthorized, "Authorization",
			"missing bearer token: source %q (kind %s) sends its secret as \"Authorization: Bearer SECRET\"", src.cfg.Name, src.cfg.Kind)
	}
	d := sha256.Sum256([]byte(strings.TrimSpace(secret)))
	if subtle.ConstantTimeCompare(d[:], src.digest[:]) != 1 {
		return newError(http.StatusUnauthorized, CodeUnauthorized, "Authorization",
			"wrong bearer token for source %q: send the secret of its [[source]] (a rotated one works from the reload on)", src.cfg.Name)
	}
	return nil
}

// Error is an error answer, in the API's shape ({"error": {...}}).
type Error struct {
	Status     int    `json:"-"`
	Code       string `json:"code"`
	Message    string `json:"message"`
	Field      string `json:"field,omitempty"`
	RetryAfter int    `json:"-"` // seconds, for 429
}

func (e *Error) Error() string { return e.Message }

func newError(status int, code, field, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

func writeError(w http.ResponseWriter, e *Error) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(e.RetryAfter))
	}
	writeJSON(w, e.Status, struct {
		Error *Error `json:"error"`
	}{e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic("ingest: encoding an answer: " + err.Error()) // only our own types
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// clip bounds what a sender sent before it is logged or echoed.
func clip(s string) string {
	const max = 200
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
