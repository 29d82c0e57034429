package ingest

import (
	"container/list"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ribkeeper/ribkeeper/signals"
)

// amMessage is Alertmanager's webhook body, version 4 (the fields read).
type amMessage struct {
	Version         string    `json:"version"`
	Status          string    `json:"status"`
	Receiver        string    `json:"receiver"`
	TruncatedAlerts int       `json:"truncatedAlerts"`
	Alerts          []amAlert `json:"alerts"`
}

type amAlert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

// alertmanager reads one notification: every alert it can read is
// passed on; those it cannot are refused (422) each with its reason,
// which Alertmanager logs and does not retry.
func (in *Ingest) alertmanager(w http.ResponseWriter, r *http.Request, src *source, body []byte) {
	var msg amMessage
	if err := json.Unmarshal(body, &msg); err != nil {
		in.refuse(w, src, newError(http.StatusBadRequest, CodeInvalidBody, "",
			"not an Alertmanager notification (JSON version 4): %s; point a webhook_configs receiver of Alertmanager here", jsonProblem(err)))
		return
	}
	if msg.Version != "4" {
		in.refuse(w, src, newError(http.StatusBadRequest, CodeInvalidBody, "version",
			"Alertmanager webhook version %q: only version \"4\" (Alertmanager 0.x) is read", clip(msg.Version)))
		return
	}
	if limit := max(src.cfg.MaxSignalsPerRequest, 1); len(msg.Alerts) > limit {
		in.refuse(w, src, newError(http.StatusRequestEntityTooLarge, CodeTooMany, "alerts",
			"%d alerts in one notification, more than %d: set max_alerts of the receiver's webhook_config to %d, or raise max_signals_per_request of [[source]] %q",
			len(msg.Alerts), limit, limit, src.cfg.Name))
		return
	}
	if msg.TruncatedAlerts > 0 {
		in.log.Warn("Alertmanager truncated a notification: alerts were left out", "source", src.cfg.Name, "truncated", msg.TruncatedAlerts)
	}
	now := in.clock.Now()
	var (
		sigs  []signals.Signal
		early []Result
	)
	for i, a := range msg.Alerts {
		s, err := src.alertSignal(a, now)
		if err != nil {
			reason := fmt.Sprintf("alert %d (%s): %v", i+1, alertName(a), err)
			in.log.Warn("alert refused", "source", src.cfg.Name, "reason", reason)
			s.Source, s.At = src.cfg.Name, now
			in.recent.Add(signals.Record{Via: src.cfg.Kind, Signal: s, Reason: reason})
			res := Result{Error: reason}
			if s.Target.IsValid() {
				res.Target = s.Target.String()
			}
			early = append(early, res)
			continue
		}
		sigs = append(sigs, s)
	}
	in.deliver(w, r.Context(), src, sigs, early)
}

func alertName(a amAlert) string {
	n := a.Labels["alertname"]
	if n == "" {
		n = "no alertname"
	}
	if a.Fingerprint != "" {
		n += ", fingerprint " + a.Fingerprint
	}
	return clip(n)
}

