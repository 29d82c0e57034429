package reconcile

// signal is a one-slot wake-up: any number of notifications before the loop
// gets to them merge into one pass. The loop is level-triggered, so nothing
// is lost by merging: the pass re-reads both sides anyway.
type signal struct {
	c chan struct{}
}

func newSignal() signal { return signal{c: make(chan struct{}, 1)} }

// notify never blocks: if a wake-up is already pending, this one joins it.
func (s signal) notify() {
	select {
	case s.c <- struct{}{}:
	default:
	}
}
