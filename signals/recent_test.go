package signals

import (
	"context"
	"errors"
	"net/netip"
	"testing"
)

func TestRecentKeepsTheLastNewestFirst(t *testing.T) {
	rc := NewRecent(3)
	if got := rc.List(nil, 0); len(got) != 0 {
		t.Fatalf("empty ring lists %d", len(got))
	}
	for i := range 5 {
		rc.Add(Record{Via: "webhook", Reason: string(rune('a' + i))})
	}
	got := rc.List(nil, 0)
	if len(got) != 3 || got[0].Reason != "e" || got[2].Reason != "c" || got[0].Seq != 5 {
		t.Fatalf("ring = %+v, want e, d, c with seq 5 first", got)
	}
	if got := rc.List(func(r Record) bool { return r.Reason != "d" }, 1); len(got) != 1 || got[0].Reason != "e" {
		t.Fatalf("filtered, limited = %+v", got)
	}
}

type refuser struct{ err error }

func (r refuser) Accept(context.Context, Signal) error { return r.err }

func TestRecordingRecordsTheOutcome(t *testing.T) {
	rc := NewRecent(0)
	s := Signal{Source: "hook", Target: netip.MustParsePrefix("192.0.2.1/32"), State: Start}
	if err := rc.Recording(refuser{}, "webhook", nil).Accept(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	no := errors.New("out of scope")
	if err := rc.Recording(refuser{no}, "webhook", nil).Accept(context.Background(), s); err != no {
		t.Fatalf("error %v, want the sink's", err)
	}
	got := rc.List(nil, 0)
	if len(got) != 2 || got[0].Accepted || got[0].Reason != "out of scope" || !got[1].Accepted || got[1].Signal.At.IsZero() {
		t.Fatalf("records = %+v", got)
	}
}
