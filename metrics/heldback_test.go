package metrics_test

import (
	"context"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/metrics"
)

// heldSpeaker is a speaker whose peers' router profiles hold rules back.
type heldSpeaker struct{ peers []bgp.PeerStatus }

func (h heldSpeaker) Peers(context.Context) ([]bgp.PeerStatus, error)  { return h.peers, nil }
func (h heldSpeaker) Paths(func(flowspec.Match, flowspec.Action)) bool { return true }

// ribkeeper_peer_rules_held_back counts per peer, labelled with its
// profile, what the speaker reports held back.
func TestMetricPeerRulesHeldBack(t *testing.T) {
	m := metrics.New(hclog.NewNullLogger())
	m.Watch(metrics.Sources{Speaker: heldSpeaker{peers: []bgp.PeerStatus{
		{Address: "127.0.0.4", State: "established", Profile: "frr", HeldBack: 3},
		{Address: "127.0.0.5", State: "established", Profile: "bird"},
	}}})
	for _, c := range []struct {
		peer, profile string
		want          float64
	}{{"127.0.0.4", "frr", 3}, {"127.0.0.5", "bird", 0}} {
		v, ok := mxValue(t, m.Registry(), "ribkeeper_peer_rules_held_back", map[string]string{"peer": c.peer, "profile": c.profile})
		if !ok || v != c.want {
			t.Errorf("held back for %s (%s) = %v (present %v), want %v", c.peer, c.profile, v, ok, c.want)
		}
	}
}
