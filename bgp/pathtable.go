package bgp

import (
	"hash/maphash"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// pathTable is the mirror's paths: each Match's action. The entries lie
// in one array, in no order, found through a hash index of 4-byte
// positions and 1-byte tags with open addressing, kept between half and
// three quarters full: about 34 bytes a path at a million against 57 for
// a map[flowspec.Match]flowspec.Action, whose tables at that size had
// just split and stood half empty. Removing a path moves the last entry
// into its place. The zero pathTable is empty and ready to use.
type pathTable struct {
	ents []pathEntry
	// tags[i] is 0 for an empty slot, tomb for a removed one, else
	// 0x80 | 7 bits of the hash of the Match of ents[pos[i]].
	tags []uint8
	pos  []int32
	used int // slots not empty: entries and tombs
	seed maphash.Seed
}

type pathEntry struct {
	m flowspec.Match
	a flowspec.Action
}

const tomb = 1

// maxPaths bounds the table: positions are int32.
const maxPaths = 1<<31 - 1

func (t *pathTable) len() int { return len(t.ents) }

func (t *pathTable) hash(m flowspec.Match) uint64 {
	if t.seed == (maphash.Seed{}) {
		t.seed = maphash.MakeSeed()
	}
	return maphash.Comparable(t.seed, m)
}

// home returns the first slot to probe for hash h and the tag of h.
func (t *pathTable) home(h uint64) (int, uint8) {
	return int((h >> 32) * uint64(len(t.tags)) >> 32), 0x80 | uint8(h&0x7f)
}

// slot returns the slot of m and whether m is there; when it is not, the
// slot is where m's probe ended (the first empty one).
func (t *pathTable) slot(m flowspec.Match, h uint64) (int, bool) {
	i, tag := t.home(h)
	for {
		switch g := t.tags[i]; {
		case g == 0:
			return i, false
		case g == tag && t.ents[t.pos[i]].m == m:
			return i, true
		}
		if i++; i == len(t.tags) {
			i = 0
		}
	}
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
	return t.ents[t.pos[i]].a, true
}

// set records a as m's action and returns the action m had, if any.
func (t *pathTable) set(m flowspec.Match, a flowspec.Action) (old flowspec.Action, had bool) {
	if (t.used+1)*4 > len(t.tags)*3 {
		t.rehash()
	}
	h := t.hash(m)
	if len(t.ents) > 0 {
		if i, ok := t.slot(m, h); ok {
			e := &t.ents[t.pos[i]]
			old, e.a = e.a, a
			return old, true
		}
	}
	if len(t.ents) == maxPaths {
		panic("bgp: more than 2^31-1 paths in the mirror")
	}
	t.ents = append(t.ents, pathEntry{m: m, a: a})
	t.place(h, int32(len(t.ents)-1))
	return flowspec.Action{}, false
}

// place indexes the entry at position p, whose hash is h: the first
// empty or removed slot of its probe.
func (t *pathTable) place(h uint64, p int32) {
	i, tag := t.home(h)
	for t.tags[i] >= 0x80 {
		if i++; i == len(t.tags) {
			i = 0
		}
	}
	if t.tags[i] == 0 {
		t.used++
	}
	t.tags[i], t.pos[i] = tag, p
}

// rehash rebuilds the index half full, without tombs.
func (t *pathTable) rehash() {
	size := max((len(t.ents)+1)*2, 8)
	t.tags, t.pos, t.used = make([]uint8, size), make([]int32, size), 0
	for p := range t.ents {
		t.place(t.hash(t.ents[p].m), int32(p))
	}
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
	p := t.pos[i]
	t.tags[i] = tomb
	last := int32(len(t.ents) - 1)
	if p != last {
		// The last entry fills the hole; its slot follows it.
		moved := t.ents[last]
		j, _ := t.slot(moved.m, t.hash(moved.m))
		t.pos[j] = p
		t.ents[p] = moved
	}
	t.ents[last] = pathEntry{}
	t.ents = t.ents[:last]
	switch {
	case len(t.ents) == 0:
		t.reset()
	case cap(t.ents) > 1024 && len(t.ents) < cap(t.ents)/4:
		// Most paths went: give their memory back.
		t.ents = append(make([]pathEntry, 0, len(t.ents)*2), t.ents...)
		t.rehash()
	}
	return true
}

// reset empties the table and gives its memory back.
func (t *pathTable) reset() {
	t.ents, t.tags, t.pos, t.used = nil, nil, nil, 0
}

// all calls fn with every path, in no particular order.
func (t *pathTable) all(fn func(flowspec.Match, flowspec.Action)) {
	for _, e := range t.ents {
		fn(e.m, e.a)
	}
}
