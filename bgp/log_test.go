package bgp

import (
	"bytes"
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

func TestGoBGPLogger(t *testing.T) {
	var buf bytes.Buffer
	h := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})
	var seen []string
	l := newGoBGPLogger(h, func(msg string, _ map[string]string) { seen = append(seen, msg) })

	if l.Enabled(t.Context(), slog.LevelDebug) {
		t.Fatal("debug enabled on an info logger")
	}
	l.Debug("hidden")
	l.Info("Peer Up", slog.String("Topic", "Peer"), slog.String("Key", "192.0.2.2"), slog.String("State", "BGP_FSM_OPENCONFIRM"))
	l.With(slog.String("Topic", "Peer")).Warn("failed to set md5", slog.String("Key", "192.0.2.2"), slog.String("Err", "boom"))
	out := buf.String()
	for _, want := range []string{"[INFO]  Peer Up: peer=192.0.2.2 state=BGP_FSM_OPENCONFIRM topic=Peer", "[WARN]  failed to set md5: error=boom peer=192.0.2.2 topic=Peer"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hidden") {
		t.Errorf("debug message logged at info level")
	}
	if len(seen) != 1 || seen[0] != "failed to set md5" {
		t.Errorf("observed %v", seen)
	}
}

// The stop line names the routers that keep the rules through a restart
// (graceful restart on) and those that flush them, instead of one
// graceful_restart=true for every neighbor.
func TestStopLogNamesGracefulRestartPeers(t *testing.T) {
	var buf syncBuffer
	cfg := Config{ASN: 65000, RouterID: netip.MustParseAddr("192.0.2.1"), ListenPort: -1, Neighbors: []Neighbor{
		{Address: netip.MustParseAddr("127.0.0.2"), ASN: 65001, Port: 1, Families: []flowspec.Family{flowspec.IPv4}, GracefulRestart: true},
		{Address: netip.MustParseAddr("127.0.0.3"), ASN: 65002, Port: 1, Families: []flowspec.Family{flowspec.IPv4}},
	}}
	s := New(hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info}), cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	out := buf.String()
	if !strings.Contains(out, "speaker stopped: graceful_restart_peers=127.0.0.2 flushing_peers=127.0.0.3") {
		t.Errorf("stop line does not name the peers by their graceful restart:\n%s", out)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
