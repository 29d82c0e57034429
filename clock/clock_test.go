package clock

import (
	"testing"
	"time"
)

func TestFakeFiresDueTimersOnly(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFake(start)
	a, b := f.NewTimer(), f.NewTimer()
	a.Reset(time.Second)
	b.Reset(time.Minute)
	if at, ok := f.Next(); !ok || !at.Equal(start.Add(time.Second)) {
		t.Fatalf("Next = %v %v, want %v", at, ok, start.Add(time.Second))
	}
	f.Advance(999 * time.Millisecond)
	select {
	case <-a.C():
		t.Fatal("a fired before its time")
	default:
	}
	f.Advance(time.Millisecond)
	select {
	case got := <-a.C():
		if !got.Equal(start.Add(time.Second)) {
			t.Fatalf("a fired with %v", got)
		}
	default:
		t.Fatal("a did not fire at its time")
	}
	select {
	case <-b.C():
		t.Fatal("b fired early")
	default:
	}
	b.Stop()
	f.Advance(time.Hour)
	select {
	case <-b.C():
		t.Fatal("a stopped timer fired")
	default:
	}
}

func TestFakeResetDiscardsStaleFire(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	tm := f.NewTimer()
	tm.Reset(time.Second)
	f.Advance(time.Second) // fired, not received
	tm.Reset(time.Second)
	select {
	case <-tm.C():
		t.Fatal("a fire from before Reset was delivered")
	default:
	}
	tm.Reset(0)
	select {
	case <-tm.C():
	default:
		t.Fatal("Reset(0) did not fire at once")
	}
}

func TestRealTimerFires(t *testing.T) {
	tm := Real{}.NewTimer()
	tm.Reset(time.Millisecond)
	<-tm.C() // waits on the event; no window asserted
	tm.Stop()
}
