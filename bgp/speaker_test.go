package bgp

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

func TestAnnounceReplaceWithdraw(t *testing.T) {
	s := startSpeaker(t, Config{})
	ctx := context.Background()
	if m := mirrorOf(s); m == nil || len(m) != 0 {
		t.Fatalf("mirror after Start = %v, want initialised and empty", m)
	}

	for _, m := range []flowspec.Match{match4(t, 1), match6(t, 1)} {
		t.Run(m.Family().String(), func(t *testing.T) {
			if err := announceOne(s, ctx, flowspec.Rule{Match: m, Action: flowspec.Discard()}); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, "discard in mirror", func() bool {
				a, ok := s.Lookup(m)
				return ok && a == flowspec.Discard()
			})
			<-s.Changes() // the mirror change woke us

			rl := flowspec.RateLimit(125000)
			if err := announceOne(s, ctx, flowspec.Rule{Match: m, Action: rl}); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, "rate-limit replaces discard", func() bool {
				a, ok := s.Lookup(m)
				return ok && a == rl
			})
			if n := countFamily(s, m.Family()); n != 1 {
				t.Fatalf("%d paths of %s in mirror after replace, want 1", n, m.Family())
			}

			if err := withdrawOne(s, ctx, m); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, "path gone", func() bool {
				_, ok := s.Lookup(m)
				return !ok
			})
			if err := withdrawOne(s, ctx, m); err != nil {
				t.Fatalf("second Withdraw: %v", err)
			}
		})
	}
}

func countFamily(s *Speaker, f flowspec.Family) int {
	n := 0
	s.Paths(func(m flowspec.Match, _ flowspec.Action) {
		if m.Family() == f {
			n++
		}
	})
	return n
}

func TestAnnounceMany(t *testing.T) {
	s := startSpeaker(t, Config{})
	ctx := context.Background()
	const n = 1000
	want := make(map[flowspec.Match]flowspec.Action, n)
	for i := range n {
		m := match4(t, i)
		a := flowspec.RateLimit(float32(1000 * (i + 1)))
		if i%2 == 0 {
			m = match6(t, i)
			a = flowspec.Discard()
		}
		want[m] = a
		if err := announceOne(s, ctx, flowspec.Rule{Match: m, Action: a}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "1000 paths in mirror", func() bool { return s.Len() == n })
	got := mirrorOf(s)
	for m, a := range want {
		if got[m] != a {
			t.Fatalf("mirror[%v] = %v, want %v", m, got[m], a)
		}
	}
	rib, ok := s.RIB()
	if !ok || len(rib) != n {
		t.Fatalf("RIB() = %d rules, %v", len(rib), ok)
	}
	if rib[0].Match.Family() != flowspec.IPv4 || rib[n-1].Match.Family() != flowspec.IPv6 {
		t.Fatalf("RIB not sorted by family")
	}

	// Re-announcing everything is idempotent: the mirror does not change.
	for m, a := range want {
		if err := announceOne(s, ctx, flowspec.Rule{Match: m, Action: a}); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Len(); got != n {
		t.Fatalf("after re-announce: %d paths", got)
	}
}

// The snapshot a new watch gets is complete when its first callback has
// run: a second mirror attached to a RIB with paths in it is full as soon
// as watchRIB returns.
func TestMirrorSnapshot(t *testing.T) {
	s := startSpeaker(t, Config{})
	ctx := context.Background()
	const n = 300
	for i := range n {
		if err := announceOne(s, ctx, flowspec.Rule{Match: match4(t, i), Action: flowspec.Discard()}); err != nil {
			t.Fatal(err)
		}
	}
	s2 := New(testLogger(t), Config{})
	s2.srv = s.srv
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s2.watchRIB(ctx, wctx, s.srv); err != nil {
		t.Fatal(err)
	}
	if got := s2.Len(); got != n {
		t.Fatalf("second mirror has %d paths right after watchRIB, want %d", got, n)
	}
}

// A local FlowSpec path added to GoBGP by someone else (here: straight
// into the server, as the gobgp CLI would through gRPC) is in the mirror,
// so the reconciler can withdraw it as an orphan.
func TestMirrorSeesForeignLocalPath(t *testing.T) {
	s := startSpeaker(t, Config{})
	m := match4(t, 7)
	n, err := nativeNLRI(m)
	if err != nil {
		t.Fatal(err)
	}
	// ORIGIN and MP_REACH next hop, no extended community: no action.
	p := &apiutil.Path{Family: gobgp.RF_FS_IPv4_UC, Nlri: n, Attrs: []gobgp.PathAttributeInterface{gobgp.NewPathAttributeOrigin(0), mpReachFS4}}
	if _, err := s.srv.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{p}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "foreign path in mirror", func() bool {
		a, ok := s.Lookup(m)
		return ok && !a.IsValid()
	})
	if err := withdrawOne(s, context.Background(), m); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "foreign path withdrawn", func() bool { return s.Len() == 0 })
}

