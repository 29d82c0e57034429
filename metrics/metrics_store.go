package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ribkeeper/ribkeeper/store"
)

// scrapeStore is the store's condition (implemented by *store.Store).
type scrapeStore interface {
	Refusal() *store.RefusedError
	Integrity() *store.IntegrityResult
	LateCommits() uint64
}

// refusalKinds are the reasons a store refuses writes (store.RefusedError).
var refusalKinds = []string{"lost", "corrupt", "held"}

var (
	descStoreWritable = prometheus.NewDesc(metricsNamespace+"_store_writable",
		"1 while the store takes writes; 0 once it refuses them all (see ribkeeper_store_refused and GET /v1/status).", nil, nil)
	descStoreRefused = prometheus.NewDesc(metricsNamespace+"_store_refused",
		"1 for the reason the store refuses every write: lost (its file was deleted or replaced while running), corrupt (it failed its integrity check), held (not the store this appliance ran with, until the operator confirms it).",
		[]string{"reason"}, nil)
	descStoreIntegrity = prometheus.NewDesc(metricsNamespace+"_store_integrity_ok",
		"1 if the last integrity check of the SQLite file passed, 0 if it failed or did not finish; absent before the first one.", nil, nil)
	descStoreIntegrityAt = prometheus.NewDesc(metricsNamespace+"_store_integrity_check_timestamp_seconds",
		"When the last integrity check of the SQLite file ran (Unix time).", nil, nil)
	descStoreLate = prometheus.NewDesc(metricsNamespace+"_store_late_commits_total",
		"Writes answered 503 at their deadline ([store] write_timeout) while their commit was running; the log says how each ended.", nil, nil)
)

var storeDescs = []*prometheus.Desc{descStoreWritable, descStoreRefused, descStoreIntegrity, descStoreIntegrityAt, descStoreLate}

func (c *stateCollector) collectStore(ch chan<- prometheus.Metric) {
	s := c.src.Store
	r := s.Refusal()
	writable := 1.0
	if r != nil {
		writable = 0
	}
	ch <- prometheus.MustNewConstMetric(descStoreWritable, prometheus.GaugeValue, writable)
	for _, k := range refusalKinds {
		v := 0.0
		if r != nil && r.Kind == k {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descStoreRefused, prometheus.GaugeValue, v, k)
	}
	if in := s.Integrity(); in != nil {
		ok := 0.0
		if in.OK {
			ok = 1
		}
		ch <- prometheus.MustNewConstMetric(descStoreIntegrity, prometheus.GaugeValue, ok)
		ch <- prometheus.MustNewConstMetric(descStoreIntegrityAt, prometheus.GaugeValue, float64(in.At.UnixNano())/1e9)
	}
	ch <- prometheus.MustNewConstMetric(descStoreLate, prometheus.CounterValue, float64(s.LateCommits()))
}
