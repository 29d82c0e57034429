package bgp

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// TestDrainDirty checks the mirror's record of changed Matches: complete
// only between rebuilds, listing exactly the Matches whose path changed.
func TestDrainDirty(t *testing.T) {
	s := startSpeaker(t, Config{})
	ctx := context.Background()
	drain := func() ([]flowspec.Match, bool) {
		var ms []flowspec.Match
		_, complete := s.DrainDirty(func(m flowspec.Match) { ms = append(ms, m) })
		return ms, complete
	}
	if _, complete := drain(); complete {
		t.Fatal("first drain after Start is complete; want a full comparison")
	}
	if ms, complete := drain(); !complete || len(ms) != 0 {
		t.Fatalf("idle drain = %v, %v; want complete and empty", ms, complete)
	}

	a, b := match4(t, 1), match6(t, 2)
	for _, m := range []flowspec.Match{a, b} {
		if err := announceOne(s, ctx, flowspec.Rule{Match: m, Action: flowspec.Discard()}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, "both in the mirror", func() bool { return s.Len() == 2 })
	ms, complete := drain()
	if want := map[flowspec.Match]bool{a: true, b: true}; !complete || !maps.Equal(matchSet(ms), want) {
		t.Fatalf("drain after two adds = %v, %v", ms, complete)
	}
	if act, present, ok := s.Path(a); !ok || !present || act != flowspec.Discard() {
		t.Fatalf("Path(a) = %v %v %v", act, present, ok)
	}

	// The same path again changes nothing; a withdrawal marks its Match.
	gen := s.Generation()
	if err := announceOne(s, ctx, flowspec.Rule{Match: a, Action: flowspec.Discard()}); err != nil {
		t.Fatal(err)
	}
	if err := withdrawOne(s, ctx, b); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "withdrawal in the mirror", func() bool { return s.Len() == 1 })
	if ms, complete := drain(); !complete || !slices.Equal(ms, []flowspec.Match{b}) || s.Generation() == gen {
		t.Fatalf("drain after a withdrawal = %v, %v", ms, complete)
	}
	if _, present, ok := s.Path(b); !ok || present {
		t.Fatalf("Path(b) after withdrawal: present %v ok %v", present, ok)
	}

	// A rebuilt mirror cannot list its changes.
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if _, complete := drain(); complete {
		t.Fatal("drain after Restart is complete; want a full comparison")
	}
	if ms, complete := drain(); !complete || len(ms) != 0 {
		t.Fatalf("drain after the rebuild was reported = %v, %v", ms, complete)
	}

	// Stopped: not initialised, never complete.
	s.Stop()
	if _, complete := drain(); complete {
		t.Fatal("drain of a stopped speaker is complete")
	}
	if _, _, ok := s.Path(a); ok {
		t.Fatal("Path of a stopped speaker reports an initialised mirror")
	}
}

func matchSet(ms []flowspec.Match) map[flowspec.Match]bool {
	out := make(map[flowspec.Match]bool, len(ms))
	for _, m := range ms {
		out[m] = true
	}
	return out
}
