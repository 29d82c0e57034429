package api

import (
	"encoding/json"
	"github.com/ribkeeper/ribkeeper/admit"
	"slices"
	"time"

	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/store"
)

// AddRuleRequest is the body of POST /v1/rules (and of each rule of
// POST /v1/rules/batch).
//
// Storing a match that is already active updates that rule, and only the
// fields present in the JSON change: without "ttl", "reason" or "sites"
// the stored expiry, reason and sites stay. "reason": "" clears the
// reason, "sites": [] targets every site, "ttl": "never" removes the
// expiry (which only a writer with the permission may do: [guardrails]
// allow_never_expire). A new rule takes absent fields as: the default TTL
// ([guardrails] default_ttl), no reason, every site.
type AddRuleRequest struct {
	Text   string   `json:"text"`             // "match ... then ..."
	TTL    string   `json:"ttl,omitempty"`    // Go duration, e.g. "10m", or "never"
	Reason string   `json:"reason,omitempty"` // free text, at most MaxReasonBytes
	Sites  []string `json:"sites,omitempty"`  // empty: every site
	// AllowUnknownSites lets Sites name a site that no appliance has
	// registered yet; without it such a rule is refused (400, field
	// sites), since it would never be announced anywhere.
	AllowUnknownSites bool `json:"allow_unknown_sites,omitempty"`
	// Clear names fields sent even when empty, so that an update clears
	// them: "reason" (no reason), "sites" (every site), "ttl" (never
	// expires). The Go client's way to say what JSON says with "".
	Clear []string `json:"-"`
}

// ParseTTL reads a ttl as the daemon does (admit.ParseTTL): a positive
// Go duration ("90s", "30m", "1h30m") or whole days ("2d"), so that a
// client refuses exactly what the daemon would.
func ParseTTL(s string) (time.Duration, error) { return admit.ParseTTL(s) }

// TTLNever is the ttl that removes a rule's expiry.
const TTLNever = "never"

// ruleRequest is AddRuleRequest as sent on the wire: a nil field was
// absent (or null), which on an update keeps the stored value.
type ruleRequest struct {
	Text   string    `json:"text"`
	TTL    *string   `json:"ttl,omitempty"`
	Reason *string   `json:"reason,omitempty"`
	Sites  *[]string `json:"sites,omitempty"`

	AllowUnknownSites bool `json:"allow_unknown_sites,omitempty"`
}

// MarshalJSON sends the fields that are set or named in Clear.
func (r AddRuleRequest) MarshalJSON() ([]byte, error) {
	w := ruleRequest{Text: r.Text, AllowUnknownSites: r.AllowUnknownSites}
	clear := func(f string) bool { return slices.Contains(r.Clear, f) }
	if r.TTL != "" {
		w.TTL = &r.TTL
	} else if clear("ttl") {
		never := TTLNever
		w.TTL = &never
	}
	if r.Reason != "" || clear("reason") {
		w.Reason = &r.Reason
	}
	if len(r.Sites) > 0 || clear("sites") {
		sites := NonNil(r.Sites)
		w.Sites = &sites
	}
	return json.Marshal(w)
}

// AddRulesRequest is the body of POST /v1/rules/batch.
type AddRulesRequest struct {
	Rules []AddRuleRequest `json:"rules"`
}

// rulesRequest is AddRulesRequest as decoded by the server.
type rulesRequest struct {
	Rules []ruleRequest `json:"rules"`
}

// Event is one entry of a rule's audit history.
type Event struct {
	ID     int64     `json:"id"`
	RuleID int64     `json:"rule_id"`
	At     time.Time `json:"at"`
	// Kind is created, updated, withdraw-requested, withdrawn, expired or
	// status.
	Kind  string `json:"kind"`
	Actor string `json:"actor"`
	Site  string `json:"site,omitempty"` // the site that made the change, if one did
	// Old and New hold the fields that changed, as text (see store.Event).
	Old map[string]string `json:"old,omitempty"`
	New map[string]string `json:"new,omitempty"`
}

