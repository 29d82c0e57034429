package api

import "testing"

// A write or a pass wakes the event stream's loop only while a stream is
// open: with none, Run would read nothing, and the wake-up costs a turn
// on the cores the next write's early announcement needs. The first
// stream to open wakes it, and so do writes while it is open.
func TestNudgeWakesOnlyWhileWatched(t *testing.T) {
	e := NewEvents(nil, nil, nil, nil)
	e.Nudge()
	if len(e.wake) != 0 {
		t.Fatal("Nudge woke the loop with no stream open")
	}
	_, s, refused := e.subscribe(streamOwner{}, 0, false)
	if refused != nil {
		t.Fatal(refused)
	}
	if len(e.wake) != 1 {
		t.Fatal("the first stream to open did not wake the loop")
	}
	<-e.wake
	e.Nudge()
	if len(e.wake) != 1 {
		t.Fatal("Nudge did not wake the loop with a stream open")
	}
	<-e.wake
	e.unsubscribe(s)
	e.Nudge()
	if len(e.wake) != 0 {
		t.Fatal("Nudge woke the loop after the last stream closed")
	}
}
