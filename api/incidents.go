package api

import (
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/ribkeeper/ribkeeper/playbook"
)

// Incidents is the playbook engine as the API reads it (implemented by
// *playbook.Engine): the incidents open and the ended ones it keeps.
type Incidents interface {
	// List returns incidents newest first, those keep accepts (nil:
	// all), at most limit (0: all).
	List(keep func(netip.Prefix) bool, limit int) []playbook.Incident
	Get(id int64) (playbook.Incident, bool)
}

// WithIncidents serves GET /v1/incidents and /v1/incidents/{id} from i.
func WithIncidents(i Incidents) Option {
	return func(o *options) { o.incidents = i }
}

// Limits of GET /v1/incidents.
const (
	DefaultIncidentLimit = 100
	MaxIncidentLimit     = 10000
)

// Incident is an incident as the API shows it: signals for one target
// and vector, the playbook applied, its step, rules and (GET by id)
// timeline.
type Incident struct {
	ID        int64          `json:"id"`
	Target    string         `json:"target"`
	Vector    IncidentVector `json:"vector"`
	Source    string         `json:"source"`
	Playbook  string         `json:"playbook"`
	Shadow    bool           `json:"shadow"`
	State     string         `json:"state"` // active, holding, ended
	Step      int            `json:"step"`  // 1-based
	Steps     int            `json:"steps"`
	OpenedAt  time.Time      `json:"opened_at"`
	StepAt    time.Time      `json:"step_at"`
	LastAt    time.Time      `json:"last_signal_at"`
	EndsAt    *time.Time     `json:"ends_at,omitempty"`
	EndedAt   *time.Time     `json:"ended_at,omitempty"`
	Signals   int64          `json:"signals"`
	StepSigs  int64          `json:"step_signals"`
	PeakPPS   uint64         `json:"peak_pps"`
	PeakBPS   uint64         `json:"peak_bps"`
	AttackID  string         `json:"attack_id,omitempty"`
	Extended  int64          `json:"ttl_extensions"`
	Rules     []IncidentRule `json:"rules"`
	Timeline  []TimelineItem `json:"timeline,omitempty"`
	Omitted   int64          `json:"timeline_omitted,omitempty"`
	Truncated bool           `json:"truncated,omitempty"`
}

// IncidentVector is what the attack traffic looks like.
type IncidentVector struct {
	Key      string   `json:"key"`
	Protocol string   `json:"protocol,omitempty"`
	DstPorts []uint16 `json:"dst_ports,omitempty"`
	SrcPorts []uint16 `json:"src_ports,omitempty"`
	TCPFlags string   `json:"tcp_flags,omitempty"`
}

// IncidentRule is a rule an incident wrote (shadow: would write).
type IncidentRule struct {
	ID        int64      `json:"id,omitempty"`
	Text      string     `json:"text"`
	Step      int        `json:"step"` // 1-based
	State     string     `json:"state"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// TimelineItem is one entry of an incident's timeline.
type TimelineItem struct {
	At   time.Time `json:"at"`
	Kind string    `json:"kind"`
	Text string    `json:"text"`
}

// IncidentList is the answer of GET /v1/incidents.
type IncidentList struct {
	Incidents []Incident `json:"incidents"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// incidentFrom converts inc; timeline adds its timeline.
func incidentFrom(inc playbook.Incident, timeline bool) Incident {
	out := Incident{
		ID: inc.ID, Target: inc.Target.String(), Source: inc.Source, Playbook: inc.Playbook, Shadow: inc.Shadow,
		State: string(inc.State), Step: inc.Step + 1, Steps: inc.Steps, OpenedAt: inc.OpenedAt, StepAt: inc.StepAt, LastAt: inc.LastSignal,
		EndsAt: timePtr(inc.EndsAt), EndedAt: timePtr(inc.EndedAt), Signals: inc.Signals, StepSigs: inc.StepSignals,
		PeakPPS: inc.PeakPPS, PeakBPS: inc.PeakBPS, AttackID: inc.AttackID, Extended: inc.Extended, Omitted: inc.Omitted,
		Vector: IncidentVector{Key: inc.Vector.Key(), Protocol: inc.Vector.Protocol, DstPorts: inc.Vector.DstPorts,
			SrcPorts: inc.Vector.SrcPorts, TCPFlags: inc.Vector.TCPFlags},
		Rules: make([]IncidentRule, 0, len(inc.Rules)),
	}
	for _, r := range inc.Rules {
		out.Rules = append(out.Rules, IncidentRule{ID: r.ID, Text: r.Text, Step: r.Step + 1, State: r.State, ExpiresAt: timePtr(r.ExpiresAt), Error: r.Error})
	}
	if timeline {
		for _, e := range inc.Timeline {
			out.Timeline = append(out.Timeline, TimelineItem{At: e.At, Kind: e.Kind, Text: e.Text})
		}
	}
	return out
}

// keepFor is what a token may see of incidents: those whose target lies
// inside its prefixes (all, for an unscoped caller).
func keepFor(id *identity) func(netip.Prefix) bool {
	if id == nil || len(id.prefixes) == 0 {
		return nil
	}
	return id.covers
}

// listIncidents handles GET /v1/incidents?limit=N: the open incidents
// and the ended ones kept, newest first.
func (s *Server) listIncidents(w http.ResponseWriter, r *http.Request) (int, any, error) {
	limit := DefaultIncidentLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxIncidentLimit {
			return 0, nil, newError(http.StatusBadRequest, CodeInvalidInput, "limit", "limit %q is not a number from 1 to %d", v, MaxIncidentLimit)
		}
		limit = n
	}
	out := IncidentList{Incidents: []Incident{}}
	if s.opts.incidents == nil {
		return http.StatusOK, out, nil
	}
	for _, inc := range s.opts.incidents.List(keepFor(scopeOf(r.Context())), limit) {
		out.Incidents = append(out.Incidents, incidentFrom(inc, false))
	}
	return http.StatusOK, out, nil
}

// getIncident handles GET /v1/incidents/{id}, with its timeline. Another
// scope's incident is answered as an unknown one.
func (s *Server) getIncident(w http.ResponseWriter, r *http.Request) (int, any, error) {
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, nil, newError(http.StatusBadRequest, CodeInvalidID, "id", "incident id %q is not a positive integer", v)
	}
	notFound := newError(http.StatusNotFound, CodeNotFound, "id",
		"no incident with id %d (ended incidents are kept up to [incidents] keep_ended): list them with GET /v1/incidents", id)
	if s.opts.incidents == nil {
		return 0, nil, notFound
	}
	inc, ok := s.opts.incidents.Get(id)
	if !ok {
		return 0, nil, notFound
	}
	if keep := keepFor(scopeOf(r.Context())); keep != nil && !keep(inc.Target) {
		return 0, nil, notFound
	}
	return http.StatusOK, incidentFrom(inc, true), nil
}

// Incident emits the incident event of inc (the playbook engine's
// Changed): the incident as GET /v1/incidents lists it, or, when larger
// than the largest event kept, its id, state and where to read it. A
// scoped token's stream has it only when the target lies inside its
// prefixes.
func (e *Events) Incident(inc playbook.Incident) {
	data := mustJSON(incidentFrom(inc, false))
	if len(data) > e.maxEvent {
		data = mustJSON(Incident{ID: inc.ID, Target: inc.Target.String(), State: string(inc.State), Truncated: true, Rules: []IncidentRule{}})
	}
	e.push(streamEvent{typ: EventIncident, data: data, target: inc.Target})
}
