package metrics

import (
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ribkeeper/ribkeeper/notify"
)

type fakeNotify []notify.TargetStatus

func (f fakeNotify) Status() []notify.TargetStatus { return f }

func TestNotifyMetrics(t *testing.T) {
	m := New(hclog.NewNullLogger())
	m.WatchNotifications(fakeNotify{{Name: "noc", Queued: 3, Delivered: 10, Retries: 4, Failed: 1, Dropped: 2}})
	want := `
# HELP ribkeeper_notify_dropped_total Notifications dropped from a full queue while the receiver was down or slow.
# TYPE ribkeeper_notify_dropped_total counter
ribkeeper_notify_dropped_total{receiver="noc"} 2
# HELP ribkeeper_notify_queued Notifications waiting for the receiver (bounded by its queue).
# TYPE ribkeeper_notify_queued gauge
ribkeeper_notify_queued{receiver="noc"} 3
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "ribkeeper_notify_dropped_total", "ribkeeper_notify_queued"); err != nil {
		t.Error(err)
	}
}
