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
//
// A scoped token's chart counts only the rules inside its prefixes, and
// no drift repairs (they are the whole appliance's): its series starts
// when it first asks, and is then sampled with the others; at most
// maxSeriesScopes scopes are followed, the one asked least recently
// making room for a new one.
type Series struct {
	log      hclog.Logger
	src      SeriesSources
	now      func() time.Time
	interval time.Duration

	mu     sync.Mutex
	all    pointRing
	keep   int
	drift  uint64                  // drift repairs counted at the previous sample
	scopes map[string]*scopeSeries // by the scope's prefix list
}

// maxSeriesScopes bounds the scopes whose series are kept.
const maxSeriesScopes = 32

// scopeSeries is the series of one scope (a scoped token's prefixes).
type scopeSeries struct {
	id     *identity
	points pointRing
	asked  time.Time // when a token of this scope last asked
}

// pointRing keeps the last keep points.
type pointRing struct {
	points []SeriesPoint // circular once full
	head   int
}

func (r *pointRing) add(p SeriesPoint, keep int) {
	if len(r.points) < keep {
		r.points = append(r.points, p)
		return
	}
	r.points[r.head] = p
	r.head = (r.head + 1) % keep
}

// list returns the points oldest first.
func (r *pointRing) list() []SeriesPoint {
	out := make([]SeriesPoint, 0, len(r.points))
	for i := range r.points {
		out = append(out, r.points[(r.head+i)%len(r.points)])
	}
	return out
}

// SeriesSources are what a sample reads; nil ones leave their fields 0.
type SeriesSources struct {
	Rules interface {
		Counts(ctx context.Context) ([]store.Count, error)
		DestinationCounts(ctx context.Context) ([]store.DestinationCount, error)
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
	return &Series{log: log, src: src, now: now, interval: interval, keep: keep, scopes: map[string]*scopeSeries{}}
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

// Sample reads the sources and appends one point, to the appliance's
// series and to every scope's.
func (s *Series) Sample(ctx context.Context) SeriesPoint {
	s.mu.Lock()
	scopes := make([]*scopeSeries, 0, len(s.scopes))
	for _, sc := range s.scopes {
		scopes = append(scopes, sc)
	}
	s.mu.Unlock()
	p := SeriesPoint{At: s.now().UTC()}
	var byDest []store.DestinationCount
	if s.src.Rules != nil {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var (
			counts []store.Count
			err    error
		)
		if len(scopes) > 0 {
			// One read serves every series: the counts by destination
			// sum to the appliance's.
			byDest, err = s.src.Rules.DestinationCounts(cctx)
			for _, c := range byDest {
				counts = append(counts, c.Count)
			}
		} else {
			counts, err = s.src.Rules.Counts(cctx)
		}
		cancel()
		if err != nil {
			p.Err = "rules: " + OneLine(err.Error())
		}
		p.Active, p.Announced = activeCounts(counts)
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
	s.all.add(p, s.keep)
	for _, sc := range scopes {
		sc.points.add(scopePoint(p, byDest, sc.id), s.keep)
	}
	if p.Err != "" {
		s.log.Debug("series sample incomplete", "error", p.Err)
	}
	return p
}

// activeCounts sums the active rules (withdrawing ones included) and
// those announced.
func activeCounts(counts []store.Count) (active, announced int) {
	for _, c := range counts {
		if c.State == store.Active {
			active += c.N
			if c.Announced {
				announced += c.N
			}
		}
	}
	return active, announced
}

// scopePoint is p as id's scope sees it: its rules, no drift repairs.
func scopePoint(p SeriesPoint, byDest []store.DestinationCount, id *identity) SeriesPoint {
	p.Active, p.Announced = activeCounts(countsWithin(byDest, id))
	p.DriftRepairs = 0
	return p
}

// Points returns the kept points, oldest first.
func (s *Series) Points() []SeriesPoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all.list()
}

// scopePoints returns the points of id's scope, oldest first. A scope
// not followed yet is followed from now on, starting with a point taken
// now.
func (s *Series) scopePoints(ctx context.Context, id *identity) []SeriesPoint {
	key := id.prefixList()
	now := s.now()
	s.mu.Lock()
	sc, ok := s.scopes[key]
	if ok {
		sc.asked = now
		defer s.mu.Unlock()
		return sc.points.list()
	}
	s.mu.Unlock()

	p := SeriesPoint{At: now.UTC()}
	var byDest []store.DestinationCount
	if s.src.Rules != nil {
		var err error
		if byDest, err = s.src.Rules.DestinationCounts(ctx); err != nil {
			p.Err = "rules: " + OneLine(err.Error())
		}
	}
	if s.src.Peers != nil {
		if peers, err := s.src.Peers.Peers(ctx); err == nil {
			for _, pr := range peers {
				if pr.State == "established" {
					p.PeersUp++
				}
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc, ok := s.scopes[key]; ok { // another request was first
		sc.asked = now
		return sc.points.list()
	}
	if len(s.scopes) >= maxSeriesScopes {
		var oldest string
		for k, o := range s.scopes {
			if oldest == "" || o.asked.Before(s.scopes[oldest].asked) {
				oldest = k
			}
		}
		delete(s.scopes, oldest)
	}
	sc = &scopeSeries{id: id, asked: now}
	sc.points.add(scopePoint(p, byDest, id), s.keep)
	s.scopes[key] = sc
	return sc.points.list()
}

// getSeries handles GET /v1/series.
func (s *Server) getSeries(w http.ResponseWriter, r *http.Request) (int, any, error) {
	se := s.opts.series
	if id := scopeOf(r.Context()); id.scoped() {
		return http.StatusOK, SeriesBody{IntervalSeconds: se.interval.Seconds(), Points: se.scopePoints(r.Context(), id)}, nil
	}
	return http.StatusOK, SeriesBody{IntervalSeconds: se.interval.Seconds(), Points: se.Points()}, nil
}
