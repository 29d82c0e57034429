// Package openhash is the probing half of the compact hash tables that
// hold a table of a million rules: the RIB mirror's paths (bgp) and the
// reconciler's indexes of its rows (reconcile). At that size Go's maps
// cost 36 to 57 bytes an entry (their tables had just doubled and stood
// half empty); an Index costs one tag byte and one slot an entry, kept
// between half and three quarters full.
//
// The contract:
//   - An Index[S] is an array of slots of S (a pointer, a position: what
//     leads to an entry and its key) and one tag byte per slot: 0 empty,
//     Tomb removed, else 0x80 | 7 bits of the hash of the slot's key.
//     Linear probing from the hash's home slot; a lookup stops at the
//     first empty slot, so removals leave tombs, which Put reuses and a
//     rehash drops.
//   - The caller owns keys and hashing: it passes each key's 64-bit hash
//     (of good quality in its upper 32 bits, which choose the home slot,
//     and its lower 7, the tag), an equality test for lookups, and a
//     function giving a stored slot's hash for the rehash when the table
//     grows or shrinks. Keys are unique: Put must not be given a key the
//     table holds.
//   - Occupancy, tombs counted, stays at most three quarters, so a probe
//     always ends. A rehash makes the table half full; Remove rehashes to
//     give memory back once fewer than an eighth of the slots of a table
//     of more than 1024 hold entries, and clears the tags when the last
//     entry goes.
//   - An Index is not safe for concurrent use; its zero value is empty and
//     ready to use.
package openhash

// Tomb is the tag of a removed slot.
const Tomb = 1

// Index is a hash index of slots of S (see the package comment).
type Index[S any] struct {
	tags  []uint8
	slots []S
	n     int // entries
	used  int // entries and tombs
}

// Len returns the number of entries.
func (x *Index[S]) Len() int { return x.n }

// Used returns the number of slots holding an entry or a tomb, and the
// number of slots.
func (x *Index[S]) Used() (used, size int) { return x.used, len(x.slots) }

// Reset empties x with room for about n entries (none allocated for 0).
func (x *Index[S]) Reset(n int) {
	if n == 0 {
		x.tags, x.slots = nil, nil
	} else {
		size := max(n*3/2, 8)
		x.tags, x.slots = make([]uint8, size), make([]S, size)
	}
	x.n, x.used = 0, 0
}

// home returns the first slot to probe for hash h and the tag of h.
func (x *Index[S]) home(h uint64) (int, uint8) {
	return int((h >> 32) * uint64(len(x.slots)) >> 32), 0x80 | uint8(h&0x7f)
}

// Find returns the slot of the entry with hash h for which eq is true,
// and whether there is one.
func (x *Index[S]) Find(h uint64, eq func(S) bool) (int, bool) {
	if x.n == 0 {
		return -1, false
	}
	i, tag := x.home(h)
	for {
		switch t := x.tags[i]; {
		case t == 0:
			return -1, false
		case t == tag && eq(x.slots[i]):
			return i, true
		}
		if i++; i == len(x.slots) {
			i = 0
		}
	}
}

// At returns slot i (from Find) for reading and changing in place; its
// key must stay the same.
func (x *Index[S]) At(i int) *S { return &x.slots[i] }

// Put adds s, whose key (of hash h) x does not hold; hashOf gives the
// hash of a stored slot's key, for a rehash.
func (x *Index[S]) Put(h uint64, s S, hashOf func(S) uint64) {
	if (x.used+1)*4 > len(x.slots)*3 {
		x.Rehash(hashOf)
	}
	x.insert(h, s)
}

func (x *Index[S]) insert(h uint64, s S) {
	i, tag := x.home(h)
	for x.tags[i] >= 0x80 {
		if i++; i == len(x.slots) {
			i = 0
		}
	}
	if x.tags[i] == 0 {
		x.used++
	}
	x.tags[i], x.slots[i] = tag, s
	x.n++
}

// Remove removes the entry in slot i (from Find).
func (x *Index[S]) Remove(i int, hashOf func(S) uint64) {
	var zero S
	x.tags[i], x.slots[i] = Tomb, zero
	x.n--
	switch {
	case len(x.slots) > 1024 && x.n*8 < len(x.slots):
		x.Rehash(hashOf) // most entries went: give the memory back
	case x.n == 0:
		clear(x.tags) // no tombs to step over
		x.used = 0
	}
}

// Rehash moves the entries into a table half full, without tombs: it
// grows the table, or shrinks it after removals.
func (x *Index[S]) Rehash(hashOf func(S) uint64) {
	tags, slots := x.tags, x.slots
	size := max((x.n+1)*2, 8)
	x.tags, x.slots, x.n, x.used = make([]uint8, size), make([]S, size), 0, 0
	for i, s := range slots {
		if tags[i] >= 0x80 {
			x.insert(hashOf(s), s)
		}
	}
}

// All calls fn with every entry's slot, in no particular order.
func (x *Index[S]) All(fn func(S)) {
	for i, s := range x.slots {
		if x.tags[i] >= 0x80 {
			fn(s)
		}
	}
}
