package bgp

import (
	"context"
	"fmt"
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

// TestDirtyBoundScalesWithTheTable: the dirty set overflows into "look
// at everything" past 65,536 Matches in a small mirror, and only past a
// quarter of the paths in a large one, so a large table's burst stays
// incremental.
func TestDirtyBoundScalesWithTheTable(t *testing.T) {
	key := func(i int) flowspec.Match {
		r, err := flowspec.Parse(fmt.Sprintf("route 10.%d.%d.%d/32 then blackhole", i>>16&255, i>>8&255, i&255))
		if err != nil {
			t.Fatal(err)
		}
		return r.Match
	}
	var m mirror
	m.init()
	m.dirtyAll = false
	for i := range maxDirty {
		m.markDirty(key(i))
	}
	if m.dirtyAll {
		t.Fatal("overflowed at its bound")
	}
	m.markDirty(key(maxDirty))
	if !m.dirtyAll {
		t.Fatal("a small mirror's dirty set went past 65,536 Matches")
	}

	const paths = 8 * maxDirty
	for i := range paths {
		m.paths.set(key(i), flowspec.Discard())
	}
	m.dirtyAll = false
	for i := range 2 * maxDirty {
		m.markDirty(key(i))
	}
	if m.dirtyAll || len(m.dirty) != 2*maxDirty {
		t.Fatalf("a mirror of %d paths overflowed at %d dirty Matches (all %v)", paths, len(m.dirty), m.dirtyAll)
	}
	for i := 2 * maxDirty; i <= paths/4; i++ {
		m.markDirty(key(i))
	}
	if !m.dirtyAll {
		t.Fatalf("no overflow past a quarter of %d paths", paths)
	}
}
