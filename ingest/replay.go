package ingest

import (
	"container/heap"
	"crypto/sha256"
	"sync"
	"time"
)

// replayCache remembers the signatures of a webhook source's accepted
// requests until their timestamp leaves the window (after which the
// timestamp check refuses them anyway). It holds at most size entries:
// when every one is still inside the window, a new request is refused
// rather than the cache growing, and told when the oldest leaves.
type replayCache struct {
	mu   sync.Mutex
	size int
	seen map[[sha256.Size]byte]struct{}
	exp  expiryHeap // the same entries, soonest expiry first
}

type expiring struct {
	key [sha256.Size]byte
	at  time.Time
}

type expiryHeap []expiring

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiring)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newReplayCache(size int) *replayCache {
	return &replayCache{size: size, seen: map[[sha256.Size]byte]struct{}{}}
}

type replayResult int

const (
	replayNew  replayResult = iota // remembered now
	replaySeen                     // already there: a replay
	replayFull                     // full of entries still in the window
)

// add remembers key until expires, unless it is already there or the
// cache is full; for replayFull, retry is how long until the oldest
// entry leaves.
func (c *replayCache) add(key [sha256.Size]byte, expires, now time.Time) (retry time.Duration, _ replayResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.exp) > 0 && !c.exp[0].at.After(now) {
		delete(c.seen, heap.Pop(&c.exp).(expiring).key)
	}
	if _, ok := c.seen[key]; ok {
		return 0, replaySeen
	}
	if len(c.seen) >= c.size {
		return max(c.exp[0].at.Sub(now), time.Second), replayFull
	}
	c.seen[key] = struct{}{}
	heap.Push(&c.exp, expiring{key: key, at: expires})
	return 0, replayNew
}

// len is the number of signatures remembered.
func (c *replayCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}
