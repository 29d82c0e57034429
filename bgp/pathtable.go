package bgp

import (
	"hash/maphash"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/openhash"
)

// pathTable is the mirror's paths: each Match's action. The entries lie
// in one array, in no order, found through an openhash.Index of their
// 4-byte positions: about 34 bytes a path at a million against 57 for a
// map[flowspec.Match]flowspec.Action, whose tables at that size had just
// split and stood half empty. Removing a path moves the last entry into
// its place. The zero pathTable is empty and ready to use.
type pathTable struct {
	ents []pathEntry
	pos  openhash.Index[int32]
	seed maphash.Seed
}

type pathEntry struct {
	m flowspec.Match
	a flowspec.Action
}

// maxPaths bounds the table: positions are int32.
const maxPaths = 1<<31 - 1

func (t *pathTable) len() int { return len(t.ents) }

func (t *pathTable) hash(m flowspec.Match) uint64 {
	if t.seed == (maphash.Seed{}) {
		t.seed = maphash.MakeSeed()
	}
	return maphash.Comparable(t.seed, m)
}

// hashAt is the hash of the Match at position p.
func (t *pathTable) hashAt(p int32) uint64 { return t.hash(t.ents[p].m) }

// slot returns the index slot of m, whose hash is h, and whether m is
// there.
func (t *pathTable) slot(m flowspec.Match, h uint64) (int, bool) {
	return t.pos.Find(h, func(p int32) bool { return t.ents[p].m == m })
}

// get returns m's action and whether m has a path.
func (t *pathTable) get(m flowspec.Match) (flowspec.Action, bool) {
	if len(t.ents) == 0 {
		return flowspec.Action{}, false
	}
	i, ok := t.slot(m, t.hash(m))
	if !ok {
		return flowspec.Action{}, false
	}
	return t.ents[*t.pos.At(i)].a, true
}

// set records a as m's action and returns the action m had, if any. At
// maxPaths paths a new one is not recorded (had is false): a mirror of
// two billion paths is out of reach of the memory it would take.
func (t *pathTable) set(m flowspec.Match, a flowspec.Action) (old flowspec.Action, had bool) {
	h := t.hash(m)
	if i, ok := t.slot(m, h); ok {
		e := &t.ents[*t.pos.At(i)]
		old, e.a = e.a, a
		return old, true
	}
	if len(t.ents) == maxPaths {
		return flowspec.Action{}, false
	}
	t.ents = append(t.ents, pathEntry{m: m, a: a})
	t.pos.Put(h, int32(len(t.ents)-1), t.hashAt)
	return flowspec.Action{}, false
}

// del removes m's path and reports whether there was one.
func (t *pathTable) del(m flowspec.Match) bool {
	if len(t.ents) == 0 {
		return false
	}
	i, ok := t.slot(m, t.hash(m))
	if !ok {
		return false
	}
	p := *t.pos.At(i)
	last := int32(len(t.ents) - 1)
	if p != last {
		// The last entry fills the hole; its slot follows it.
		moved := t.ents[last]
		j, _ := t.slot(moved.m, t.hash(moved.m))
		*t.pos.At(j) = p
		t.ents[p] = moved
	}
	// Removed after the move: a rehash it starts sees only live
	// positions.
	t.ents[last] = pathEntry{}
	t.ents = t.ents[:last]
	t.pos.Remove(i, t.hashAt)
	switch {
	case len(t.ents) == 0:
		t.reset()
	case cap(t.ents) > 1024 && len(t.ents) < cap(t.ents)/4:
		// Most paths went: give their memory back.
		t.ents = append(make([]pathEntry, 0, len(t.ents)*2), t.ents...)
	}
	return true
}

// reset empties the table and gives its memory back.
func (t *pathTable) reset() {
	t.ents = nil
	t.pos.Reset(0)
}

// all calls fn with every path, in no particular order.
func (t *pathTable) all(fn func(flowspec.Match, flowspec.Action)) {
	for _, e := range t.ents {
		fn(e.m, e.a)
	}
}