// Rule is a stored rule as the API shows it.
type Rule struct {
	ID     int64  `json:"id"`
	Family string `json:"family"`
	Text   string `json:"text"`
	Match  string `json:"match"`
	Action string `json:"action"`
	Reason string `json:"reason"`
	Actor  string `json:"actor"`
	// Sites lists the sites the rule targets; empty means every site.
	Sites []string `json:"sites"`
	// Origin is "config:SITE" for a static rule declared in that site's
	// configuration ([[rule]]), which the API cannot change or withdraw;
	// absent for rules added through the API.
	Origin string `json:"origin,omitempty"`
	// Set is the declarative set the rule belongs to (PUT
	// /v1/sets/{name}); absent for a rule of no set.
	Set string `json:"set,omitempty"`
	// State is active, withdrawing (an operator withdrew it and the path is
	// not gone yet), withdrawn or expired.
	State     string     `json:"state"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"` // nil: never
	Announced bool       `json:"announced"`
	LastError string     `json:"last_error"`
	// Peers lists the established peers whose Adj-RIB-Out holds the rule's
	// path, and AnnouncedTo counts them against the configured peers of
	// its family ("3/3"); both are set for active rules only.
	Peers       []string `json:"peers,omitempty"`
	AnnouncedTo string   `json:"announced_to,omitempty"`
	// NotSent says, per configured peer whose router profile keeps the
	// rule from it, why: "not sent to 127.0.0.4: frr resets sessions on
	// !=" (active rules only).
	NotSent []string `json:"not_sent,omitempty"`
	// ShadowedBy, in a list ordered by precedence, is the id of an active
	// rule that routers apply first and that matches every packet this
	// one matches with a final action: this rule can never apply.
	ShadowedBy int64 `json:"shadowed_by,omitempty"`
	// Precedence is an active FlowSpec rule's place in the order routers
	// apply its family's rules in (1 first), in a list ordered by
	// precedence and on a rule read alone; absent otherwise.
	Precedence int `json:"precedence,omitempty"`
}

// StateWithdrawing is the state shown for an active rule whose withdrawal was
// requested and not yet seen in the RIB.
const StateWithdrawing = "withdrawing"

// Path is one FlowSpec path in the RIB mirror.
type Path struct {
	Family string `json:"family"`
	Match  string `json:"match"`
	Action string `json:"action"`
	Text   string `json:"text"` // "match ... then ..."
	// RuleID is the active rule that asks for this path; absent for a
	// path no rule asks for (an orphan the reconciler withdraws).
	RuleID int64 `json:"rule_id,omitempty"`
	// Since is when the path was announced, as the speaker's table
	// records it.
	Since *time.Time `json:"since,omitempty"`
	// Peers are the established peers whose Adj-RIB-Out holds the path,
	// and AnnouncedTo counts them against the configured peers of its
	// family ("1/2").
	Peers       []string `json:"peers"`
	AnnouncedTo string   `json:"announced_to"`
}

// Peer is one BGP neighbor.
type Peer struct {
	Address string `json:"address"`
	ASN     uint32 `json:"asn"`
	// Description is the neighbor's description from the configuration
	// (which router it is); absent when none is set.
	Description   string   `json:"description,omitempty"`
	State         string   `json:"state"`
	UptimeSeconds int64    `json:"uptime_seconds"`
	Families      []string `json:"families"`
	Sent          int      `json:"sent"`
	// Since is when the session last changed state.
	Since *time.Time `json:"since,omitempty"`
	// LastError is why the session last went down (e.g.
	// "notification-received cease/administrative shutdown"), at
	// LastErrorAt; Flaps counts drops after established.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	Flaps       int        `json:"flaps"`
	// Hint says what to check when the session never came up.
	Hint string `json:"hint,omitempty"`
	// Profile is the neighbor's router profile; HeldBack counts the
	// rules of its families the profile keeps from it (not in Sent).
	Profile  string `json:"profile,omitempty"`
	HeldBack int    `json:"held_back"`
	// Received counts the routes the router sent (ribkeeper uses none;
	// they are held while the session is up); MaxPrefixes is its limit
	// per family (0: none) and PrefixLimited says the session was closed
	// at it and is kept down.
	Received      int    `json:"received"`
	MaxPrefixes   uint32 `json:"max_prefixes"`
	PrefixLimited bool   `json:"prefix_limited,omitempty"`
}

