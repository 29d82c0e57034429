package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ribkeeper/ribkeeper/notify"
)

// scrapeNotify is the notifier's delivery state (implemented by
// *notify.Notifier).
type scrapeNotify interface {
	Status() []notify.TargetStatus
}

var (
	descNotifyQueued = prometheus.NewDesc(metricsNamespace+"_notify_queued",
		"Notifications waiting for the receiver (bounded by its queue).", []string{"receiver"}, nil)
	descNotifyDelivered = prometheus.NewDesc(metricsNamespace+"_notify_delivered_total",
		"Notifications the receiver accepted.", []string{"receiver"}, nil)
	descNotifyRetries = prometheus.NewDesc(metricsNamespace+"_notify_retries_total",
		"Delivery attempts that failed and are retried (receiver down, 5xx, 408, 429).", []string{"receiver"}, nil)
	descNotifyFailed = prometheus.NewDesc(metricsNamespace+"_notify_failed_total",
		"Notifications the receiver refused for good (4xx) and that were dropped.", []string{"receiver"}, nil)
	descNotifyDropped = prometheus.NewDesc(metricsNamespace+"_notify_dropped_total",
		"Notifications dropped from a full queue while the receiver was down or slow.", []string{"receiver"}, nil)
)

// WatchNotifications registers the notification receivers' delivery
// counters, read from n at every scrape.
func (m *Metrics) WatchNotifications(n scrapeNotify) {
	m.reg.MustRegister(notifyCollector{n})
}

type notifyCollector struct{ n scrapeNotify }

func (c notifyCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descNotifyQueued, descNotifyDelivered, descNotifyRetries, descNotifyFailed, descNotifyDropped} {
		ch <- d
	}
}

func (c notifyCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.n.Status() {
		ch <- prometheus.MustNewConstMetric(descNotifyQueued, prometheus.GaugeValue, float64(s.Queued), s.Name)
		ch <- prometheus.MustNewConstMetric(descNotifyDelivered, prometheus.CounterValue, float64(s.Delivered), s.Name)
		ch <- prometheus.MustNewConstMetric(descNotifyRetries, prometheus.CounterValue, float64(s.Retries), s.Name)
		ch <- prometheus.MustNewConstMetric(descNotifyFailed, prometheus.CounterValue, float64(s.Failed), s.Name)
		ch <- prometheus.MustNewConstMetric(descNotifyDropped, prometheus.CounterValue, float64(s.Dropped), s.Name)
	}
}
