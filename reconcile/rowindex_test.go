package reconcile

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// TestRowIndex checks both kinds of index against Go maps through a long
// random run of additions, removals and moves: tombs, growth and the
// shrinking rehash after mass removals included.
func TestRowIndex(t *testing.T) {
	matches := make([]flowspec.Match, 3000)
	for i := range matches {
		matches[i] = testRule(t, i, discard()).Match
	}
	byID, byMatch := newRowIndex(0, false), newRowIndex(0, true)
	wantID := make(map[int64]*row)
	wantMatch := make(map[flowspec.Match]*row)
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(step int) {
		t.Helper()
		if byID.len() != len(wantID) || byMatch.len() != len(wantMatch) {
			t.Fatalf("step %d: len %d/%d, want %d/%d", step, byID.len(), byMatch.len(), len(wantID), len(wantMatch))
		}
		for i := range matches {
			if got, want := byID.get(int64(i)), wantID[int64(i)]; got != want {
				t.Fatalf("step %d: get(%d) = %p, want %p", step, i, got, want)
			}
			if got, want := byMatch.getMatch(matches[i]), wantMatch[matches[i]]; got != want {
				t.Fatalf("step %d: getMatch(%d) = %p, want %p", step, i, got, want)
			}
		}
		n := 0
		byID.all(func(r *row) {
			if wantID[r.ID] != r {
				t.Fatalf("step %d: all gave row %d, not in the table", step, r.ID)
			}
			n++
		})
		if n != len(wantID) {
			t.Fatalf("step %d: all gave %d rows, want %d", step, n, len(wantID))
		}
	}
	for step := range 60000 {
		i := rng.IntN(len(matches))
		id, m := int64(i), matches[i]
		r := wantID[id]
		switch op := rng.IntN(10); {
		case r == nil && (op < 6 || step%20000 < 5000):
			r = &row{ID: id, Match: m}
			byID.put(r)
			byMatch.put(r)
			wantID[id], wantMatch[m] = r, r
		case r != nil && op < 8:
			if !byID.del(r) || !byMatch.del(r) {
				t.Fatalf("step %d: row %d not found to remove", step, id)
			}
			if byID.del(&row{ID: id, Match: m}) {
				t.Fatal("removed a pointer that was never in the table")
			}
			delete(wantID, id)
			delete(wantMatch, m)
		case r != nil:
			to := &row{ID: id, Match: m}
			if !byID.swap(r, to) || !byMatch.swap(r, to) {
				t.Fatalf("step %d: row %d not found to move", step, id)
			}
			wantID[id], wantMatch[m] = to, to
		}
		if step%997 == 0 {
			check(step)
		}
	}
	check(-1)
	// Removing every row leaves a table that finds nothing, and takes
	// rows again.
	for _, r := range wantID {
		byID.del(r)
		byMatch.del(r)
	}
	clear(wantID)
	clear(wantMatch)
	check(-2)
	r := &row{ID: 7, Match: matches[7]}
	byID.put(r)
	byMatch.put(r)
	wantID[7], wantMatch[matches[7]] = r, r
	check(-3)
	// The load stays at most three quarters.
	if used, size := byID.x.Used(); used*4 > size*3 {
		t.Fatalf("%d of %d slots used", used, size)
	}
}

// TestRowSize: the reconciler keeps a row per rule; at a million rules
// every 8 bytes of it is 8 MB.
func TestRowSize(t *testing.T) {
	if n := unsafe.Sizeof(row{}); n > 56 {
		t.Fatalf("row is %d bytes, want at most 56", n)
	}
	if s := errTextOf("peer refused"); s.String() != "peer refused" || errTextOf("") != (errText{}) || (errText{}).String() != "" {
		t.Fatal("errText does not give back its text")
	}
}
