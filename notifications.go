package main

import (
	"fmt"
	"net/netip"
	"strconv"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/clock"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/notify"
)

// notifyTargets maps the [[notify]] receivers to the notifier's.
func notifyTargets(cfg *config.Config) []notify.Target {
	var out []notify.Target
	for _, n := range cfg.Notify {
		t := notify.Target{Name: n.Name, Kind: n.Kind, URL: n.URL, Secret: n.Secret, Queue: n.Queue}
		for _, e := range n.Events {
			t.Kinds = append(t.Kinds, notify.Kind(e))
		}
		out = append(out, t)
	}
	return out
}

// notices turns the speaker's and the reconciler's reports into
// notifications. The neighbors' descriptions come from the configuration
// in force (setConfig on reload).
type notices struct {
	n *notify.Notifier

	mu    sync.Mutex
	descr map[netip.Addr]string
}

func newNotices(log hclog.Logger, cfg *config.Config) *notices {
	ns := &notices{n: notify.New(log, clock.Real{}, cfg.Site, notifyTargets(cfg))}
	ns.setConfig(cfg, false)
	return ns
}

// setConfig takes a reloaded configuration: its receivers and neighbors.
func (ns *notices) setConfig(cfg *config.Config, targets bool) {
	d := map[netip.Addr]string{}
	for _, n := range cfg.Neighbors {
		if n.Description != "" {
			d[n.Address.Unmap()] = n.Description
		}
	}
	ns.mu.Lock()
	ns.descr = d
	ns.mu.Unlock()
	if targets {
		ns.n.SetTargets(notifyTargets(cfg))
	}
}

// peerChange is bgp.Config.PeerChange.
func (ns *notices) peerChange(pc bgp.PeerChange) {
	ns.mu.Lock()
	descr := ns.descr[pc.Address.Unmap()]
	ns.mu.Unlock()
	who := pc.Address.String()
	if descr != "" {
		who += " (" + descr + ")"
	}
	e := notify.Event{Kind: notify.PeerUp, Summary: "BGP session with " + who + " is up",
		Peer: &notify.Peer{Address: pc.Address.String(), Description: descr, State: pc.To}}
	if !pc.Up {
		e.Kind = notify.PeerDown
		e.Summary = "BGP session with " + who + " went down (" + pc.To + "): the router no longer gets our rules"
		if pc.Reason != "" {
			e.Summary += "; " + pc.Reason
		}
		e.Peer.Reason = pc.Reason
	}
	ns.n.Notify(e)
}

// ruleFailed is reconcile.Config.RuleFailed.
func (ns *notices) ruleFailed(id int64, rule string, withdraw bool, err error, terminal bool) {
	what, next := "announcing", "retrying with backoff"
	if withdraw {
		what = "withdrawing"
	}
	if terminal {
		next = "not retried: change or withdraw the rule"
	}
	ns.n.Notify(notify.Event{Kind: notify.RuleFailed,
		Summary: fmt.Sprintf("%s rule %s failed (%s): %v", what, strconv.FormatInt(id, 10), next, err),
		Rule:    &notify.Rule{ID: id, Text: rule, Error: err.Error()}})
}
