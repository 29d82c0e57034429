package api

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/store"
)

// A server whose logger writes nothing (the null logger, which reports
// no level) formats no rule change: a batch logged each of its rules'
// expiry and attributes for nothing.
func TestLogChangeWithNullLoggerFormatsNothing(t *testing.T) {
	s := &Server{log: hclog.NewNullLogger()}
	r := store.Rule{ID: 7, Text: "match destination 10.0.0.1/32 then discard", ExpiresAt: time.Now().Add(time.Hour)}
	for _, lvl := range []hclog.Level{hclog.Info, hclog.Debug} {
		if n := testing.AllocsPerRun(100, func() { s.logChangeAt(lvl, r, true, "alice") }); n != 0 {
			t.Errorf("logChangeAt(%s) with the null logger: %v allocations, want none", lvl, n)
		}
	}
}
