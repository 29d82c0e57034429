// Package playbook is the engine that turns detectors' signals into rules:
// it is the signals.Sink of the daemon.
//
// Contract:
//
//   - A signal is accepted only from a configured [[source]] (an unknown
//     source is refused) and only for a target inside the source's
//     prefixes; a signal that fails signals.Check is refused.
//   - Signals for the same target and vector (signals.Vector.Key) are one
//     incident. A signal that opens none (an end, or one no playbook
//     matches) is accepted and changes nothing.
//   - An incident opens with the first [[playbook]], in file order, that
//     matches its first signal, and keeps that playbook until it ends: a
//     reload applies to incidents opened after it.
//   - Each step's rules are rendered from the templates and written
//     through the admission gate (admit.Gate) with actor
//     {Name: source, Source: admit.SourceSignal, Scope: the source's
//     scope}; nothing else writes. Each rule's reason names the incident,
//     playbook, step, source and signal, so the rule's history records
//     them. A step's rules replace the previous step's, make-before-break
//     (the new ones are stored before the old ones are withdrawn).
//   - Escalation to the next step happens after the step's
//     escalate_after, or after escalate_signals signals in it, while the
//     attack goes on. Each signal extends the rules' TTL once less than
//     half of it is left (with quiet_after = "never", the timer does, for
//     detectors that report an attack once). The attack ends with a
//     signal of state end or after quiet_after without signals; the rules
//     stay for hold_down (extended if they would expire before), then the
//     incident ends and its rules are withdrawn. A signal during
//     hold-down resumes the incident.
//   - A rule the gate refuses for the source's rate of new rules, or that
//     the store cannot take now, is tried again on the timer; other
//     refusals are final and recorded. A rule withdrawn outside the
//     incident (an operator) is not stored again by a TTL extension. Two
//     open incidents (one target, two vectors) may hold the same rule: it
//     is withdrawn when the last of them lets it go.
//   - A shadow playbook checks each rule exactly as a write would
//     (Gate.Validate) and records the verdict in the incident; it
//     announces and stores nothing.
//   - A playbook whose rules would fall outside a source's scope is
//     refused at load (Check), like a file error.
//   - All timing comes from the injected clock: one timer for the nearest
//     deadline of all incidents (escalation, quiet, hold-down).
//   - Bounds: at most [incidents] max_open open incidents (a signal that
//     would open another is refused, naming the setting), at most
//     max_timeline entries per incident (further entries are counted),
//     keep_ended ended incidents kept for reading.
//   - Incidents are saved in the store (SQLite or PostgreSQL, per site) at
//     every change of state, step or rules, and at least every saveEvery
//     while signals come; Load, at start, lets the open ones go on where
//     they were (a hold-down or escalation due while the daemon was down
//     happens at once) and keeps the recent ended ones readable. Without a
//     Store they live in memory only.
//   - Notifications (incident opened, escalated, ended) go to a Notifier,
//     which must not block; nil sends none.
package playbook
