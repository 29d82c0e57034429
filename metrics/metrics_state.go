package metrics

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/reconcile"
	"github.com/ribkeeper/ribkeeper/store"
)

// scrapeRules counts stored rules (implemented by *store.Store).
type scrapeRules interface {
	Counts(ctx context.Context) ([]store.Count, error)
}

// scrapeDrift reads the reconciler's drift repair counters (implemented by
// *reconcile.Reconciler).
type scrapeDrift interface {
	Drift() reconcile.DriftCounts
}

// scrapeSpeaker is the BGP side read at scrape time (implemented by
// *bgp.Speaker).
type scrapeSpeaker interface {
	Peers(ctx context.Context) ([]bgp.PeerStatus, error)
	Paths(fn func(m flowspec.Match, a flowspec.Action)) (ok bool)
}

// Sources are what Watch reads at scrape time; nil ones are skipped.
type Sources struct {
	Rules   scrapeRules
	Drift   scrapeDrift
	Speaker scrapeSpeaker
	Store   scrapeStore // metrics_store.go
	// Timeout bounds each source call of one scrape (default 5 s).
	Timeout time.Duration
}

// Watch registers the state-shaped metrics, read from src at every scrape.
func (m *Metrics) Watch(src Sources) {
	if src.Timeout <= 0 {
		src.Timeout = 5 * time.Second
	}
	m.reg.MustRegister(&stateCollector{src: src})
}

// peerStates are the session states GoBGP reports, in FSM order.
var peerStates = []string{"idle", "connect", "active", "opensent", "openconfirm", "established"}

var (
	descRules = prometheus.NewDesc(metricsNamespace+"_rules",
		"Stored rules by state (active, withdrawing, withdrawn, expired) and family.",
		[]string{"state", "family"}, nil)
	descRulesAnnounced = prometheus.NewDesc(metricsNamespace+"_rules_announced",
		"Active rules this site's reconciler reports announced, by family.",
		[]string{"family"}, nil)
	descDrift = prometheus.NewDesc(metricsNamespace+"_drift_repairs_total",
		"Repairs of the RIB drifting from what ribkeeper had seen it hold, by kind: readded (a desired path went missing), orphan_withdrawn (a path nothing desires), replaced (a desired path's action changed under us).",
		[]string{"kind"}, nil)
	descPeerState = prometheus.NewDesc(metricsNamespace+"_peer_session_state",
		"1 for the BGP session state the peer is in, 0 for the others.",
		[]string{"peer", "asn", "state"}, nil)
	descPeerUp = prometheus.NewDesc(metricsNamespace+"_peer_up",
		"1 if the BGP session with the peer is established.",
		[]string{"peer"}, nil)
	descPeerUptime = prometheus.NewDesc(metricsNamespace+"_peer_uptime_seconds",
		"Time since the BGP session with the peer was established; 0 when it is not.",
		[]string{"peer"}, nil)
	descPeerSent = prometheus.NewDesc(metricsNamespace+"_peer_prefixes_sent",
		"Paths advertised to the peer (FlowSpec rules of its families).",
		[]string{"peer"}, nil)
	descPeerHeldBack = prometheus.NewDesc(metricsNamespace+"_peer_rules_held_back",
		"Rules of the peer's families that its router profile keeps from it (a component, operator or action it cannot take, or past its rule cap).",
		[]string{"peer", "profile"}, nil)
	descPeerReceived = prometheus.NewDesc(metricsNamespace+"_peer_prefixes_received",
		"Routes the peer sent (all rejected by the import policy, held while the session is up; bounded by max_prefixes).",
		[]string{"peer"}, nil)
	descRIBPaths = prometheus.NewDesc(metricsNamespace+"_rib_paths",
		"Locally originated paths in the BGP RIB (the mirror), by family.",
		[]string{"family"}, nil)
	descRIBReady = prometheus.NewDesc(metricsNamespace+"_rib_ready",
		"1 once the RIB mirror is initialised.", nil, nil)
)

