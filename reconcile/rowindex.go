package reconcile

import (
	"hash/maphash"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// rowIndex is a hash table of row pointers keyed by the row's ID, or by
// its Match (byMatch), with open addressing: a slot is a pointer and a
// byte of the key's hash, and the table is kept between half and three
// quarters full, so an entry costs 12 to 18 bytes. Go's maps cost 36
// (map[int64]*row) and 54 (map[Match]int64) bytes an entry at a million
// rules: at that size their tables had just split and stood half empty.
// The zero rowIndex is an empty table keyed by ID.
//
// Keys are unique: put must not be given a key the table holds. A row's
// key must not change while the row is in the table. The table shrinks
// when most of its rows are removed.
type rowIndex struct {
	// tags[i] is 0 for an empty slot, tomb for a removed one, else
	// 0x80 | 7 bits of the hash of slots[i]'s key.
	tags  []uint8
	slots []*row
	n     int // entries
	used  int // entries and tombs
	match bool
	seed  maphash.Seed
}

const tomb = 1

// newRowIndex returns a table for about n rows keyed by Match (byMatch)
// or by ID.
func newRowIndex(n int, byMatch bool) rowIndex {
	x := rowIndex{match: byMatch}
	if byMatch {
		x.seed = maphash.MakeSeed()
	}
	x.alloc(n * 3 / 2)
	return x
}

func (x *rowIndex) alloc(size int) {
	size = max(size, 8)
	x.tags, x.slots = make([]uint8, size), make([]*row, size)
	x.n, x.used = 0, 0
}

// len returns the number of rows in the table.
func (x *rowIndex) len() int { return x.n }

func hashID(id int64) uint64 {
	// splitmix64's finalizer: ids are dense, their hashes must not be.
	h := uint64(id)
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

func (x *rowIndex) hashMatch(m flowspec.Match) uint64 { return maphash.Comparable(x.seed, m) }

func (x *rowIndex) hashOf(r *row) uint64 {
	if x.match {
		return x.hashMatch(r.Match)
	}
	return hashID(r.ID)
}

// home returns the first slot to probe for hash h and the tag of h.
func (x *rowIndex) home(h uint64) (int, uint8) {
	return int((h >> 32) * uint64(len(x.slots)) >> 32), 0x80 | uint8(h&0x7f)
}

// get returns the row with ID id, nil if none (an index by ID only).
func (x *rowIndex) get(id int64) *row {
	if x.n == 0 {
		return nil
	}
	i, tag := x.home(hashID(id))
	for {
		switch t := x.tags[i]; {
		case t == 0:
			return nil
		case t == tag && x.slots[i].ID == id:
			return x.slots[i]
		}
		if i++; i == len(x.slots) {
			i = 0
		}
	}
}

// getMatch returns the row of Match m, nil if none (an index by Match
// only).
func (x *rowIndex) getMatch(m flowspec.Match) *row {
	if x.n == 0 {
		return nil
	}
	i, tag := x.home(x.hashMatch(m))
	for {
		switch t := x.tags[i]; {
		case t == 0:
			return nil
		case t == tag && x.slots[i].Match == m:
			return x.slots[i]
		}
		if i++; i == len(x.slots) {
			i = 0
		}
	}
}

// put adds r, whose key the table does not hold.
func (x *rowIndex) put(r *row) {
	if (x.used+1)*4 > len(x.slots)*3 {
		x.rehash()
	}
	x.insert(r, x.hashOf(r))
}

func (x *rowIndex) insert(r *row, h uint64) {
	i, tag := x.home(h)
	for x.tags[i] >= 0x80 {
		if i++; i == len(x.slots) {
			i = 0
		}
	}
	if x.tags[i] == 0 {
		x.used++
	}
	x.tags[i], x.slots[i] = tag, r
	x.n++
}

// rehash moves the entries into a table half full, dropping the tombs:
// it grows the table, or shrinks it after removals.
func (x *rowIndex) rehash() {
	tags, slots := x.tags, x.slots
	x.alloc((x.n + 1) * 2)
	for i, r := range slots {
		if tags[i] >= 0x80 {
			x.insert(r, x.hashOf(r))
		}
	}
}

// find returns the slot of r, -1 if r is not in the table.
func (x *rowIndex) find(r *row) int {
	if x.n == 0 {
		return -1
	}
	i, tag := x.home(x.hashOf(r))
	for {
		switch t := x.tags[i]; {
		case t == 0:
			return -1
		case t == tag && x.slots[i] == r:
			return i
		}
		if i++; i == len(x.slots) {
			i = 0
		}
	}
}

// del removes r (the pointer, not another row of its key) and reports
// whether it was there.
func (x *rowIndex) del(r *row) bool {
	i := x.find(r)
	if i < 0 {
		return false
	}
	x.tags[i], x.slots[i] = tomb, nil
	x.n--
	switch {
	case len(x.slots) > 1024 && x.n*8 < len(x.slots):
		x.rehash() // most rows went: give the memory back
	case x.n == 0:
		clear(x.tags) // no tombs to step over
		x.used = 0
	}
	return true
}

// swap puts to, a copy of from with the same key, in from's slot, and
// reports whether from was there.
func (x *rowIndex) swap(from, to *row) bool {
	i := x.find(from)
	if i < 0 {
		return false
	}
	x.slots[i] = to
	return true
}

// all calls fn with every row of the table, in no particular order.
func (x *rowIndex) all(fn func(*row)) {
	for i, r := range x.slots {
		if x.tags[i] >= 0x80 {
			fn(r)
		}
	}
}
