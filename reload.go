package main

import (
	"context"
	"reflect"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/config"
	"github.com/ribkeeper/ribkeeper/ingest"
	"github.com/ribkeeper/ribkeeper/playbook"
)

// bgpConfig maps the configuration to the speaker's.
func bgpConfig(cfg *config.Config) bgp.Config {
	c := bgp.Config{ASN: cfg.BGP.ASN, RouterID: cfg.BGP.RouterID, ListenPort: cfg.BGP.ListenPort,
		RouteNextHop4: cfg.RTBH.NextHopIPv4, RouteNextHop6: cfg.RTBH.NextHopIPv6,
		GRPCListen: cfg.BGP.GRPCListen, GRPCAllowRemote: cfg.BGP.GRPCAllowRemote}
	for _, a := range cfg.BGP.ListenAddresses {
		c.ListenAddresses = append(c.ListenAddresses, a.String())
	}
	for _, n := range cfg.Neighbors {
		c.Neighbors = append(c.Neighbors, bgp.Neighbor{
			Address: n.Address, ASN: n.ASN, Port: n.Port, LocalAddress: n.LocalAddress,
			Families: n.Families, Passive: n.Passive, Description: n.Description,
			HoldTime: n.HoldTime, KeepaliveInterval: n.KeepaliveInterval, MultihopTTL: n.MultihopTTL,
			Password: n.Password, GracefulRestart: n.GracefulRestart, RestartTime: n.RestartTime,
			ConnectRetry: n.ConnectRetry, Profile: n.Profile, MaxPrefixes: n.MaxPrefixes,
		})
	}
	for _, g := range cfg.PeerGroups {
		c.PeerGroups = append(c.PeerGroups, bgp.PeerGroup{
			Name: g.Name, ASN: g.ASN, Families: g.Families, Description: g.Description,
			HoldTime: g.HoldTime, KeepaliveInterval: g.KeepaliveInterval, MultihopTTL: g.MultihopTTL,
			Password: g.Password, GracefulRestart: g.GracefulRestart, RestartTime: g.RestartTime,
			ConnectRetry: g.ConnectRetry, Profile: g.Profile, MaxPrefixes: g.MaxPrefixes,
		})
	}
	for _, d := range cfg.DynamicNeighbors {
		c.DynamicNeighbors = append(c.DynamicNeighbors, bgp.DynamicNeighbor{Prefix: d.Prefix, PeerGroup: d.PeerGroup})
	}
	return c
}

// restartOnly lists the settings that a reload cannot change, by the key
// an operator would look for, whose values differ between a and b.
func restartOnly(a, b *config.Config) []string {
	var out []string
	for _, d := range []struct {
		key  string
		x, y any
	}{
		{"site", a.Site, b.Site},
		{"log", a.Log, b.Log},
		{"bgp", a.BGP, b.BGP},
		{"store", a.Store, b.Store},
		// Tokens, hosts and origins are applied (reloader.applyTCP).
		{"api.socket", a.API.Socket, b.API.Socket},
		{"api.listen", a.API.Listen, b.API.Listen},
		{"api.tls_cert", a.API.TLSCert, b.API.TLSCert},
		{"api.tls_key", a.API.TLSKey, b.API.TLSKey},
		{"api.max_connections", a.API.MaxConnections, b.API.MaxConnections},
		{"api.max_event_streams", a.API.MaxEventStreams, b.API.MaxEventStreams},
		{"api.max_event_streams_per_token", a.API.MaxEventStreamsPerToken, b.API.MaxEventStreamsPerToken},
		{"api.event_ring_bytes", a.API.EventRingBytes, b.API.EventRingBytes},
		{"api.max_event_bytes", a.API.MaxEventBytes, b.API.MaxEventBytes},
		{"reconcile", a.Reconcile, b.Reconcile},
		{"source (a gobgp source's name, listen or tls)", gobgpListeners(a), gobgpListeners(b)},
	} {
		if !reflect.DeepEqual(d.x, d.y) {
			out = append(out, d.key)
		}
	}
	return out
}

// gobgpListeners are the gobgp sources' listeners, bound at start.
func gobgpListeners(c *config.Config) []config.Source {
	var out []config.Source
	for _, s := range c.Sources {
		if s.Kind == config.SourceGoBGP {
			out = append(out, config.Source{Name: s.Name, Listen: s.Listen, TLSCert: s.TLSCert, TLSKey: s.TLSKey, TLSClientCA: s.TLSClientCA})
		}
	}
	return out
}

// tcpConfig maps the configuration to the API's TCP listener; nil when
// there is none.
func tcpConfig(cfg *config.Config) *api.TCPConfig {
	if cfg.API.Listen == "" {
		return nil
	}
	c := &api.TCPConfig{Addr: cfg.API.Listen, CertFile: cfg.API.TLSCert, KeyFile: cfg.API.TLSKey,
		Hosts: cfg.API.Hosts, Origins: cfg.API.Origins}
	for _, t := range cfg.API.Tokens {
		c.Tokens = append(c.Tokens, api.Token{Name: t.Name, Role: api.Role(t.Role), Secret: t.Secret,
			Prefixes: t.Prefixes, Actions: t.Actions, MaxActiveRules: t.MaxActiveRules,
			MaxNewRulesPerMinute: t.MaxNewRulesPerMinute, NeverExpires: t.NeverExpires, OthersRules: t.OthersRules})
	}
	return c
}

