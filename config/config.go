// Package config turns ribkeeper's TOML file into one validated, immutable
// Config.
//
// Loading is a single pure step: the file is decoded, every key is checked
// against the known ones, and every value is validated. All problems are
// reported together, each with the key it concerns and the line it is on, so
// an operator can fix a file in one edit instead of one restart per typo.
// A value of the wrong type, or [name] written for [[name]], is one of
// those problems, said in the operator's terms, not the end of the check
// (decode.go); only a TOML syntax error stops it, as nothing after one can
// be read.
// Nothing in the returned Config needs checking again by its users, with
// one exception: the static rules ([[rule]]) are checked against the
// guardrails after loading (admit.CheckStatic, which needs the guard
// package config cannot import), and each refusal is reported as an error
// of the file with its key and line (Config.Problem).
package config

import (
	"net/netip"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Config is a validated configuration. Treat it as read-only.
type Config struct {
	// File is the path the configuration was loaded from.
	File string
	// Site names this instance among several sharing one store.
	Site      string
	Log       Log
	BGP       BGP
	Neighbors []Neighbor
	// PeerGroups and DynamicNeighbors accept sessions from routers that
	// dial in from a prefix; every dynamic neighbor names a peer group.
	PeerGroups       []PeerGroup
	DynamicNeighbors []DynamicNeighbor
	RTBH             RTBH
	Guardrails       Guardrails
	Limits           Limits
	Store            Store
	API              API
	Reconcile        Reconcile
	// Rules are the static rules ([[rule]]), in file order.
	Rules []StaticRule
	// Sources are the detectors allowed to send signals ([[source]]).
	Sources []Source
	// Notify are the receivers of notifications ([[notify]]).
	Notify []Notify
	// Playbooks turn signals into rules ([[playbook]]), in file order:
	// a signal takes the first that matches it.
	Playbooks []Playbook
	// Incidents bounds what the playbook engine keeps ([incidents]).
	Incidents Incidents

	lines map[string]int // where each key is written (Problem)
}

// Log selects log format and level.
type Log struct {
	Level  string // trace, debug, info, warn, error
	Format string // text or json
}

// BGP is the local speaker.
type BGP struct {
	ASN             uint32
	RouterID        netip.Addr
	ListenAddresses []netip.Addr
	// ListenPort is the TCP port for incoming sessions; -1 disables the listener.
	ListenPort int32
	// GRPCListen is GoBGP's own gRPC API address ("" = off); loopback
	// only unless GRPCAllowRemote.
	GRPCListen      string
	GRPCAllowRemote bool
	// CompactAfter restarts the speaker once this many table destinations
	// leaked by GoBGP v3.37.0 for withdrawn rules pile up (0 = never).
	CompactAfter int
}

// Session holds the settings shared by neighbors and peer groups.
type Session struct {
	ASN uint32
	// Families to negotiate: FlowSpec and, for RTBH routes, unicast.
	Families []flowspec.Family
	// HoldTime proposed in OPEN (0: 90s); KeepaliveInterval (0: a third
	// of the hold time).
	HoldTime          time.Duration
	KeepaliveInterval time.Duration
	// MultihopTTL enables eBGP multihop (0: directly connected).
	MultihopTTL uint8
	// Password is the TCP MD5 key, read from password, password_env or
	// password_file ("" for none).
	Password string
	// GracefulRestart advertises RFC 4724 graceful restart with
	// RestartTime.
	GracefulRestart bool
	RestartTime     time.Duration
	// ConnectRetry is the time between connection attempts and after a
	// reset (DefaultConnectRetry when unset).
	ConnectRetry time.Duration
	// MaxPrefixes is the most routes the router may send per family
	// before its session is closed and kept down (DefaultMaxPrefixes when
	// unset; 0: no limit).
	MaxPrefixes uint32
	Description string
	// Profile is the router profile (package profile) deciding which
	// rules the router can take; "" is the permissive generic one.
	Profile string
}

// Neighbor is one upstream router.
type Neighbor struct {
	Address      netip.Addr
	Port         uint16     // remote port, default 179
	LocalAddress netip.Addr // zero: chosen by the kernel
	Passive      bool
	Session
}

// PeerGroup is the session settings of dynamic neighbors.
type PeerGroup struct {
	Name string
	Session
}

// DynamicNeighbor accepts sessions from routers in Prefix with the
// settings of the peer group named PeerGroup.
type DynamicNeighbor struct {
	Prefix    netip.Prefix
	PeerGroup string
}

// RTBH holds this site's next hops of blackhole routes that name none.
type RTBH struct {
	NextHopIPv4 netip.Addr
	NextHopIPv6 netip.Addr
}

// Store selects the desired-state database.
type Store struct {
	Driver string // sqlite or postgres
	Path   string // sqlite database file
	DSN    string // postgres connection string (or env RIBKEEPER_STORE_DSN)
	// HistoryRetention is how long audit history, and withdrawn or expired
	// rules, are kept (default 90 days); 0 keeps them forever.
	HistoryRetention time.Duration
	// WriteTimeout bounds every write from its arrival to its commit
	// (default 5s): a write that cannot reach durable storage in time is
	// answered 503 and is not committed later behind its client's back.
	WriteTimeout time.Duration
	// IntegrityCheckInterval is how often the database is checked for
	// corruption while running (default 1h; 0: only at start).
	IntegrityCheckInterval time.Duration
	// IdentityFile records which store this appliance ran with, and how
	// many rules it held, so that a lost or replaced store is not taken
	// for an empty desired state. SQLite default: next to the database
	// (data/ribkeeper.identity for data/ribkeeper.db); PostgreSQL: none
	// unless set.
	IdentityFile string
}

// API is the control surface.
type API struct {
	// Socket is the unix socket path of the control API.
	Socket string
	// Listen is the host:port of the optional TCP listener; "" for none.
	// A non-loopback address requires at least one token.
	Listen string
	// TLSCert and TLSKey, both set, make the TCP listener HTTPS.
	TLSCert, TLSKey string
	// Tokens are the bearer tokens of the TCP listener.
	Tokens []Token
	// Hosts are further names (or addresses) clients reach the TCP
	// listener by, as they send them in the Host header (any port); the
	// listener's own address needs none. Other names are refused, which
	// stops DNS rebinding. Lower case, without a trailing dot.
	Hosts []string
	// Origins are further web origins ("https://noc.example.net") whose
	// pages may write over the TCP listener, e.g. the console behind a
	// reverse proxy; the listener's own origin needs none. Lower case.
	Origins []string
	// MaxConnections caps the TCP listener's open connections and
	// MaxEventStreams its event streams (the control socket's count
	// apart); 0 (the default) derives them from the open-file limit at
	// start.
	MaxConnections  int
	MaxEventStreams int
	// MaxEventStreamsPerToken caps one token's event streams.
	MaxEventStreamsPerToken int
	// EventRingBytes bounds the events kept for reconnecting clients;
	// MaxEventBytes is the largest event kept and sent whole (a larger
	// rule event is sent as its id and state).
	EventRingBytes int
	MaxEventBytes  int
}

// Defaults of the [api] bounds that do not derive from the open-file
// limit.
const (
	DefaultMaxEventStreamsPerToken = 8
	DefaultEventRingBytes          = 4 << 20
	DefaultMaxEventBytes           = 64 << 10
)

// Smallest values of the event bounds: an event ring holds at least one
// event of the largest size, and an event fits a rule without its sites.
const (
	minEventRingBytes = 64 << 10
	minMaxEventBytes  = 4 << 10
)

// Token is one bearer token of the TCP API. Name is the actor recorded in
// the audit trail; Secret was read from the file, an environment variable
// or a secret file.
type Token struct {
	Name   string
	Role   string // read or write
	Secret string
	// Prefixes, if any, scope the token: it adds, sees and withdraws only
	// rules whose destination lies wholly inside one of them (a FlowSpec
	// rule without a destination is refused for it). Masked, IPv4 or IPv6.
	Prefixes []netip.Prefix
	// Actions, if any, are the only actions its rules may use, named as
	// flowspec.ActionNames spells them ("discard", "rate-limit", "rtbh"...).
	Actions []string
	// MaxActiveRules caps the active rules the token created or last
	// changed (0: no cap); the [guardrails] apply on top.
	MaxActiveRules int
	// MaxNewRulesPerMinute caps the new rules the token may create in any
	// minute: 0 takes [limits] scoped_new_rules_per_minute for a scoped
	// token (none for an unscoped one), -1 means no cap.
	MaxNewRulesPerMinute int
	// NeverExpires lets the token store rules that never expire ("ttl":
	// "never", or none when [guardrails] would give a default TTL).
	NeverExpires bool
	// OthersRules lets a scoped token change and withdraw rules that other
	// actors wrote (inside its prefixes and actions).
	OthersRules bool
}

// Limits bound what one request may ask of the admission gate
// ([limits]); 0 takes the gate's default (package admit).
type Limits struct {
	MaxBatchRules    int // rules in one batch request
	MaxSitesPerRule  int // sites one rule may name
	MaxSiteNameBytes int // bytes of one site name
	MaxTextBytes     int // bytes of one rule's text
	// ScopedNewRulesPerMinute is the rate of new rules of a scoped token
	// that sets none: enough for a detector under attack, too few to
	// force the speaker into repeated compactions by churn.
	ScopedNewRulesPerMinute int
	// MaxSetRules bounds the rules of one declarative set (PUT
	// /v1/sets/NAME), and MaxSetBodyBytes that request's body: a feed of a
	// million routes fits the defaults.
	MaxSetRules     int
	MaxSetBodyBytes int
}

// Scoped reports whether t is limited beyond its role.
func (t Token) Scoped() bool {
	return len(t.Prefixes) > 0 || len(t.Actions) > 0 || t.MaxActiveRules > 0
}

// Reconcile tunes the reconciliation loop.
type Reconcile struct {
	ResyncInterval     time.Duration
	DryRun             bool
	MaxWithdrawPerPass int
	// AnnounceRate paces re-announcement after a speaker restart or into
	// an empty RIB, in paths per second (0 = unpaced).
	AnnounceRate int
}

// DSNEnv is the environment variable that supplies the PostgreSQL DSN when
// the file leaves store.dsn empty, so secrets can stay out of the file.
const DSNEnv = "RIBKEEPER_STORE_DSN"
