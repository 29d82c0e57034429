package ingest

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/ribkeeper/ribkeeper/signals"
)

// Unhandled is the Sink of a daemon without a playbook engine: it takes
// every signal and logs it, and no rule follows. Detectors can be
// connected and checked (GET /v1/signals) before playbooks exist.
func Unhandled(log hclog.Logger) signals.Sink {
	return unhandled{log: log}
}

type unhandled struct{ log hclog.Logger }

func (u unhandled) Accept(_ context.Context, s signals.Signal) error {
	u.log.Info("signal received; no playbook engine acts on it", "source", s.Source, "target", s.Target, "state", s.State)
	return nil
}