type RuleList struct {
	// Order is the order of Rules in a list (GET /v1/rules): id,
	// precedence or expires.
	Order string `json:"order,omitempty"`
	Rules []Rule `json:"rules"`
	// Next, in a page (GET /v1/rules?limit=N), is the after= cursor of
	// the next page; absent after the last one.
	Next int64 `json:"next,omitempty"`
}

// StoredIDs is the answer to POST /v1/rules/batch when the request asks
// "Prefer: return=minimal" (RFC 7240): the id of each rule in request
// order (a Match sent twice gives its one rule's id twice), instead of
// every stored rule in full. A feed that loads tens of thousands of rules
// a request needs no echo of them (~450 bytes a rule).
type StoredIDs struct {
	IDs []int64 `json:"ids"`
}

type EventList struct {
	Events []Event `json:"events"`
}

type PathList struct {
	Paths []Path `json:"paths"`
}

type PeerList struct {
	Peers []Peer `json:"peers"`
}

func ruleFromStore(r store.Rule) Rule {
	text := r.Text
	if text == "" {
		text = r.Rule.String()
	}
	state := string(r.State)
	if r.State == store.Active && r.WithdrawRequested {
		state = StateWithdrawing
	}
	sites := r.Sites
	if sites == nil {
		sites = []string{}
	}
	out := Rule{
		ID:        r.ID,
		Family:    r.Rule.Match.Family().String(),
		Text:      text,
		Match:     r.Rule.Match.String(),
		Action:    r.Rule.Action.String(),
		Reason:    r.Reason,
		Actor:     r.Actor,
		Sites:     sites,
		Origin:    r.Origin,
		Set:       r.Set,
		State:     state,
		CreatedAt: r.CreatedAt,
		UpdatedAt: r.UpdatedAt,
		Announced: r.Announced,
		LastError: r.LastError,
	}
	if !r.ExpiresAt.IsZero() {
		t := r.ExpiresAt
		out.ExpiresAt = &t
	}
	return out
}

func pathFromRIB(m flowspec.Match, a flowspec.Action) Path {
	return Path{
		Family: m.Family().String(),
		Match:  m.String(),
		Action: a.String(),
		Text:   flowspec.Rule{Match: m, Action: a}.String(),
	}
}

func peerFromBGP(p bgp.PeerStatus) Peer {
	fams := p.Families
	if fams == nil {
		fams = []string{}
	}
	out := Peer{
		Address:       p.Address,
		ASN:           p.ASN,
		Description:   p.Description,
		State:         p.State,
		UptimeSeconds: int64(p.Uptime.Seconds()),
		Families:      fams,
		Sent:          p.Sent,
		LastError:     p.LastError,
		Flaps:         p.Flaps,
		Hint:          p.Hint,
		Profile:       p.Profile,
		HeldBack:      p.HeldBack,
		Received:      p.Received,
		MaxPrefixes:   p.MaxPrefixes,
		PrefixLimited: p.PrefixLimited,
	}
	if !p.Since.IsZero() {
		t := p.Since.UTC()
		out.Since = &t
	}
	if !p.LastErrorAt.IsZero() {
		t := p.LastErrorAt.UTC()
		out.LastErrorAt = &t
	}
	return out
}

func eventFromStore(e store.Event) Event {
	return Event{
		ID:     e.ID,
		RuleID: e.RuleID,
		At:     e.At,
		Kind:   string(e.Kind),
		Actor:  e.Actor,
		Site:   e.Site,
		Old:    e.Old,
		New:    e.New,
	}
}

// NonNil returns s, or an empty slice for nil: JSON lists print as [],
// never null.
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