// alertSignal maps one alert to a signal with the source's labels. The
// signal is returned, partly filled, with the error too, so that a
// refusal can be recorded with its target.
func (src *source) alertSignal(a amAlert, now time.Time) (signals.Signal, error) {
	l := src.cfg.Labels
	s := signals.Signal{Source: src.cfg.Name, At: now}
	switch a.Status {
	case "firing":
		s.State = signals.Start // or Ongoing, once checked
	case "resolved":
		s.State = signals.End
	default:
		return s, fmt.Errorf("status %q is neither firing nor resolved", clip(a.Status))
	}
	get := func(name string) string {
		if name == "" {
			return ""
		}
		if v, ok := a.Labels[name]; ok {
			return v
		}
		return a.Annotations[name]
	}
	var target string
	for _, name := range l.Target {
		if target = get(name); target != "" {
			break
		}
	}
	if target == "" {
		return s, fmt.Errorf("no target: none of the labels %s is set; label the alert with the attacked address, or name its label in [source.labels] target of [[source]] %q",
			strings.Join(l.Target, ", "), src.cfg.Name)
	}
	t, err := alertTarget(target)
	if err != nil {
		return s, err
	}
	s.Target = t
	s.Vector.Protocol, s.Vector.TCPFlags = get(l.Protocol), get(l.TCPFlags)
	var e error
	if s.Vector.SrcPorts, e = ports(l.SrcPorts, get(l.SrcPorts)); e != nil {
		return s, e
	}
	if s.Vector.DstPorts, e = ports(l.DstPorts, get(l.DstPorts)); e != nil {
		return s, e
	}
	if s.PPS, e = rate(l.PPS, get(l.PPS)); e != nil {
		return s, e
	}
	if s.BPS, e = rate(l.BPS, get(l.BPS)); e != nil {
		return s, e
	}
	if v := get(l.Confidence); v != "" {
		if s.Confidence, e = strconv.ParseFloat(strings.TrimSpace(v), 64); e != nil {
			return s, fmt.Errorf("label %s = %q is not a number between 0 and 1", l.Confidence, clip(v))
		}
	}
	s.AttackID = get(l.AttackID)
	if s.AttackID == "" {
		s.AttackID = a.Fingerprint
	}
	s.Detail = get(l.Detail)
	if s.Detail == "" {
		s.Detail = a.Labels["alertname"]
	}
	if len(s.Detail) > signals.MaxDetailBytes {
		s.Detail = s.Detail[:signals.MaxDetailBytes]
	}
	if err := s.Check(); err != nil {
		return s, err
	}
	if s.State == signals.End {
		src.firing.resolve(src.firingKey(a))
	} else if src.firing.fire(src.firingKey(a)) {
		s.State = signals.Ongoing
	}
	return s, nil
}

// alertTarget reads an address, a prefix, or host:port (Prometheus'
// instance label) as the target.
func alertTarget(v string) (netip.Prefix, error) {
	v = strings.TrimSpace(v)
	if host, _, err := net.SplitHostPort(v); err == nil {
		v = host
	}
	return parseTarget(v)
}

// ports reads "53" or "53,123" of label name.
func ports(name, v string) ([]uint16, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var out []uint16
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 16)
		if err != nil {
			return nil, fmt.Errorf("label %s = %q is not a port or a list of ports such as \"53,123\"", name, clip(v))
		}
		out = append(out, uint16(n))
	}
	return out, nil
}

// rate reads a rate of label name: a whole number or one in exponent
// form ("1.5e6").
func rate(name, v string) (uint64, error) {
	if strings.TrimSpace(v) == "" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f < 0 || f != f || f > 1e19 {
		return 0, fmt.Errorf("label %s = %q is not a rate (a number, e.g. 250000)", name, clip(v))
	}
	return uint64(f), nil
}

// firingKey identifies an alert across notifications.
func (src *source) firingKey(a amAlert) string {
	if a.Fingerprint != "" {
		return a.Fingerprint
	}
	b, _ := json.Marshal(a.Labels) // sorted keys
	return string(b)
}

// maxFiring bounds the alerts an alertmanager source remembers as firing.
const maxFiring = 4096

// firingSet remembers the alerts seen firing, the least recently seen
// forgotten first beyond its size: a forgotten alert's next firing
// notification is reported as a start again.
type firingSet struct {
	mu    sync.Mutex
	size  int
	order *list.List // of string, most recent at the front
	at    map[string]*list.Element
}

func newFiringSet(size int) *firingSet {
	return &firingSet{size: size, order: list.New(), at: map[string]*list.Element{}}
}

// fire remembers key as firing and reports whether it already was.
func (f *firingSet) fire(key string) bool {
	if len(key) > 4096 {
		key = key[:4096]
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.at[key]; ok {
		f.order.MoveToFront(e)
		return true
	}
	f.at[key] = f.order.PushFront(key)
	if f.order.Len() > f.size {
		delete(f.at, f.order.Remove(f.order.Back()).(string))
	}
	return false
}

// resolve forgets key.
func (f *firingSet) resolve(key string) {
	if len(key) > 4096 {
		key = key[:4096]
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.at[key]; ok {
		f.order.Remove(e)
		delete(f.at, key)
	}
}
