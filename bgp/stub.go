package bgp

// TEMPORARY: the contract other packages call; the bgp helper replaces this
// file with the real embedded GoBGP speaker.

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Config is the speaker's configuration (main.go maps config.Config to it).
type Config struct {
	ASN             uint32
	RouterID        netip.Addr
	ListenAddresses []string // e.g. ["127.0.0.1"]
	ListenPort      int32    // -1: no listener (tests)
	Neighbors       []Neighbor
}

// Neighbor is one upstream BGP peer.
type Neighbor struct {
	Address      netip.Addr
	ASN          uint32
	Port         uint16     // 0: 179
	LocalAddress netip.Addr // zero: kernel's choice
	Families     []flowspec.Family
	Passive      bool
	Description  string
}

// Speaker is the embedded GoBGP server plus the mirror of our own paths.
type Speaker struct{}

func New(log hclog.Logger, cfg Config) *Speaker { return &Speaker{} }

// Start starts GoBGP, the import policy, the peers and the RIB watch.
func (s *Speaker) Start(ctx context.Context) error { return errors.New("TODO") }

// Stop stops the server.
func (s *Speaker) Stop() {}

// Announce adds (or replaces) the local path for r.
func (s *Speaker) Announce(ctx context.Context, r flowspec.Rule) error { return errors.New("TODO") }

// Withdraw deletes the local path whose NLRI is m.
func (s *Speaker) Withdraw(ctx context.Context, m flowspec.Match) error { return errors.New("TODO") }

// Paths calls fn for every locally originated FlowSpec path in the mirror;
// ok is false (and fn is not called) until the mirror is initialised.
func (s *Speaker) Paths(fn func(m flowspec.Match, a flowspec.Action)) (ok bool) { return false }

// Changes delivers a coalesced wake-up after any mirror or peer change.
func (s *Speaker) Changes() <-chan struct{} { return nil }

// PeerStatus describes one configured neighbor.
type PeerStatus struct {
	Address  string
	ASN      uint32
	State    string // "established", "active", ...
	Uptime   time.Duration
	Families []string
	Sent     int // paths advertised
}

// Peers lists the neighbors and their session state.
func (s *Speaker) Peers(ctx context.Context) ([]PeerStatus, error) { return nil, nil }
