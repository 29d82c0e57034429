package bgp

import (
	"context"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"github.com/ribkeeper/ribkeeper/flowspec"
)

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// testLogger logs warnings and errors into the test log.
func testLogger(t testing.TB) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "bgp", Output: testWriter{t}, Level: hclog.Warn})
}

// freePort returns a TCP port that was free on addr a moment ago, below
// the kernel's ephemeral range so that no outgoing connection takes it
// before the test binds it (birdtest.FreePort).
func freePort(t testing.TB, addr string) int32 {
	t.Helper()
	return int32(birdtest.FreePort(t, addr))
}

// startSpeaker starts a speaker without a listener and stops it at the end
// of the test.
func startSpeaker(t testing.TB, cfg Config) *Speaker {
	t.Helper()
	if cfg.ASN == 0 {
		cfg.ASN = 65000
	}
	if !cfg.RouterID.IsValid() {
		cfg.RouterID = netip.MustParseAddr("192.0.2.1")
	}
	if cfg.ListenPort == 0 {
		cfg.ListenPort = -1
	}
	s := New(testLogger(t), cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// match4 is "destination 10.i.i.i/32 protocol ==17": built from wire bytes
// so the tests depend on flowspec's codec only.
func match4(t testing.TB, i int) flowspec.Match {
	t.Helper()
	b := []byte{9, 1, 32, 10, 0, 0, 0, 3, 0x81, 17}
	binary.BigEndian.PutUint32(b[3:7], 10<<24|uint32(i))
	return decode(t, flowspec.IPv4, b)
}

// match6 is "destination 2001:db8::i/128 next-header ==6".
func match6(t testing.TB, i int) flowspec.Match {
	t.Helper()
	b := []byte{0, 1, 128, 0}
	a := netip.MustParseAddr("2001:db8::").As16()
	binary.BigEndian.PutUint32(a[12:], uint32(i))
	b = append(b, a[:]...)
	b = append(b, 3, 0x81, 6)
	b[0] = byte(len(b) - 1)
	return decode(t, flowspec.IPv6, b)
}

func decode(t testing.TB, f flowspec.Family, b []byte) flowspec.Match {
	t.Helper()
	m, n, err := flowspec.DecodeMatch(f, b)
	if err != nil || n != len(b) {
		t.Fatalf("DecodeMatch(% x) = %v, %d, %v", b, m, n, err)
	}
	return m
}

// eventually polls cond until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	d = max(d, 30*time.Second) // when to give up, never less than 30 s: a loaded machine is slow, not wrong
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mirrorOf(s *Speaker) map[flowspec.Match]flowspec.Action {
	out := make(map[flowspec.Match]flowspec.Action)
	if !s.Paths(func(m flowspec.Match, a flowspec.Action) { out[m] = a }) {
		return nil
	}
	return out
}

// announceOne announces one rule through the batch API.
func announceOne(s *Speaker, ctx context.Context, r flowspec.Rule) error {
	return s.Announce(ctx, []flowspec.Rule{r})[0]
}

// withdrawOne withdraws one match through the batch API.
func withdrawOne(s *Speaker, ctx context.Context, m flowspec.Match) error {
	return s.Withdraw(ctx, []flowspec.Match{m})[0]
}
