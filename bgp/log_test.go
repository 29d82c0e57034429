package bgp

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
)

func TestGoBGPLogger(t *testing.T) {
	var buf bytes.Buffer
	h := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})
	var seen []string
	l := newGoBGPLogger(h, func(msg string, _ gobgplog.Fields) { seen = append(seen, msg) })

	if got := l.GetLevel(); got != gobgplog.InfoLevel {
		t.Fatalf("GetLevel = %v, want info", got)
	}
	l.Debug("hidden", nil)
	l.Info("Peer Up", gobgplog.Fields{"Topic": "Peer", "Key": "192.0.2.2", "State": "BGP_FSM_OPENCONFIRM"})
	l.Warn("failed to set md5", gobgplog.Fields{"Topic": "Peer", "Key": "192.0.2.2", "Err": "boom"})
	out := buf.String()
	for _, want := range []string{"[INFO]  Peer Up: peer=192.0.2.2 state=BGP_FSM_OPENCONFIRM topic=Peer", "[WARN]  failed to set md5: error=boom peer=192.0.2.2"} {
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
	defer func() {
		if recover() == nil {
			t.Error("Fatal returned")
		}
	}()
	l.Fatal("unknown msg type", nil)
}
