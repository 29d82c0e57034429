// Package config turns ribkeeper's TOML file into one validated, immutable
// Config.
//
// Loading is a single pure step: the file is decoded, every key is checked
// against the known ones, and every value is validated. All problems are
// reported together, each with the key it concerns and the line it is on, so
// an operator can fix a file in one edit instead of one restart per typo.
// Nothing in the returned Config needs checking again by its users.
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
	Store     Store
	API       API
	Reconcile Reconcile
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
}

// Neighbor is one upstream router.
type Neighbor struct {
	Address      netip.Addr
	ASN          uint32
	Port         uint16     // remote port, default 179
	LocalAddress netip.Addr // zero: chosen by the kernel
	Families     []flowspec.Family
	Passive      bool
	Description  string
}

// Store selects the desired-state database.
type Store struct {
	Driver string // sqlite or postgres
	Path   string // sqlite database file
	DSN    string // postgres connection string (or env RIBKEEPER_STORE_DSN)
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
}

// Token is one bearer token of the TCP API. Name is the actor recorded in
// the audit trail; Secret was read from the file, an environment variable
// or a secret file.
type Token struct {
	Name   string
	Role   string // read or write
	Secret string
}

// Reconcile tunes the reconciliation loop.
type Reconcile struct {
	ResyncInterval     time.Duration
	DryRun             bool
	MaxWithdrawPerPass int
}

// DSNEnv is the environment variable that supplies the PostgreSQL DSN when
// the file leaves store.dsn empty, so secrets can stay out of the file.
const DSNEnv = "RIBKEEPER_STORE_DSN"
