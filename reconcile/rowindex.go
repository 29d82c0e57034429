package reconcile

import (
	"hash/maphash"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/openhash"
)

// rowIndex is a hash table of row pointers keyed by the row's ID, or by
// its Match (byMatch): an openhash.Index of *row, 12 to 18 bytes an
// entry where Go's maps cost 36 (map[int64]*row) and 54
// (map[Match]int64) bytes at a million rules (see package openhash). The
// zero rowIndex is an empty table keyed by ID.
//
// Keys are unique: put must not be given a key the table holds. A row's
// key must not change while the row is in the table. The table shrinks
// when most of its rows are removed.
type rowIndex struct {
	x     openhash.Index[*row]
	match bool
	seed  maphash.Seed
}

// newRowIndex returns a table for about n rows keyed by Match (byMatch)
// or by ID.
func newRowIndex(n int, byMatch bool) rowIndex {
	x := rowIndex{match: byMatch}
	if byMatch {
		x.seed = maphash.MakeSeed()
	}
	x.x.Reset(max(n, 1))
	return x
}

// len returns the number of rows in the table.
func (x *rowIndex) len() int { return x.x.Len() }

// size returns the number of slots of the table.
func (x *rowIndex) size() int { _, n := x.x.Used(); return n }

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

// hashOf is the hash of r's key.
func (x *rowIndex) hashOf(r *row) uint64 {
	if x.match {
		return x.hashMatch(r.Match)
	}
	return hashID(r.ID)
}

// get returns the row with ID id, nil if none (an index by ID only).
func (x *rowIndex) get(id int64) *row {
	if i, ok := x.x.Find(hashID(id), func(r *row) bool { return r.ID == id }); ok {
		return *x.x.At(i)
	}
	return nil
}

// getMatch returns the row of Match m, nil if none (an index by Match
// only).
func (x *rowIndex) getMatch(m flowspec.Match) *row {
	if i, ok := x.x.Find(x.hashMatch(m), func(r *row) bool { return r.Match == m }); ok {
		return *x.x.At(i)
	}
	return nil
}

// put adds r, whose key the table does not hold.
func (x *rowIndex) put(r *row) { x.x.Put(x.hashOf(r), r, x.hashOf) }

// find returns the slot of r (the pointer, not another row of its key).
func (x *rowIndex) find(r *row) (int, bool) {
	return x.x.Find(x.hashOf(r), func(s *row) bool { return s == r })
}

// del removes r (the pointer, not another row of its key) and reports
// whether it was there.
func (x *rowIndex) del(r *row) bool {
	i, ok := x.find(r)
	if ok {
		x.x.Remove(i, x.hashOf)
	}
	return ok
}

// swap puts to, a copy of from with the same key, in from's slot, and
// reports whether from was there.
func (x *rowIndex) swap(from, to *row) bool {
	i, ok := x.find(from)
	if ok {
		*x.x.At(i) = to
	}
	return ok
}

// all calls fn with every row of the table, in no particular order.
func (x *rowIndex) all(fn func(*row)) { x.x.All(fn) }
