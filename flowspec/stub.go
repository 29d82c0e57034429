package flowspec

// TEMPORARY: signatures only; the flowspec helper replaces this file with the
// real implementation split by concept (family.go, match.go, action.go,
// text.go, decode.go, order.go ...). Every exported name here is a contract
// other packages already call.

import (
	"errors"
	"net/netip"
)

var errTODO = errors.New("flowspec: not implemented yet")

// String returns "ipv4-flowspec" or "ipv6-flowspec".
func (f Family) String() string { return "" }

// AFI returns the BGP address family identifier (1 or 2).
func (f Family) AFI() uint16 { return 0 }

// ParseFamily accepts "ipv4", "ipv6", "ipv4-flowspec", "ipv6-flowspec" (case-insensitive).
func ParseFamily(s string) (Family, error) { return 0, errTODO }

// Family returns the rule's address family.
func (m Match) Family() Family { return m.fam }

// IsValid reports whether m was constructed by Parse/Decode.
func (m Match) IsValid() bool { return m.fam != 0 }

// Len returns the length of the NLRI on the wire, including its 1- or 2-byte length prefix.
func (m Match) Len() int { return 0 }

// AppendTo appends the NLRI in wire form (length prefix + components) to b.
func (m Match) AppendTo(b []byte) []byte { return b }

// String returns the canonical text of the match components, e.g.
// "destination 203.0.113.7/32 protocol ==17 source-port ==53".
func (m Match) String() string { return "" }

// Destination returns the destination prefix component, if the rule has one.
func (m Match) Destination() (netip.Prefix, bool) { return netip.Prefix{}, false }

// DecodeMatch decodes one NLRI (starting at its length prefix) of family f
// and returns it with the number of bytes consumed. Errors are *DecodeError.
func DecodeMatch(f Family, b []byte) (Match, int, error) { return Match{}, 0, errTODO }

// Discard is the action that drops all matched traffic (traffic-rate 0).
func Discard() Action { return Action{} }

// RateLimit limits matched traffic to bytesPerSecond (traffic-rate-bytes, 0x8006).
func RateLimit(bytesPerSecond float32) Action { return Action{} }

// IsValid reports whether a holds at least one extended community.
func (a Action) IsValid() bool { return a.ext != "" }

// AppendExtCommunities appends the action's extended communities (8 bytes each) to b.
func (a Action) AppendExtCommunities(b []byte) []byte { return b }

// String returns the canonical text of the action, e.g. "discard" or "rate-limit 125000".
func (a Action) String() string { return "" }

// DecodeAction builds an Action from concatenated 8-byte extended
// communities. Communities ribkeeper does not know are kept verbatim, so
// any path read from the RIB has an Action.
func DecodeAction(ext []byte) (Action, error) { return Action{}, errTODO }

// Parse parses the gobgp CLI form "match ... then ...". The family is that of
// the prefixes in the match (IPv4 when there is none). Errors are *SyntaxError.
func Parse(s string) (Rule, error) { return Rule{}, errTODO }

// ParseFamily parses like Parse but in the given family.
func ParseIn(f Family, s string) (Rule, error) { return Rule{}, errTODO }

// String returns the canonical text "match ... then ...".
func (r Rule) String() string { return "" }

// IsValid reports whether both the match and the action are valid.
func (r Rule) IsValid() bool { return r.Match.IsValid() && r.Action.IsValid() }

// SyntaxError reports bad rule text and points at the offending word.
type SyntaxError struct {
	Input  string // the whole text
	Offset int    // byte offset of Word in Input
	Word   string // the offending word ("" at end of input)
	Msg    string // what is wrong and what was expected
}

func (e *SyntaxError) Error() string { return e.Msg }

// DecodeError reports malformed wire bytes.
type DecodeError struct {
	Offset int    // byte offset in the input where the problem is
	Msg    string // why
}

func (e *DecodeError) Error() string { return e.Msg }
