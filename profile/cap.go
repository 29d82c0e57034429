package profile

import (
	"container/heap"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Cap chooses the rules a router with a rule cap gets: of the rules its
// profile accepts, the first Max in RFC 8955 precedence order
// (flowspec.Compare), the order in which the router itself applies them.
// So the choice depends on the set of rules only, never on the order they
// were added or on restarts, and the rules kept are those the router would
// have applied first anyway: more specific destinations before less
// specific ones, rules with a destination before rules without. A new
// rule that sorts before the last one kept displaces that one.
//
// Add and Remove cost O(log n); n is every accepted rule, not just the
// Max kept. A Cap is not safe for concurrent use.
type Cap struct {
	max int
	in  capHeap // the kept rules, the last in precedence order on top
	out capHeap // the others, the first in precedence order on top
	at  map[flowspec.Match]*capEntry
}

type capEntry struct {
	m   flowspec.Match
	in  bool
	idx int
}

// NewCap returns an empty Cap keeping at most max rules (max > 0).
func NewCap(max int) *Cap {
	return &Cap{
		max: max,
		in:  capHeap{worstFirst: true},
		out: capHeap{},
		at:  make(map[flowspec.Match]*capEntry),
	}
}

// Max is the cap.
func (c *Cap) Max() int { return c.max }

// Len is the number of rules added and not removed.
func (c *Cap) Len() int { return len(c.at) }

// Kept reports whether m is among the rules kept.
func (c *Cap) Kept(m flowspec.Match) bool {
	e, ok := c.at[m]
	return ok && e.in
}

// Has reports whether m was added (kept or not).
func (c *Cap) Has(m flowspec.Match) bool {
	_, ok := c.at[m]
	return ok
}

// Add adds m. It returns the rules whose kept state changed, other than m
// itself: a rule m displaced from the kept set (at most one). Adding a
// rule twice changes nothing.
func (c *Cap) Add(m flowspec.Match) (displaced []flowspec.Match) {
	if _, ok := c.at[m]; ok {
		return nil
	}
	e := &capEntry{m: m}
	c.at[m] = e
	if c.in.Len() < c.max {
		e.in = true
		heap.Push(&c.in, e)
		return nil
	}
	worst := c.in.es[0]
	if flowspec.Compare(m, worst.m) < 0 {
		heap.Pop(&c.in)
		worst.in = false
		heap.Push(&c.out, worst)
		e.in = true
		heap.Push(&c.in, e)
		return []flowspec.Match{worst.m}
	}
	heap.Push(&c.out, e)
	return nil
}

// Remove removes m. It returns the rules whose kept state changed, other
// than m: the rule that took m's place in the kept set (at most one).
func (c *Cap) Remove(m flowspec.Match) (promoted []flowspec.Match) {
	e, ok := c.at[m]
	if !ok {
		return nil
	}
	delete(c.at, m)
	if !e.in {
		heap.Remove(&c.out, e.idx)
		return nil
	}
	heap.Remove(&c.in, e.idx)
	if c.out.Len() == 0 {
		return nil
	}
	best := heap.Pop(&c.out).(*capEntry)
	best.in = true
	heap.Push(&c.in, best)
	return []flowspec.Match{best.m}
}

// capHeap is a heap of entries by precedence: the first rule on top, or
// with worstFirst the last.
type capHeap struct {
	es         []*capEntry
	worstFirst bool
}

func (h capHeap) Len() int { return len(h.es) }
func (h capHeap) Less(i, j int) bool {
	c := flowspec.Compare(h.es[i].m, h.es[j].m)
	if h.worstFirst {
		return c > 0
	}
	return c < 0
}
func (h capHeap) Swap(i, j int) {
	h.es[i], h.es[j] = h.es[j], h.es[i]
	h.es[i].idx, h.es[j].idx = i, j
}
func (h *capHeap) Push(x any) {
	e := x.(*capEntry)
	e.idx = len(h.es)
	h.es = append(h.es, e)
}
func (h *capHeap) Pop() any {
	n := len(h.es)
	e := h.es[n-1]
	h.es[n-1] = nil
	h.es = h.es[:n-1]
	return e
}
