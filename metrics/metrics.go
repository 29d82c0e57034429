// Package metrics is ribkeeper's Prometheus instrumentation.
//
// Two kinds of metric live here. Event-shaped ones (passes and their
// duration, announcements, withdrawals, expiry lateness, API requests) are
// updated by the code path they name, through the small hooks that path
// declares: reconcile.Recorder and api.RequestObserver, both implemented by
// *Metrics. State-shaped ones (rules by state, drift repairs, peer sessions,
// RIB paths) are read from their owners when Prometheus scrapes, so they
// can never disagree with what `ribkeeper status` shows.
//
// The instrumented packages do not import Prometheus; only this package and
// main.go do.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/ribkeeper/ribkeeper/api"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/reconcile"
)

// metricsNamespace prefixes every metric name.
const metricsNamespace = "ribkeeper"

// Metrics holds the registry and the event-shaped metrics.
type Metrics struct {
	log hclog.Logger
	reg *prometheus.Registry

	passes         *prometheus.CounterVec
	passDuration   prometheus.Histogram
	lastPass       prometheus.Gauge
	announcements  *prometheus.CounterVec
	withdrawals    *prometheus.CounterVec
	expiryLateness prometheus.Histogram
	apiRequests    *prometheus.CounterVec
	apiDuration    *prometheus.HistogramVec
	build          *prometheus.GaugeVec

	// totals sums the passes since New, for GET /v1/status.
	totalsMu sync.Mutex
	totals   api.Totals
}

// New returns Metrics on a fresh registry that also carries the Go runtime
// and process collectors. A nil log discards logs.
func New(log hclog.Logger) *Metrics {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	m := &Metrics{
		totals: api.Totals{Started: time.Now().UTC()},
		log:    log,
		reg:    prometheus.NewRegistry(),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: "reconcile", Name: "passes_total",
			Help: "Reconcile passes run, by result: ok, error (something failed; see the log), dry-run.",
		}, []string{"result"}),
		passDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: "reconcile", Name: "pass_duration_seconds",
			Help:    "Duration of reconcile passes.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		lastPass: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: "reconcile", Name: "last_pass_timestamp_seconds",
			Help: "Unix time at which the last reconcile pass started.",
		}),
		announcements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "announcements_total",
			Help: "Paths the reconciler announced to the BGP speaker, by family and op (add, update, readd, replace).",
		}, []string{"family", "op"}),
		withdrawals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "withdrawals_total",
			Help: "Paths the reconciler withdrew from the BGP speaker, by family and op (retire: a withdrawn or expired rule; orphan: a path nothing desires).",
		}, []string{"family", "op"}),
		expiryLateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "expiry_lateness_seconds",
			Help:    "Time from a rule's expires_at until the reconciler saw its path gone from the RIB.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		apiRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: "api", Name: "requests_total",
			Help: "API requests answered, by route pattern, method and HTTP status code.",
		}, []string{"route", "method", "code"}),
		apiDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: "api", Name: "request_duration_seconds",
			Help:    "Time to answer API requests, by route pattern.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route"}),
		build: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Name: "build_info",
			Help: "Always 1; its labels name the running build: version, commit, Go version, GoBGP version (`ribkeeper version`).",
		}, []string{"version", "commit", "goversion", "gobgp"}),
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.passes, m.passDuration, m.lastPass, m.announcements, m.withdrawals,
		m.expiryLateness, m.apiRequests, m.apiDuration, m.build,
	)
	// Families are few and known: show them at zero from the start, so
	// that rate() works from the first increment.
	for _, f := range families {
		for _, op := range []string{"add", "update", "readd", "replace"} {
			m.announcements.WithLabelValues(f.String(), op)
		}
		for _, op := range []string{"retire", "orphan"} {
			m.withdrawals.WithLabelValues(f.String(), op)
		}
	}
	for _, r := range []string{"ok", "skipped", "error", "dry-run"} {
		m.passes.WithLabelValues(r)
	}
	return m
}

// Build names a build for ribkeeper_build_info.
type Build struct {
	Version, Commit, GoVersion, GoBGP string
}

// SetBuild makes ribkeeper_build_info name b (and only b).
func (m *Metrics) SetBuild(b Build) {
	m.build.Reset()
	m.build.WithLabelValues(b.Version, b.Commit, b.GoVersion, b.GoBGP).Set(1)
}

// Registry returns the registry, for tests and for adding collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition formats. A
// source that fails during a scrape is logged and left out; the rest is
// still served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      m.log.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}),
		ErrorHandling: promhttp.ContinueOnError,
		Timeout:       10 * time.Second,
	})
}

// PassDone implements reconcile.Recorder.
func (m *Metrics) PassDone(p reconcile.PassResult) {
	outcome := p.Outcome()
	if outcome == "ok" && p.Skipped {
		// Nothing changed on either side since the last pass.
		outcome = "skipped"
	}
	m.passes.WithLabelValues(outcome).Inc()
	m.totalsMu.Lock()
	t := &m.totals
	t.Passes++
	if outcome == "error" {
		t.ErrorPasses++
	}
	if !p.DryRun {
		// Added, Updated and Withdrawn are counted as the speaker accepts
		// each change (Announced, Withdrawn): an early announcement is
		// made outside any pass, and the pass that follows adopts it.
		t.Finished += uint64(p.Finished)
	}
	t.Errors += uint64(p.Errors)
	m.totalsMu.Unlock()
	m.passDuration.Observe(p.Duration.Seconds())
	m.lastPass.Set(float64(p.Started.UnixNano()) / 1e9)
}

// PassTotals sums the passes heard since New (drift counters are
// left zero: they are the reconciler's).
func (m *Metrics) PassTotals() api.Totals {
	m.totalsMu.Lock()
	defer m.totalsMu.Unlock()
	return m.totals
}

// Announced implements reconcile.Recorder.
func (m *Metrics) Announced(f flowspec.Family, op string) {
	m.announcements.WithLabelValues(f.String(), op).Inc()
	m.totalsMu.Lock()
	if op == "update" || op == "replace" {
		m.totals.Updated++
	} else {
		m.totals.Added++
	}
	m.totalsMu.Unlock()
}

// Withdrawn implements reconcile.Recorder.
func (m *Metrics) Withdrawn(f flowspec.Family, op string) {
	m.withdrawals.WithLabelValues(f.String(), op).Inc()
	m.totalsMu.Lock()
	m.totals.Withdrawn++
	m.totalsMu.Unlock()
}

// ExpiryLateness implements reconcile.Recorder.
func (m *Metrics) ExpiryLateness(d time.Duration) {
	m.expiryLateness.Observe(d.Seconds())
}

// APIRequest implements api.RequestObserver.
func (m *Metrics) APIRequest(route, method string, code int, d time.Duration) {
	m.apiRequests.WithLabelValues(route, normMethod(method), codeText(code)).Inc()
	m.apiDuration.WithLabelValues(route).Observe(d.Seconds())
}

// normMethod bounds the method label: clients can send any token.
func normMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
		http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

func codeText(code int) string {
	if code < 100 || code > 999 {
		return "other"
	}
	return strconv.Itoa(code)
}

var (
	_ reconcile.Recorder = (*Metrics)(nil)
)
