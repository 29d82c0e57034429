package api

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
)

// Series is a small in-memory time series of what the console's chart
// draws (GET /v1/series): active rules and drift repairs, one point per
// interval, kept for a bounded time. It starts empty at every start of
// the daemon.
type Series struct {
	log      hclog.Logger
	src      SeriesSources
	now      func() time.Time
	interval time.Duration

	mu     sync.Mutex
	points []SeriesPoint // circular once full
	head   int
	keep   int
	drift  uint64 // drift repairs counted at the previous sample
}

// SeriesSources are what a sample reads; nil ones leave their fields 0.
type SeriesSources struct {
	Rules interface {
		Counts(ctx context.Context) ([]store.Count, error)
	}
	Drift interface {
		Drift() reconcile.DriftCounts
	}
	Peers PeerFeed
}

// SeriesPoint is one sample.
type SeriesPoint struct {
	At time.Time `json:"at"`
	// Active counts the active rules (withdrawing ones included) and
	// Announced those this site's reconciler announced.
	Active    int `json:"active"`
	Announced int `json:"announced"`
	// DriftRepairs counts the repairs of drift (re-added, orphans
	// withdrawn, replaced) since the previous sample.
	DriftRepairs uint64 `json:"drift_repairs"`
	// PeersUp counts the established sessions.
	PeersUp int `json:"peers_up"`
	// Err says what could not be read for this sample.
	Err string `json:"err,omitempty"`
}

// SeriesBody is the body of GET /v1/series: points oldest first.
type SeriesBody struct {
	IntervalSeconds float64       `json:"interval_seconds"`
	Points          []SeriesPoint `json:"points"`
}

// Defaults of NewSeries.
const (
	DefaultSeriesInterval = time.Minute
	DefaultSeriesKeep     = 24 * 60 // a day of minutes
)

// NewSeries returns a series sampling src every interval (0:
// DefaultSeriesInterval) and keeping the last keep points (0:
// DefaultSeriesKeep); now stamps the samples (nil: time.Now).
func NewSeries(log hclog.Logger, src SeriesSources, interval time.Duration, keep int, now func() time.Time) *Series {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if interval <= 0 {
		interval = DefaultSeriesInterval
	}
	if keep <= 0 {
		keep = DefaultSeriesKeep
	}
	if now == nil {
		now = time.Now
	}
	return &Series{log: log, src: src, now: now, interval: interval, keep: keep}
}

// Run samples at once and then every interval until ctx is done.
func (s *Series) Run(ctx context.Context) error {
	s.Sample(ctx)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.Sample(ctx)
		}
	}
}

// Sample reads the sources and appends one point.
func (s *Series) Sample(ctx context.Context) SeriesPoint {
	p := SeriesPoint{At: s.now().UTC()}
	if s.src.Rules != nil {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		counts, err := s.src.Rules.Counts(cctx)
		cancel()
		if err != nil {
			p.Err = "rules: " + OneLine(err.Error())
		}
		for _, c := range counts {
			if c.State == store.Active {
				p.Active += c.N
				if c.Announced {
					p.Announced += c.N
				}
			}
		}
	}
	if s.src.Peers != nil {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		peers, err := s.src.Peers.Peers(cctx)
		cancel()
		if err == nil {
			for _, pr := range peers {
				if pr.State == "established" {
					p.PeersUp++
				}
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.src.Drift != nil {
		d := s.src.Drift.Drift()
		total := d.Readded + d.OrphansWithdrawn + d.Replaced
		if total >= s.drift {
			p.DriftRepairs = total - s.drift
		}
		s.drift = total
	}
	if len(s.points) < s.keep {
		s.points = append(s.points, p)
	} else {
		s.points[s.head] = p
		s.head = (s.head + 1) % s.keep
	}
	if p.Err != "" {
		s.log.Debug("series sample incomplete", "error", p.Err)
	}
	return p
}

// Points returns the kept points, oldest first.
func (s *Series) Points() []SeriesPoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SeriesPoint, 0, len(s.points))
	for i := range s.points {
		out = append(out, s.points[(s.head+i)%len(s.points)])
	}
	return out
}

// getSeries handles GET /v1/series.
func (s *Server) getSeries(w http.ResponseWriter, r *http.Request) (int, any, error) {
	se := s.opts.series
	return http.StatusOK, SeriesBody{IntervalSeconds: se.interval.Seconds(), Points: se.Points()}, nil
}
