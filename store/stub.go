package store

// TEMPORARY: the contract other packages call; the store helper replaces this
// file with the real SQLite and PostgreSQL engines.

import (
	"context"
	"errors"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// State is a rule's lifecycle state.
type State string

const (
	Active    State = "active"    // desired (until withdrawn or expired)
	Withdrawn State = "withdrawn" // an operator withdrew it and the path is gone
	Expired   State = "expired"   // its TTL passed and the path is gone
)

// Rule is one stored rule.
type Rule struct {
	ID        int64
	Rule      flowspec.Rule
	Text      string   // canonical text, Rule.String()
	Reason    string   // free text from the operator or detector
	Actor     string   // who created or last changed it ("cli", token name, "config")
	Sites     []string // empty: every site
	CreatedAt time.Time
	UpdatedAt time.Time
	ExpiresAt time.Time // zero: never expires
	State     State
	// WithdrawRequested is set when an operator withdrew an active rule; the
	// state becomes Withdrawn only after the reconciler saw the path gone.
	WithdrawRequested bool
	Announced         bool   // status from this site's reconciler
	LastError         string // last error this site's reconciler recorded, "" if none
}

// Input is what a caller asks to store; Upsert keys it by Rule.Match.
type Input struct {
	Rule      flowspec.Rule
	ExpiresAt time.Time // zero: never
	Reason    string
	Actor     string
	Sites     []string
}

// ErrNotFound is returned for an unknown rule id.
var ErrNotFound = errors.New("rule not found")

// Config selects and configures an engine.
type Config struct {
	Driver string // "sqlite" (default) or "postgres"
	Path   string // sqlite file
	DSN    string // postgres
	Site   string // this instance's site name
}

// Store is the desired state.
type Store struct{}

// Open opens (creating and migrating as needed) the configured engine.
func Open(ctx context.Context, cfg Config) (*Store, error) { return nil, errors.New("TODO") }

func (s *Store) Close() error { return nil }

// Upsert stores in; an active rule with the same Match is updated in place
// (created=false), otherwise a new rule is created.
func (s *Store) Upsert(ctx context.Context, in Input) (r Rule, created bool, err error) {
	return Rule{}, false, errors.New("TODO")
}

func (s *Store) Get(ctx context.Context, id int64) (Rule, error) { return Rule{}, ErrNotFound }

// List returns rules, newest first; all states when state is "".
func (s *Store) List(ctx context.Context, state State) ([]Rule, error) { return nil, nil }

// Withdraw asks for an active rule to be withdrawn (sets WithdrawRequested).
func (s *Store) Withdraw(ctx context.Context, id int64, actor string) (Rule, error) {
	return Rule{}, ErrNotFound
}

// ActiveRules returns every rule in state Active that targets this site,
// including those past ExpiresAt or with WithdrawRequested.
func (s *Store) ActiveRules(ctx context.Context) ([]Rule, error) { return nil, nil }

// Finish moves an active rule to Withdrawn or Expired; a no-op if it is no
// longer active (idempotent, safe from several instances).
func (s *Store) Finish(ctx context.Context, id int64, state State) error { return nil }

// SetStatus records this site's announce status for the given rules.
func (s *Store) SetStatus(ctx context.Context, ids []int64, announced bool, lastErr string) error {
	return nil
}

// Changes delivers a wake-up (one-slot, coalescing) after any change to
// desired state, made by this process or (PostgreSQL) by another instance.
func (s *Store) Changes() <-chan struct{} { return nil }