func TestRefused(t *testing.T) {
	s := startSpeaker(t, Config{})
	ctx := context.Background()

	// destination-port with 80 two-byte values: 1 + 240 component bytes.
	long := []byte{0xf0, 0xf1, 5}
	for i := range 80 {
		op := byte(0x11)
		if i == 79 {
			op |= 0x80
		}
		long = append(long, op, 0x10, byte(i))
	}
	// The longest NLRI GoBGP gets right: 1 + 238 bytes (protocol ==6,
	// then destination-port with 78 two-byte values).
	short := []byte{238, 3, 0x81, 6, 5}
	for i := range 78 {
		op := byte(0x11)
		if i == 77 {
			op |= 0x80
		}
		short = append(short, op, 0x10, byte(i))
	}

	// 1 + 239 bytes: GoBGP's encoder already breaks here.
	edge := []byte{239, 3, 0x81, 6, 5}
	for i := range 77 {
		edge = append(edge, 0x11, 0x10, byte(i))
	}
	edge = append(edge, 0x01, 7, 0x81, 9)

	// IPv6 destination with offset 8: 2001:db8::/64 bits 8..63.
	off6 := []byte{0, 1, 64, 8, 0x01, 0x0d, 0xb8, 0, 0, 0, 0}
	off6[0] = byte(len(off6) - 1)

	cases := []struct {
		name    string
		f       flowspec.Family
		b       []byte
		refused bool
	}{
		{"nlri 242 bytes", flowspec.IPv4, long, true},
		{"nlri 240 bytes", flowspec.IPv4, edge, true},
		{"nlri 239 bytes", flowspec.IPv4, short, false},
		{"ipv6 offset 8", flowspec.IPv6, off6, true}, // GoBGP misreads what follows (TestGoBGPRoundTripLimits)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, n, err := flowspec.DecodeMatch(c.f, c.b)
			if err != nil || n != len(c.b) {
				t.Skipf("flowspec does not decode this NLRI (%v); nothing to refuse", err)
			}
			err = announceOne(s, ctx, flowspec.Rule{Match: m, Action: flowspec.Discard()})
			var re *RefusedError
			if c.refused {
				if !errors.As(err, &re) || !re.Terminal() {
					t.Fatalf("Announce = %v, want terminal *RefusedError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Announce (%d bytes) = %v", m.Len(), err)
			}
			eventually(t, 5*time.Second, "path in mirror", func() bool { _, ok := s.Lookup(m); return ok })
		})
	}
	if err := announceOne(s, ctx, flowspec.Rule{}); !errors.As(err, new(*RefusedError)) {
		t.Fatalf("Announce(zero rule) = %v", err)
	}
}

func TestStoppedSpeaker(t *testing.T) {
	s := New(testLogger(t), Config{ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: -1})
	if s.Paths(func(flowspec.Match, flowspec.Action) {}) {
		t.Fatal("Paths ok before Start")
	}
	r := flowspec.Rule{Match: match4(t, 1), Action: flowspec.Discard()}
	if err := announceOne(s, context.Background(), r); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Announce before Start = %v", err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := announceOne(s, context.Background(), r); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if s.Paths(func(flowspec.Match, flowspec.Action) {}) {
		t.Fatal("Paths ok after Stop")
	}
	if err := announceOne(s, context.Background(), r); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Announce after Stop = %v", err)
	}
	if err := s.Start(context.Background()); err == nil {
		t.Fatal("Start after Stop succeeded")
	}
	s.Stop() // idempotent
}

func TestConfigValidation(t *testing.T) {
	base := func() Config {
		return Config{ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: -1,
			Neighbors: []Neighbor{{Address: netip.MustParseAddr("127.0.0.2"), ASN: 65001}}}
	}
	cases := map[string]func(c *Config){
		"no asn":        func(c *Config) { c.ASN = 0 },
		"ipv6 rid":      func(c *Config) { c.RouterID = netip.MustParseAddr("::1") },
		"peer no asn":   func(c *Config) { c.Neighbors[0].ASN = 0 },
		"duplicate":     func(c *Config) { c.Neighbors = append(c.Neighbors, c.Neighbors[0]) },
		"long password": func(c *Config) { c.Neighbors[0].Password = string(make([]byte, 81)) },
		"passive, deaf": func(c *Config) { c.Neighbors[0].Passive = true },
		"hold 1s":       func(c *Config) { c.Neighbors[0].HoldTime = time.Second },
		"bad family":    func(c *Config) { c.Neighbors[0].Families = []flowspec.Family{9} },
	}
	for name, mut := range cases {
		c := base()
		mut(&c)
		if err := New(nil, c).Start(context.Background()); err == nil {
			t.Errorf("%s: Start succeeded", name)
		}
	}
}

func TestCallTimeout(t *testing.T) {
	s := New(nil, Config{CallTimeout: 20 * time.Millisecond})
	block := make(chan struct{})
	defer close(block)
	err := s.call(context.Background(), "stuck", func() error { <-block; return nil })
	var te *TimeoutError
	if !errors.As(err, &te) || te.Op != "stuck" {
		t.Fatalf("call = %v, want *TimeoutError", err)
	}
}
