package openhash

import (
	"math/rand/v2"
	"testing"
)

// hash64 spreads a key over 64 bits (splitmix64's finalizer).
func hash64(k uint64) uint64 {
	k ^= k >> 30
	k *= 0xbf58476d1ce4e5b9
	k ^= k >> 27
	k *= 0x94d049bb133111eb
	return k ^ k>>31
}

// TestIndexAgainstMap runs an Index of keys (the slot is the key) against
// a Go map through additions and removals in phases (growth, mass
// removal and its shrink, emptying, mixed), checking lookups, All, the
// count and the occupancy bound as it goes.
func TestIndexAgainstMap(t *testing.T) {
	var x Index[uint64]
	want := map[uint64]bool{}
	find := func(k uint64) (int, bool) { return x.Find(hash64(k), func(s uint64) bool { return s == k }) }
	check := func(step int) {
		t.Helper()
		if x.Len() != len(want) {
			t.Fatalf("step %d: Len %d, want %d", step, x.Len(), len(want))
		}
		for k := range uint64(4000) {
			i, ok := find(k)
			if ok != want[k] || ok && *x.At(i) != k {
				t.Fatalf("step %d: Find(%d) = %d %v, want %v", step, k, i, ok, want[k])
			}
		}
		n := 0
		x.All(func(s uint64) {
			if !want[s] {
				t.Fatalf("step %d: All gave %d, not in the table", step, s)
			}
			n++
		})
		if n != len(want) {
			t.Fatalf("step %d: All gave %d entries, want %d", step, n, len(want))
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for step := range 80000 {
		k := rng.Uint64N(4000)
		addBias := [4]int{9, 1, 0, 5}[step/20000]
		if rng.IntN(10) < addBias {
			if !want[k] {
				x.Put(hash64(k), k, hash64)
				want[k] = true
			}
		} else if i, ok := find(k); ok {
			x.Remove(i, hash64)
			delete(want, k)
		}
		if used, size := x.Used(); used*4 > size*3 {
			t.Fatalf("step %d: %d of %d slots used", step, used, size)
		}
		if step%1999 == 0 {
			check(step)
		}
	}
	check(-1)
	// Emptied, the table gives its memory back.
	for k := range want {
		i, _ := find(k)
		x.Remove(i, hash64)
		delete(want, k)
	}
	check(-2)
	if _, size := x.Used(); size > 1024 {
		t.Fatalf("an emptied table kept %d slots", size)
	}
}

// Slots changed in place through At are what Find and All see after.
func TestIndexAt(t *testing.T) {
	type ent struct{ key, val int }
	var x Index[ent]
	h := func(e ent) uint64 { return hash64(uint64(e.key)) }
	for k := range 100 {
		x.Put(h(ent{key: k}), ent{key: k}, h)
	}
	i, ok := x.Find(hash64(42), func(e ent) bool { return e.key == 42 })
	if !ok {
		t.Fatal("42 not found")
	}
	x.At(i).val = 7
	sum := 0
	x.All(func(e ent) { sum += e.val })
	if sum != 7 {
		t.Fatalf("All saw values summing to %d, want 7", sum)
	}
	var empty Index[ent]
	if _, ok := empty.Find(1, func(ent) bool { return true }); ok {
		t.Fatal("the zero Index found an entry")
	}
}
