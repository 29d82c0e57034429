package main

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

type fakeGate struct {
	mu       sync.Mutex
	held     bool
	epoch    uint64
	released int
	err      error
}

func (g *fakeGate) PeersHeld() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.held }
func (g *fakeGate) Epoch() uint64   { g.mu.Lock(); defer g.mu.Unlock(); return g.epoch }
func (g *fakeGate) ReleasePeers(context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return g.err
	}
	g.held = false
	g.released++
	return nil
}

func (g *fakeGate) restart() { g.mu.Lock(); g.held = true; g.epoch++; g.mu.Unlock() }
func (g *fakeGate) state() (held bool, released int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held, g.released
}

type fakeLoad struct {
	mu    sync.Mutex
	epoch uint64
	ok    bool
}

func (l *fakeLoad) Loaded() (uint64, bool) { l.mu.Lock(); defer l.mu.Unlock(); return l.epoch, l.ok }
func (l *fakeLoad) set(e uint64)           { l.mu.Lock(); l.epoch, l.ok = e, true; l.mu.Unlock() }

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestReleasePeers: sessions stay held until the reconciler loaded the RIB
// of the speaker's current epoch, after the start and after a restart; a
// load that never finishes releases them after the maximum hold.
func TestReleasePeers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g, l := &fakeGate{held: true, epoch: 1}, &fakeLoad{}
	done := make(chan error, 1)
	go func() { done <- releasePeers(ctx, hclog.NewNullLogger(), g, l, time.Hour, time.Millisecond) }()

	time.Sleep(30 * time.Millisecond)
	if held, _ := g.state(); !held {
		t.Fatal("released before the RIB was loaded")
	}
	l.set(0) // an older epoch's load does not count
	time.Sleep(30 * time.Millisecond)
	if held, _ := g.state(); !held {
		t.Fatal("released on another epoch's load")
	}
	l.set(1)
	waitUntil(t, "release after the load", func() bool { held, n := g.state(); return !held && n == 1 })

	// A speaker restart holds them again until the new RIB is loaded.
	g.restart()
	time.Sleep(60 * time.Millisecond)
	if held, _ := g.state(); !held {
		t.Fatal("released after a restart before the new RIB was loaded")
	}
	l.set(2)
	waitUntil(t, "release after the restart's load", func() bool { held, n := g.state(); return !held && n == 2 })

	// A release that fails stops the daemon.
	g.mu.Lock()
	g.err = errors.New("md5 refused")
	g.mu.Unlock()
	g.restart()
	l.set(3)
	select {
	case err := <-done:
		if err == nil || !errors.Is(err, g.err) {
			t.Fatalf("releasePeers returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a failed release did not stop releasePeers")
	}
}

func TestReleasePeersMaxHold(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g, l := &fakeGate{held: true, epoch: 1}, &fakeLoad{}
	go releasePeers(ctx, hclog.NewNullLogger(), g, l, 50*time.Millisecond, time.Millisecond)
	start := time.Now()
	waitUntil(t, "release after the maximum hold", func() bool { _, n := g.state(); return n == 1 })
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Fatalf("released after %v, before the maximum hold", el)
	}
}
