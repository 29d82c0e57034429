package api

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ribkeeper/ribkeeper/signals"
)

// Detectors' signals. The ways in (package ingest) are served at
// POST /v1/signals/{source} and authenticated by the source's own secret
// (an HMAC signature or a bearer secret), not by an API token: on the TCP
// listener they pass the Host and write checks and the body and
// connection bounds like every request, and skip token authentication.
// What they received is shown at GET /v1/signals, read like the rules: a
// scoped token sees only signals whose target lies inside its prefixes.

// SignalLog is the ring of recent signals (implemented by
// *signals.Recent).
type SignalLog interface {
	// List returns up to max records for which keep is true, newest
	// first.
	List(keep func(signals.Record) bool, max int) []signals.Record
}

// WithSignals serves in, the ways in for detectors, at
// POST /v1/signals/{source}, and the records of log at GET /v1/signals;
// either may be nil.
func WithSignals(in http.Handler, log SignalLog) Option {
	return func(o *options) { o.signalsIn, o.signalLog = in, log }
}

// signalRoutes registers the routes of detectors' signals.
func (s *Server) signalRoutes(mux *http.ServeMux) {
	if s.opts.signalsIn != nil {
		mux.Handle("POST /v1/signals/{source}", s.opts.signalsIn)
	}
	if s.opts.signalLog != nil {
		mux.Handle("GET /v1/signals", s.handle(s.listSignals))
	}
}

// isSignalIn reports whether r is for a way in: those authenticate
// themselves.
func isSignalIn(r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/signals/")
	return ok && r.Method == http.MethodPost && rest != "" && !strings.Contains(rest, "/")
}

// withSignalsIn serves the ways in without token authentication (each
// checks its source's secret), and everything else through auth.
func (s *Server) withSignalsIn(auth http.Handler) http.Handler {
	if s.opts.signalsIn == nil {
		return auth
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isSignalIn(r) {
			s.inner.ServeHTTP(w, r)
			return
		}
		auth.ServeHTTP(w, r)
	})
}

// Signal is one record of GET /v1/signals: a signal a detector sent, and
// whether it was accepted. A request refused before its signals could be
// read (a bad signature) has no target.
type Signal struct {
	Seq        uint64    `json:"seq"`
	At         time.Time `json:"at"`
	Source     string    `json:"source"`
	Via        string    `json:"via"`
	Target     string    `json:"target,omitempty"`
	State      string    `json:"state,omitempty"`
	Protocol   string    `json:"protocol,omitempty"`
	SrcPorts   []uint16  `json:"src_ports,omitempty"`
	DstPorts   []uint16  `json:"dst_ports,omitempty"`
	TCPFlags   string    `json:"tcp_flags,omitempty"`
	PPS        uint64    `json:"pps,omitempty"`
	BPS        uint64    `json:"bps,omitempty"`
	Confidence float64   `json:"confidence,omitempty"`
	AttackID   string    `json:"attack_id,omitempty"`
	Detail     string    `json:"detail,omitempty"`
	Accepted   bool      `json:"accepted"`
	Reason     string    `json:"reason,omitempty"`
}

// SignalList is the answer of GET /v1/signals, newest first.
type SignalList struct {
	Signals []Signal `json:"signals"`
}

// DefaultSignalLimit is how many records GET /v1/signals returns without
// ?limit=.
const DefaultSignalLimit = 100

func signalFromRecord(r signals.Record) Signal {
	s := r.Signal
	out := Signal{Seq: r.Seq, At: s.At, Source: s.Source, Via: r.Via, State: string(s.State),
		Protocol: s.Vector.Protocol, SrcPorts: s.Vector.SrcPorts, DstPorts: s.Vector.DstPorts, TCPFlags: s.Vector.TCPFlags,
		PPS: s.PPS, BPS: s.BPS, Confidence: s.Confidence, AttackID: s.AttackID, Detail: s.Detail,
		Accepted: r.Accepted, Reason: r.Reason}
	if s.Target.IsValid() {
		out.Target = s.Target.String()
	}
	return out
}

// listSignals handles GET /v1/signals[?source=NAME][&limit=N].
func (s *Server) listSignals(w http.ResponseWriter, r *http.Request) (int, any, error) {
	q := r.URL.Query()
	limit := DefaultSignalLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, nil, newError(http.StatusBadRequest, CodeInvalidInput, "limit", "limit %q is not a positive number", clip(v))
		}
		limit = n
	}
	source := q.Get("source")
	id := scopeOf(r.Context())
	keep := func(rec signals.Record) bool {
		if source != "" && rec.Signal.Source != source {
			return false
		}
		// A scoped token sees only signals about its own prefixes.
		return !id.scoped() || rec.Signal.Target.IsValid() && id.covers(rec.Signal.Target)
	}
	out := SignalList{Signals: []Signal{}}
	for _, rec := range s.opts.signalLog.List(keep, limit) {
		out.Signals = append(out.Signals, signalFromRecord(rec))
	}
	return http.StatusOK, out, nil
}
