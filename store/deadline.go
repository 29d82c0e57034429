package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Bounded writes.
//
// Every write has a deadline: Config.WriteTimeout ([store] write_timeout,
// default 5s) from the moment it reaches the store, a quarter more for
// each 1,000 rules of a batch. A write that cannot reach durable storage
// by then (a hung disk, a frozen file system, a database that stopped
// answering) is answered with ErrUnavailable (the API's 503), and what
// the answer says is the truth (see committer.enqueue): "not stored"
// when its commit had not started, which the store guarantees by
// dropping it from the queue or rolling its transaction back; "pending"
// when the deadline passed during the COMMIT itself, which no database
// can take back (the log reports the outcome when it comes, and a read
// shows a write that landed). Writes queued behind a hung one are
// answered by their own deadlines and never run late.

// DefaultWriteTimeout is Config.WriteTimeout when it is zero.
const DefaultWriteTimeout = 5 * time.Second

// ErrWriteTimeout classifies a write answered at its deadline (it also
// matches ErrUnavailable).
var ErrWriteTimeout = errors.New("write did not reach the disk in time")

// ErrOutcomePending classifies, among ErrWriteTimeout, a write whose
// deadline passed during its COMMIT: it may still be stored. Every other
// error of a write means it was not stored.
var ErrOutcomePending = errors.New("its commit had started")

// writeBound bounds one write of n rules from its arrival to its commit.
func (s *Store) writeBound(ctx context.Context, n int) (context.Context, context.CancelFunc) {
	d := s.writeTimeout
	if n > 1000 {
		d += time.Duration(n/1000) * d / 4
	}
	return context.WithTimeout(ctx, d)
}

// notStored is the answer to a write dropped before its commit: the
// caller's own context's error if the caller gave up, else the timeout.
func (s *Store) notStored(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &unavailableError{op: op, err: ErrWriteTimeout, hint: fmt.Sprintf(
		"nothing was stored: the database did not commit within %v ([store] write_timeout); %s, then retry",
		s.writeTimeout, s.diskHint())}
}

// pending is the answer to a write whose deadline passed during its
// COMMIT.
func (s *Store) pending(ctx context.Context, op string) error {
	return &unavailableError{op: op, err: fmt.Errorf("%w: %w", ErrWriteTimeout, ErrOutcomePending), hint: fmt.Sprintf(
		"not acknowledged: its commit started but the disk did not confirm it within %v ([store] write_timeout), so it may still be stored when the disk answers (the log says which; GET /v1/rules shows it); %s, and check the rules before retrying",
		s.writeTimeout, s.diskHint())}
}

// diskHint says what to check when writes do not reach the disk.
func (s *Store) diskHint() string {
	if s.dataDir != "" {
		return fmt.Sprintf("check the disk of %s (hung, frozen or overloaded)", s.path)
	}
	return "check the database server and its disk"
}

// LateCommits counts writes whose caller was answered at its deadline
// while their COMMIT was still running; their outcome was logged when it
// came.
func (s *Store) LateCommits() uint64 { return s.lateCommits.Load() }
