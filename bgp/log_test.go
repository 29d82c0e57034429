package bgp

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
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