// reloader applies a new configuration file on SIGHUP: API tokens, hosts
// and origins (a removed or changed token stops working at once),
// notification receivers, neighbors, peer groups and dynamic neighbors
// (only changed sessions are touched), RTBH next hops, guardrails, and
// signal sources (the ways in and the engine; a rotated secret works from
// then on) and playbooks (for incidents opened after it). The rest
// needs a restart and is
// only reported.
type reloader struct {
	log  hclog.Logger
	cur  *config.Config
	sp   *bgp.Speaker
	gate *admit.Gate
	api  *api.Server
	// engine takes the new sources and playbooks (open incidents keep
	// theirs).
	engine *playbook.Engine
	// ingest takes the [[source]]s of the HTTP ways in.
	ingest *ingest.Ingest
	// started is the configuration the process started with: the TCP
	// listener's address and key pair come from it.
	started *config.Config
	// notices takes the reloaded [[notify]] receivers and neighbors.
	notices *notices
}

// reload reads the file again and applies it. A file with errors changes
// nothing; every error is logged with its key and line.
func (r *reloader) reload(ctx context.Context) error {
	next, err := loadChecked(r.cur.File)
	if err != nil {
		r.log.Error("reload refused: the configuration has errors; nothing changed", "config", r.cur.File, "error", err)
		return err
	}
	if keys := restartOnly(r.cur, next); len(keys) > 0 {
		r.log.Error("reload: these settings changed but only take effect after a restart", "config", r.cur.File, "sections", keys)
	}
	r.applyTCP(next)
	if r.ingest != nil {
		if err := r.ingest.SetSources(next.Sources); err != nil {
			r.log.Error("reload: [[source]]s not applied; the previous ones stay in force", "error", err)
		} else {
			r.log.Info("reload: signal sources applied", "sources", len(next.Sources))
		}
	}
	ch, err := r.sp.Reconfigure(ctx, bgpConfig(next))
	if err != nil {
		r.log.Error("reload: neighbors only partly applied", "error", err)
	} else {
		r.log.Info("reload: neighbors applied", "added", len(ch.Added), "removed", len(ch.Removed),
			"changed", len(ch.Changed), "unchanged", len(ch.Unchanged), "dynamic_changed", ch.DynamicChanged)
	}
	r.sp.SetRouteNextHops(next.RTBH.NextHopIPv4, next.RTBH.NextHopIPv6)
	if r.notices != nil {
		r.notices.setConfig(next, true)
	}
	r.gate.SetGuardrails(next.Guardrails)
	r.gate.SetLimits(next.Limits)
	n, gerr := enforceGuardrails(ctx, r.log, r.gate)
	if gerr != nil {
		r.log.Error("reload: checking active rules against the guardrails failed, nothing was withdrawn; retry with another SIGHUP", "error", gerr)
	}
	if err := r.gate.SyncStatic(ctx, next.Rules); err != nil {
		r.log.Error("reload: static rules ([[rule]]) only partly applied; retry with another SIGHUP", "error", err)
	}
	r.engine.SetConfig(next)
	r.log.Info("configuration reloaded", "config", next.File, "withdrawn_by_guardrails", n, "sources", len(next.Sources), "playbooks", len(next.Playbooks))
	r.cur = next
	if err != nil {
		return err
	}
	return gerr
}

// applyTCP gives the TCP listener next's tokens, hosts and origins. The
// listener keeps the address and key pair of the configuration it started
// with (started), which only a restart changes.
func (r *reloader) applyTCP(next *config.Config) {
	started := tcpConfig(r.started)
	if started == nil {
		return // no listener; restartOnly reported a new one
	}
	c := tcpConfig(next)
	if c == nil {
		r.log.Error("reload: [api] listen was removed, which takes a restart: until then the TCP listener keeps serving with the tokens it had; restart to close it")
		return
	}
	c.Addr, c.CertFile, c.KeyFile = started.Addr, started.CertFile, started.KeyFile
	ch, err := r.api.SetTCPAccess(*c)
	if err != nil {
		r.log.Error("reload: API tokens, hosts and origins not applied; the previous ones stay in force", "error", err)
		return
	}
	r.log.Info("reload: API tokens applied", "added", ch.Added, "removed", ch.Removed, "changed", ch.Changed,
		"hosts", len(c.Hosts), "origins", len(c.Origins))
}

// enforceGuardrails withdraws through the gate, in one transaction, the
// active rules that break a per-rule guardrail in force (guard.CheckActive), with actor "guardrail" and the reason extended with why,
// and logs each.
func enforceGuardrails(ctx context.Context, log hclog.Logger, gate *admit.Gate) (int, error) {
	ws, err := gate.Enforce(ctx)
	if err != nil {
		return 0, err
	}
	for _, w := range ws {
		log.Warn("rule withdrawn by guardrail", "rule", w.Rule.ID, "text", w.Rule.Text, "guardrail", w.Violation.Guardrail, "why", w.Violation.Msg)
	}
	return len(ws), nil
}
