// Package profile says which FlowSpec rules a kind of router can take.
//
// A Profile is a small table of what one router implementation accepts:
// the components and operators it parses, how many items one component
// and how many multi-value components one rule may have, which actions
// (extended communities, including the redirect-to-IP variant) it knows,
// and how many rules it applies at most. Check tells why a rule is not
// for that router, in words an operator reads in `rule show`
// ("frr resets sessions on !="); nil means the rule may be sent.
//
// The facts and their sources are next to each profile in builtin.go;
// "measured" means e2e/RECEIVERS.md (TestReceiverLimitations keeps them
// honest for BIRD, FRR and ExaBGP). A fact that could not be confirmed is
// left permissive and says so: a profile holds back only what a source
// says the router cannot take.
//
// Cap chooses the rules a router with a rule cap gets (see cap.go). The
// package is pure: it depends on flowspec only and keeps no global state.
package profile

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Generic is the name of the permissive default profile.
const Generic = "generic"

// Profile is what one router implementation accepts. The zero value of
// each field means "no limit"; Generic is the zero Profile with a name.
type Profile struct {
	Name string
	// About is one line for `ribkeeper profiles`: the router
	// and versions the facts are for.
	About string

	// NoComponents lists the component types the router does not parse,
	// with the reason (per family: IPv6 may differ).
	NoComponents map[flowspec.Family]map[flowspec.ComponentType]string
	// NoNotEqual: a numeric != (lt|gt set, eq clear) is refused.
	NoNotEqual string
	// NoTrue / NoFalse: the numeric operators 111 and 000 (RFC 8955
	// Table 1) are refused.
	NoTrue, NoFalse string
	// MaxItems is the most operator/value items one component may have.
	MaxItems int
	ItemsWhy string
	// MaxMultiValue is the most components of one rule that carry more
	// than one operator/value item (Cisco's "multi-value range").
	MaxMultiValue int
	MultiValueWhy string

	// NoActions maps extended community type/subtype (8-byte ones and,
	// for the IPv6-address-specific redirect, flowspec.ExtRedirectIP6) to
	// the reason the router does not take it.
	NoActions map[uint16]string

	// MaxRules is the most FlowSpec rules (both families together) the
	// router applies; 0: no cap. See Cap.
	MaxRules int
	RulesWhy string
}

// Refusal is why a rule is not for a profile's router.
type Refusal struct {
	Profile string
	Reason  string
}

func (r *Refusal) Error() string { return r.Profile + " " + r.Reason }

func (p *Profile) refuse(format string, args ...any) *Refusal {
	return &Refusal{Profile: p.Name, Reason: fmt.Sprintf(format, args...)}
}

// bitmask reports whether components of type t use bitmask operators.
func bitmask(t flowspec.ComponentType) bool {
	return t == flowspec.TCPFlags || t == flowspec.Fragment
}

// Check returns why the router of p cannot take r, or nil. Routes (RTBH,
// unicast families) are not FlowSpec and always pass. The first reason
// found is returned, in a fixed order (components, operators, items,
// multi-value components, actions), so the same rule always gets the same
// reason.
func (p *Profile) Check(r flowspec.Rule) *Refusal {
	if p == nil {
		return nil
	}
	fam := r.Match.Family()
	if fam.IsRoute() || !r.Match.IsValid() {
		return nil
	}
	multi := 0
	for c := range r.Match.All() {
		t := c.Type()
		if why, ok := p.NoComponents[fam][t]; ok {
			return p.refuse("%s", why)
		}
		items := c.Items()
		if len(items) > 1 {
			multi++
		}
		if !bitmask(t) {
			for _, it := range items {
				switch cmp := it.Op & flowspec.OpTrue; {
				case cmp == flowspec.OpLT|flowspec.OpGT && p.NoNotEqual != "":
					return p.refuse("%s", p.NoNotEqual)
				case cmp == flowspec.OpTrue && p.NoTrue != "":
					return p.refuse("%s", p.NoTrue)
				case cmp == flowspec.OpFalse && p.NoFalse != "":
					return p.refuse("%s", p.NoFalse)
				}
			}
		}
		if p.MaxItems > 0 && len(items) > p.MaxItems {
			return p.refuse("%s (%s has %d)", p.ItemsWhy, componentName(t), len(items))
		}
	}
	if p.MaxMultiValue > 0 && multi > p.MaxMultiValue {
		return p.refuse("%s (this rule has %d)", p.MultiValueWhy, multi)
	}
	if len(p.NoActions) > 0 {
		ext := r.Action.AppendExtCommunities(nil)
		for i := 0; i+8 <= len(ext); i += 8 {
			if why, ok := p.NoActions[uint16(ext[i])<<8|uint16(ext[i+1])]; ok {
				return p.refuse("%s", why)
			}
		}
		ext6 := r.Action.AppendIPv6ExtCommunities(nil)
		for i := 0; i+20 <= len(ext6); i += 20 {
			if why, ok := p.NoActions[uint16(ext6[i])<<8|uint16(ext6[i+1])]; ok {
				return p.refuse("%s", why)
			}
		}
	}
	return nil
}

// componentName is the ribkeeper syntax name of a component type.
func componentName(t flowspec.ComponentType) string {
	if n, ok := componentNames[t]; ok {
		return n
	}
	return fmt.Sprintf("component %d", t)
}

var componentNames = map[flowspec.ComponentType]string{
	flowspec.DestinationPrefix: "destination", flowspec.SourcePrefix: "source",
	flowspec.Protocol: "protocol", flowspec.Port: "port", flowspec.DestinationPort: "destination-port",
	flowspec.SourcePort: "source-port", flowspec.ICMPType: "icmp-type", flowspec.ICMPCode: "icmp-code",
	flowspec.TCPFlags: "tcp-flags", flowspec.PacketLength: "packet-length", flowspec.DSCP: "dscp",
	flowspec.Fragment: "fragment", flowspec.FlowLabel: "flow-label",
}

// Lookup returns the built-in profile called name ("" is Generic).
func Lookup(name string) (*Profile, error) {
	if name == "" {
		name = Generic
	}
	for _, p := range builtin {
		if p.Name == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("unknown router profile %q: use one of %s", name, strings.Join(Names(), ", "))
}

// Names returns the built-in profile names, sorted.
func Names() []string {
	out := make([]string, 0, len(builtin))
	for _, p := range builtin {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}

// All returns the built-in profiles in Names order.
func All() []*Profile {
	out := slices.Clone(builtin)
	slices.SortFunc(out, func(a, b *Profile) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Restrictive reports whether p can hold back any rule (a check or a cap).
func (p *Profile) Restrictive() bool {
	return p != nil && (len(p.NoComponents) > 0 || p.NoNotEqual != "" || p.NoTrue != "" || p.NoFalse != "" ||
		p.MaxItems > 0 || p.MaxMultiValue > 0 || len(p.NoActions) > 0 || p.MaxRules > 0)
}
