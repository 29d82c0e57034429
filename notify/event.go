// Package notify tells people what happened: an incident opened,
// escalated or ended, a rule that failed, a peer that went down or came
// back. This file is the event model; producers (the playbook engine, the
// speaker's peer watch, the reconcile loop) hand Events to a notifier that
// must never block them.
package notify

import "time"

// Kind is what happened.
type Kind string

// The kinds of events.
const (
	IncidentOpened    Kind = "incident.opened"
	IncidentEscalated Kind = "incident.escalated"
	IncidentEnded     Kind = "incident.ended"
	RuleFailed        Kind = "rule.failed"
	PeerDown          Kind = "peer.down"
	PeerUp            Kind = "peer.up"
)

// Event is one notification. Exactly one of Incident, Rule and Peer is set,
// as Kind says.
type Event struct {
	Kind Kind
	At   time.Time
	// Summary is one line for people.
	Summary  string
	Incident *Incident
	Rule     *Rule
	Peer     *Peer
}

// Incident is an incident an event is about.
type Incident struct {
	ID       int64
	Target   string // prefix
	Vector   string // signals.Vector.Key
	Source   string
	Playbook string
	Step     int // the escalation step now in force (0: the first)
	Rules    []int64
}

// Rule is a rule an event is about.
type Rule struct {
	ID    int64
	Text  string
	Error string
}

// Peer is a BGP peer an event is about.
type Peer struct {
	Address     string
	Description string
	State       string
	Reason      string
}
