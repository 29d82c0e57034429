package e2e

import (
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
)

// BIRD's own decoding of numeric true and false (RFC 8955 §4.2.1.1 Table
// 1: lt|gt|eq = 111 true, 000 false; BIRD 2 prints the ignored value 0
// too) and of a flow label sent at 4 octets (RFC 8956 §3.7). Before the
// codec fix ribkeeper sent "port true" as 000 and BIRD showed the rule as
// "port false 0". The expected BIRD text is written by hand, not derived
// from ribkeeper's encoder.
func TestTrueFalseInBIRD(t *testing.T) {
	d, bird := setup(t)
	d.addRule("match destination 10.21.4.0/24 port true then discard")
	d.addRule("match destination 10.21.5.0/24 port false then discard")
	d.addRule("match destination 2001:db8:21::/48 label ==5 then discard")
	tru := has("flow4 { dst 10.21.4.0/24; port true 0; }", discardExt)
	fal := has("flow4 { dst 10.21.5.0/24; port false 0; }", discardExt)
	bird.WaitRoutes(t, "ft4", 10*time.Second, "port true and port false as written",
		func(m map[string]birdtest.Route) bool { return tru(m) && fal(m) })
	bird.WaitRoutes(t, "ft6", 10*time.Second, "a 4-octet flow label",
		has("flow6 { dst 2001:db8:21::/48; label 5; }", discardExt))
}
