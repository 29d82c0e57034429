// Package admit is ribkeeper's admission gate: the one door through which
// every change to the desired state passes. The HTTP API (add, update,
// batch, withdraw by id or by match, validate), the static [[rule]]
// entries of the configuration, the guardrails' enforcement after a
// reload, and every later source of rules (detectors' signals,
// declarative sets) call a Gate method with an explicit Actor; nothing
// else calls the store's write methods (a test over the source tree
// enforces it).
//
// The gate decides, in this order, and refuses with a typed *Refusal at
// the first failure, before anything is stored or announced:
//
//  1. input bounds: rule text length, rules per batch, sites per rule and
//     bytes per site name, reason text, TTL syntax ([limits]);
//  2. the rule itself: it parses, it is complete, the speaker can carry
//     it (Config.Sendable);
//  3. the actor's scope: a scoped actor acts only on destinations inside
//     its prefixes and with the actions it may use, also when it updates
//     or withdraws: it cannot change or withdraw a rule whose current
//     action it may not use, nor another actor's rule unless its scope
//     says OthersRules. Another scope's stored rule is indistinguishable
//     from a rule that does not exist (KindNotFound, no destination in
//     the message). "rtbh" is a blackhole route exactly; a route with
//     communities or a next hop of its own is action "route";
//  4. the guardrails (package guard: safelist, protected addresses,
//     prefix lengths, TTLs, quotas, the global rate of new rules) and the
//     scoped actor's own quota and rate of new rules;
//  5. the store's commit.
//
// Writes are serialized by the gate, so that quotas and the checks of an
// update against the stored rule hold for this process (instances that
// share one PostgreSQL enforce quotas each on its own view).
// A write waits for the gate only until its deadline ([store]
// write_timeout, counted from its arrival), and the store answers every
// write by then, so a hung disk answers each write 503 in time instead
// of queueing writes behind it (lock.go).
//
// Early announcement: a single rule desired at this site may be handed to
// the speaker ahead of its commit (time to mitigate; the commit starts
// once the speaker has taken it, reconcile.EarlyWait), but only after
// every check above passed and only while the store says the commit is
// expected to succeed (Config.EarlyReady, the store's EarlyOK: the input
// is one it takes, no failed or hung commit, room on disk).
// Once announced, the commit is not abandoned when the client goes away
// (it keeps its deadline), and a write the store did not store (any
// error but store.ErrOutcomePending) has its path taken off at once, so
// an announcement never outlives a write that did not happen, even while
// the reconciler cannot read the store.
//
// Early withdrawal, the same contract the other way: a single withdrawal
// (Withdraw, WithdrawMatch) of an active rule of this site takes its
// path off the speaker ahead of the commit, only while the store
// expects that commit (Config.EarlyWithdrawReady, the store's
// EarlyWithdrawOK), and the commit is then not abandoned with the
// client. Should the store refuse it after all, the write settles at
// once: the reconciler announces the rule, still active, again, and the
// caller gets the store's error.
//
// A TTL stays relative until the commit: the gate hands the store the
// TTL given (or the default one) as store.Input.TTL, which the store
// counts from the transaction that stores the rule, so that a write
// queued behind a large commit is never refused for having waited.
package admit
