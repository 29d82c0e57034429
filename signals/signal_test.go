package signals

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func good() Signal {
	return Signal{Source: "fnm", Target: netip.MustParsePrefix("192.0.2.10/32"), State: Start, At: time.Unix(0, 0)}
}

func TestCheck(t *testing.T) {
	if err := good().Check(); err != nil {
		t.Fatalf("good signal refused: %v", err)
	}
	cases := map[string]func(*Signal){
		"source":     func(s *Signal) { s.Source = "" },
		"target":     func(s *Signal) { s.Target = netip.Prefix{} },
		"host bits":  func(s *Signal) { s.Target = netip.MustParsePrefix("192.0.2.10/24") },
		"ports":      func(s *Signal) { s.Vector.DstPorts = make([]uint16, MaxPorts+1) },
		"confidence": func(s *Signal) { s.Confidence = 1.5 },
		"attack id":  func(s *Signal) { s.AttackID = strings.Repeat("x", MaxIDBytes+1) },
		"detail":     func(s *Signal) { s.Detail = strings.Repeat("x", MaxDetailBytes+1) },
		"state":      func(s *Signal) { s.State = "begun" },
	}
	for name, spoil := range cases {
		s := good()
		spoil(&s)
		if err := s.Check(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Check = %v, want ErrInvalid", name, err)
		}
	}
}

func TestVectorKey(t *testing.T) {
	a := Vector{Protocol: "UDP", DstPorts: []uint16{53, 123}}
	b := Vector{Protocol: "udp", DstPorts: []uint16{53, 123}}
	c := Vector{Protocol: "udp", SrcPorts: []uint16{53, 123}}
	if a.Key() != b.Key() {
		t.Errorf("case changes the key: %q vs %q", a.Key(), b.Key())
	}
	if a.Key() == c.Key() {
		t.Errorf("source and destination ports share a key %q", a.Key())
	}
}
