package admit

import (
	"fmt"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

func seenRule(t *testing.T, id int64, i int, expires time.Time) store.Rule {
	t.Helper()
	r, err := flowspec.Parse(fmt.Sprintf("match destination 10.%d.%d.%d/32 then discard", i>>16&255, i>>8&255, i&255))
	if err != nil {
		t.Fatal(err)
	}
	return store.Rule{ID: id, Rule: r, Actor: "noc", State: store.Active, ExpiresAt: expires}
}

// The kept rules are bounded, a newer rule with the same match replaces
// an older one (a withdrawal by the old id never takes the newer rule's
// path off ahead of its checks), and a rule whose expiry passed is not
// used.
func TestSeenRules(t *testing.T) {
	now := time.Now()
	var c seenRules
	for i := range maxSeen + 100 {
		c.put(seenRule(t, int64(i+1), i, time.Time{}))
	}
	if n := len(c.byID); n > maxSeen || len(c.byMatch) != n {
		t.Fatalf("%d rules kept (%d matches), want at most %d", n, len(c.byMatch), maxSeen)
	}
	c.clear()
	c.put(seenRule(t, 1, 7, time.Time{}))
	c.put(seenRule(t, 2, 7, time.Time{}))
	if _, ok := c.take(1, now); ok {
		t.Error("the older rule with the same match was still kept")
	}
	if r, ok := c.take(2, now); !ok || r.ID != 2 {
		t.Errorf("take(2) = %+v, %v", r, ok)
	}
	if _, ok := c.take(2, now); ok {
		t.Error("a rule was taken twice")
	}
	c.put(seenRule(t, 3, 8, now))
	if _, ok := c.take(3, now); ok {
		t.Error("a rule whose expiry passed was used")
	}
	c.put(seenRule(t, 4, 9, time.Time{}))
	c.forget(seenRule(t, 0, 9, time.Time{}).Rule.Match)
	if _, ok := c.take(4, now); ok {
		t.Error("a forgotten rule was used")
	}
}
