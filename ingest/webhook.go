package ingest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/ribkeeper/ribkeeper/signals"
)

// The headers of a signed webhook request.
const (
	HeaderTimestamp = "X-Ribkeeper-Timestamp"
	HeaderSignature = "X-Ribkeeper-Signature"
)

// Sign returns the X-Ribkeeper-Signature value of body sent at ts under
// secret: "sha256=" and the hex HMAC-SHA256 of ts (decimal Unix seconds),
// ".", and body.
func Sign(secret []byte, ts int64, body []byte) string {
	return "sha256=" + hex.EncodeToString(mac(secret, ts, body))
}

// mac is the HMAC-SHA256 of "TS.BODY" under secret.
func mac(secret []byte, ts int64, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(strconv.AppendInt(nil, ts, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// verifySignature checks a webhook request's signature, then its
// timestamp against the window, then that it is not a replay; the
// signature is remembered from then on.
func (in *Ingest) verifySignature(r *http.Request, src *source, body []byte) *Error {
	const how = "sign each request: " + HeaderTimestamp + ": Unix seconds; " + HeaderSignature +
		": sha256= and the hex HMAC-SHA256, under the source's secret, of the timestamp, \".\" and the body (docs/api.md)"
	tsText, sigText := r.Header.Get(HeaderTimestamp), r.Header.Get(HeaderSignature)
	if tsText == "" || sigText == "" {
		return newError(http.StatusUnauthorized, CodeUnauthorized, "", "missing %s or %s header: %s", HeaderTimestamp, HeaderSignature, how)
	}
	ts, err := strconv.ParseInt(strings.TrimSpace(tsText), 10, 64)
	if err != nil {
		return newError(http.StatusUnauthorized, CodeUnauthorized, HeaderTimestamp, "%s %q is not Unix seconds: %s", HeaderTimestamp, clip(tsText), how)
	}
	hexSig, ok := strings.CutPrefix(strings.TrimSpace(sigText), "sha256=")
	got, err := hex.DecodeString(hexSig)
	if !ok || err != nil || len(got) != sha256.Size {
		return newError(http.StatusUnauthorized, CodeUnauthorized, HeaderSignature, "%s is not \"sha256=\" and 64 hex digits: %s", HeaderSignature, how)
	}
	if !hmac.Equal(got, mac([]byte(src.cfg.Secret), ts, body)) {
		return newError(http.StatusUnauthorized, CodeUnauthorized, HeaderSignature,
			"wrong signature for source %q: sign with the secret of its [[source]] the exact bytes sent, as \"TIMESTAMP.BODY\" with the timestamp of %s", src.cfg.Name, HeaderTimestamp)
	}
	now := in.clock.Now()
	window := src.cfg.TimestampWindow
	at := time.Unix(ts, 0)
	if d := now.Sub(at); d > window || d < -window {
		return newError(http.StatusUnauthorized, CodeUnauthorized, HeaderTimestamp,
			"stale timestamp: %s is %s from the daemon's clock, beyond the source's window of ±%s: sign with the current time (check the sender's clock, NTP), or widen timestamp_window of [[source]] %q",
			HeaderTimestamp, d.Round(time.Second), window, src.cfg.Name)
	}
	var key [sha256.Size]byte
	copy(key[:], got)
	switch retry, res := src.replay.add(key, at.Add(window), now); res {
	case replaySeen:
		return newError(http.StatusConflict, CodeReplay, HeaderSignature,
			"replay: a request with this signature was already received within the window; a new request needs a new timestamp (or a different body)")
	case replayFull:
		e := newError(http.StatusTooManyRequests, CodeReplayFull, "",
			"source %q sent more than %d requests within the window of ±%s, the size of its replay cache: retry after %s, batch signals in fewer requests, or raise replay_cache of its [[source]]",
			src.cfg.Name, src.cfg.ReplayCache, window, retry.Round(time.Second))
		e.RetryAfter = int(math.Ceil(retry.Seconds()))
		return e
	}
	return nil
}

// WireSignal is one signal of a webhook request's body; only target and
// state are required.
type WireSignal struct {
	// Target is an address ("192.0.2.10") or a prefix ("192.0.2.0/24").
	Target     string   `json:"target"`
	State      string   `json:"state"`
	Protocol   string   `json:"protocol,omitempty"`
	SrcPorts   []uint16 `json:"src_ports,omitempty"`
	DstPorts   []uint16 `json:"dst_ports,omitempty"`
	TCPFlags   string   `json:"tcp_flags,omitempty"`
	PPS        uint64   `json:"pps,omitempty"`
	BPS        uint64   `json:"bps,omitempty"`
	Confidence float64  `json:"confidence,omitempty"`
	AttackID   string   `json:"attack_id,omitempty"`
	Detail     string   `json:"detail,omitempty"`
}

// readWebhook reads {"signals": [...]}, decoding at most the source's
// max_signals_per_request signals, and checks every one.
func (in *Ingest) readWebhook(src *source, body []byte) ([]signals.Signal, *Error) {
	limit := max(src.cfg.MaxSignalsPerRequest, 1)
	wire, e := decodeSignals(body, limit)
	if e != nil {
		if e.Code == CodeTooMany {
			e.Message += fmt.Sprintf(": send them in several requests, or raise max_signals_per_request of [[source]] %q", src.cfg.Name)
		}
		return nil, e
	}
	now := in.clock.Now()
	out := make([]signals.Signal, 0, len(wire))
	for i, ws := range wire {
		s, err := ws.signal(src.cfg.Name, now)
		if err != nil {
			return nil, newError(http.StatusBadRequest, CodeInvalidSignal, fmt.Sprintf("signals[%d]", i),
				"signal %d: %v; nothing of this request was taken", i+1, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// decodeSignals reads the body's signals one at a time, so that a body
// with more than limit of them is refused before they are all decoded.
func decodeSignals(body []byte, limit int) ([]WireSignal, *Error) {
	bad := func(format string, a ...any) *Error {
		return newError(http.StatusBadRequest, CodeInvalidBody, "", "request body: "+format+`; send {"signals": [{"target": "192.0.2.10", "state": "start"}, ...]}`, a...)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, bad("not a JSON object")
	}
	var out []WireSignal
	seen := false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, bad("not valid JSON: %v", err)
		}
		if t != "signals" || seen {
			return nil, newError(http.StatusBadRequest, CodeInvalidBody, fmt.Sprint(t), "unknown or repeated field %q: the body has one field, \"signals\"", clip(fmt.Sprint(t)))
		}
		seen = true
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return nil, bad("\"signals\" is not a list")
		}
		for dec.More() {
			if len(out) == limit {
				return nil, newError(http.StatusRequestEntityTooLarge, CodeTooMany, "signals", "more than %d signals in one request", limit)
			}
			var ws WireSignal
			if err := dec.Decode(&ws); err != nil {
				return nil, newError(http.StatusBadRequest, CodeInvalidSignal, fmt.Sprintf("signals[%d]", len(out)), "signal %d: %s", len(out)+1, jsonProblem(err))
			}
			out = append(out, ws)
		}
		if _, err := dec.Token(); err != nil {
			return nil, bad("not valid JSON: %v", err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, bad("not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad("data after the JSON object")
	}
	if len(out) == 0 {
		return nil, bad("no signals")
	}
	return out, nil
}

// jsonProblem words a decoding error of one object.
func jsonProblem(err error) string {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) && typ.Field != "" {
		return fmt.Sprintf("field %q must be %s, not %s", typ.Field, typ.Type.Kind(), typ.Value)
	}
	return clip(strings.TrimPrefix(err.Error(), "json: "))
}

// signal turns ws into a checked Signal of source.
func (ws WireSignal) signal(source string, now time.Time) (signals.Signal, error) {
	t, err := parseTarget(ws.Target)
	if err != nil {
		return signals.Signal{}, err
	}
	s := signals.Signal{Source: source, Target: t, State: signals.State(strings.ToLower(ws.State)),
		Vector: signals.Vector{Protocol: ws.Protocol, SrcPorts: ws.SrcPorts, DstPorts: ws.DstPorts, TCPFlags: ws.TCPFlags},
		PPS:    ws.PPS, BPS: ws.BPS, Confidence: ws.Confidence, AttackID: ws.AttackID, Detail: ws.Detail, At: now}
	return s, s.Check()
}

// parseTarget reads an address (as a host prefix) or a prefix.
func parseTarget(text string) (netip.Prefix, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return netip.Prefix{}, fmt.Errorf("%w: target is missing: give the attacked address, e.g. 192.0.2.10", signals.ErrInvalid)
	}
	if a, err := netip.ParseAddr(text); err == nil {
		a = a.Unmap()
		if a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%w: target %q has a zone: give a global address", signals.ErrInvalid, clip(text))
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(text)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%w: target %q is not an IP address or prefix, e.g. 192.0.2.10 or 2001:db8::/64", signals.ErrInvalid, clip(text))
	}
	return p, nil
}
