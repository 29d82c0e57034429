package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
)

// maxPeerHold bounds how long the sessions wait for the RIB to be loaded
// after a start or a speaker restart. Loading runs at tens of thousands
// of rules per second, so this is only reached when the store cannot be
// read or GoBGP keeps refusing rules; the sessions then come up with what
// the RIB holds, and the rest follows as it is announced.
const maxPeerHold = 60 * time.Second

// peerGate is what releasePeers needs of the speaker.
type peerGate interface {
	PeersHeld() bool
	ReleasePeers(ctx context.Context) error
	Epoch() uint64
}

// loadWatcher is what releasePeers needs of the reconciler.
type loadWatcher interface {
	Loaded() (epoch uint64, ok bool)
}

// releasePeers brings the BGP sessions up once the reconciler has loaded
// the RIB, after the start and after every speaker restart (the speaker
// holds them back: bgp.Config.HoldPeers), so that each router gets the
// whole table in GoBGP's initial dump. It returns when ctx ends, or with
// the error that stopped a release (a TCP MD5 key that cannot be
// installed: the daemon stops, as it would at start).
func releasePeers(ctx context.Context, log hclog.Logger, sp peerGate, rec loadWatcher, maxHold, tick time.Duration) error {
	var heldSince time.Time
	for first := true; ; first = false {
		wait := tick
		if heldSince.IsZero() && !first {
			wait = 25 * tick // nothing held: only to notice a restart
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		if !sp.PeersHeld() {
			heldSince = time.Time{}
			continue
		}
		if heldSince.IsZero() {
			heldSince = time.Now()
			log.Info("BGP sessions held until the RIB is loaded")
		}
		e, ok := rec.Loaded()
		loaded := ok && e == sp.Epoch()
		if !loaded && time.Since(heldSince) < maxHold {
			continue
		}
		if !loaded {
			log.Warn("RIB still loading; bringing the BGP sessions up anyway", "held", time.Since(heldSince).Round(time.Millisecond))
		}
		if err := sp.ReleasePeers(ctx); err != nil {
			return fmt.Errorf("bringing the BGP sessions up: %w", err)
		}
		log.Info("RIB loaded; BGP sessions started", "held", time.Since(heldSince).Round(time.Millisecond))
		heldSince = time.Time{}
	}
}
