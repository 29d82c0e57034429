package reconcile

// TEMPORARY: the contract main.go calls; the reconcile helper replaces this
// file with the real loop.

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// Desired is what the reconciler needs of the desired-state store.
type Desired interface {
	ActiveRules(ctx context.Context) ([]store.Rule, error)
	Finish(ctx context.Context, id int64, state store.State) error
	SetStatus(ctx context.Context, ids []int64, announced bool, lastErr string) error
	Changes() <-chan struct{}
}

// Speaker is what the reconciler needs of the BGP speaker.
type Speaker interface {
	Announce(ctx context.Context, r flowspec.Rule) error
	Withdraw(ctx context.Context, m flowspec.Match) error
	Paths(fn func(m flowspec.Match, a flowspec.Action)) (ok bool)
	Changes() <-chan struct{}
}

// Config tunes the loop.
type Config struct {
	ResyncInterval time.Duration // periodic full pass; default 5m
}

// Reconciler keeps the speaker's paths equal to the desired state.
type Reconciler struct{}

func New(log hclog.Logger, d Desired, s Speaker, cfg Config) *Reconciler { return &Reconciler{} }

// Run runs passes until ctx is done.
func (r *Reconciler) Run(ctx context.Context) error { <-ctx.Done(); return nil }