type stateCollector struct {
	src Sources
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRules, descRulesAnnounced, descDrift, descPeerState,
		descPeerUp, descPeerUptime, descPeerSent, descPeerHeldBack, descPeerReceived, descRIBPaths, descRIBReady} {
		ch <- d
	}
	if c.src.Store != nil {
		for _, d := range storeDescs {
			ch <- d
		}
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	if c.src.Rules != nil {
		c.collectRules(ch)
	}
	if c.src.Store != nil {
		c.collectStore(ch)
	}
	if c.src.Drift != nil {
		d := c.src.Drift.Drift()
		for _, k := range []struct {
			kind string
			n    uint64
		}{
			{"readded", d.Readded}, {"orphan_withdrawn", d.OrphansWithdrawn}, {"replaced", d.Replaced},
			{"speaker_restart", d.SpeakerRestarts}, {"reannounced", d.Reannounced}, {"peer_reset", d.PeerResets},
		} {
			ch <- prometheus.MustNewConstMetric(descDrift, prometheus.CounterValue, float64(k.n), k.kind)
		}
	}
	if c.src.Speaker != nil {
		c.collectPeers(ch)
		c.collectRIB(ch)
	}
}

var families = []flowspec.Family{flowspec.IPv4, flowspec.IPv6, flowspec.IPv4Unicast, flowspec.IPv6Unicast}

func (c *stateCollector) collectRules(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.src.Timeout)
	defer cancel()
	rows, err := c.src.Rules.Counts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descRules, err)
		return
	}
	type key struct{ state, family string }
	counts := map[key]int{}
	announced := map[string]int{}
	// Every state and family at zero, so that series do not vanish.
	for _, f := range families {
		for _, s := range []string{"active", "withdrawing", "withdrawn", "expired"} {
			counts[key{s, f.String()}] = 0
		}
		announced[f.String()] = 0
	}
	for _, r := range rows {
		state := string(r.State)
		if r.State == store.Active && r.WithdrawRequested {
			state = "withdrawing"
		}
		fam := r.Family.String()
		counts[key{state, fam}] += r.N
		if r.State == store.Active && r.Announced {
			announced[fam] += r.N
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(descRules, prometheus.GaugeValue, float64(n), k.state, k.family)
	}
	for f, n := range announced {
		ch <- prometheus.MustNewConstMetric(descRulesAnnounced, prometheus.GaugeValue, float64(n), f)
	}
}

func (c *stateCollector) collectPeers(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.src.Timeout)
	defer cancel()
	peers, err := c.src.Speaker.Peers(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descPeerState, err)
		return
	}
	for _, p := range peers {
		asn := strconv.FormatUint(uint64(p.ASN), 10)
		for _, s := range peerStates {
			ch <- prometheus.MustNewConstMetric(descPeerState, prometheus.GaugeValue, b2f(p.State == s), p.Address, asn, s)
		}
		up := p.State == "established"
		ch <- prometheus.MustNewConstMetric(descPeerUp, prometheus.GaugeValue, b2f(up), p.Address)
		uptime := 0.0
		if up {
			uptime = p.Uptime.Seconds()
		}
		ch <- prometheus.MustNewConstMetric(descPeerUptime, prometheus.GaugeValue, uptime, p.Address)
		ch <- prometheus.MustNewConstMetric(descPeerSent, prometheus.GaugeValue, float64(p.Sent), p.Address)
		ch <- prometheus.MustNewConstMetric(descPeerReceived, prometheus.GaugeValue, float64(p.Received), p.Address)
		ch <- prometheus.MustNewConstMetric(descPeerHeldBack, prometheus.GaugeValue, float64(p.HeldBack), p.Address, p.Profile)
	}
}

func (c *stateCollector) collectRIB(ch chan<- prometheus.Metric) {
	n := map[flowspec.Family]int{}
	for _, f := range families {
		n[f] = 0
	}
	ok := c.src.Speaker.Paths(func(m flowspec.Match, _ flowspec.Action) { n[m.Family()]++ })
	ch <- prometheus.MustNewConstMetric(descRIBReady, prometheus.GaugeValue, b2f(ok))
	if !ok {
		return
	}
	for f, k := range n {
		ch <- prometheus.MustNewConstMetric(descRIBPaths, prometheus.GaugeValue, float64(k), f.String())
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
