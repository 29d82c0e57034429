package config

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ribkeeper/ribkeeper/flowspec"
	"github.com/ribkeeper/ribkeeper/profile"
)

// sessionFile is the TOML form of Session, shared by [[neighbor]] and
// [[peer_group]].
type sessionFile struct {
	ASN               int64    `toml:"asn"`
	Families          []string `toml:"families"`
	Description       string   `toml:"description"`
	HoldTime          string   `toml:"hold_time"`
	KeepaliveInterval string   `toml:"keepalive_interval"`
	MultihopTTL       int64    `toml:"multihop_ttl"`
	Password          string   `toml:"password"`
	PasswordEnv       string   `toml:"password_env"`
	PasswordFile      string   `toml:"password_file"`
	GracefulRestart   bool     `toml:"graceful_restart"`
	RestartTime       string   `toml:"restart_time"`
	ConnectRetry      string   `toml:"connect_retry"`
	Profile           string   `toml:"profile"`
	MaxPrefixes       *int64   `toml:"max_prefixes"`
}

// DefaultRestartTime is the graceful restart time when restart_time is
// not set.
const DefaultRestartTime = 120 * time.Second

// DefaultMaxPrefixes is a neighbor's max_prefixes when not set: the most
// routes it may send in one family before its session is closed (Cease,
// maximum number of prefixes reached) and kept down. ribkeeper uses no
// route a router sends, and GoBGP keeps every one of them in memory
// (about 1 KB each), so the limit bounds what a router that exports its
// full table costs; it closes no session of a router that sends nothing
// or a few routes.
const DefaultMaxPrefixes = 10000

// maxMaxPrefixes bounds max_prefixes (GoBGP's limit is a uint32).
const maxMaxPrefixes = 1 << 31

// DefaultConnectRetry is the time between connection attempts to a
// neighbor (and the wait after a session reset) when connect_retry is not
// set: a router that was not ready is retried within seconds, not after
// GoBGP's default of 120 s.
const DefaultConnectRetry = 5 * time.Second

// Default RTBH next hops: TEST-NET-1's 192.0.2.1, customarily routed to a
// discard interface for RTBH, and RFC 6666's discard-only prefix for IPv6.
var (
	DefaultNextHopIPv4 = netip.MustParseAddr("192.0.2.1")
	DefaultNextHopIPv6 = netip.MustParseAddr("100::1")
)

// session validates the shared settings; key names a field of the table.
func (v *validator) session(key func(string) string, s *sessionFile, neighbor bool) Session {
	var out Session
	who := "peer group"
	if neighbor {
		who = "neighbor"
	}
	if s.ASN == 0 {
		v.add(key("asn"), "missing: set the %s's AS number", who)
	} else if asn, ok := v.asn(key("asn"), s.ASN); ok {
		out.ASN = asn
	}
	if len(s.Families) == 0 {
		out.Families = []flowspec.Family{flowspec.IPv4, flowspec.IPv6}
	}
	seen := map[flowspec.Family]bool{}
	for _, name := range s.Families {
		fam, err := flowspec.ParseFamily(name)
		if err != nil {
			v.add(key("families"), "%q is not a supported family: use \"ipv4-flowspec\", \"ipv6-flowspec\", \"ipv4-unicast\" or \"ipv6-unicast\"", name)
			continue
		}
		if seen[fam] {
			v.add(key("families"), "%s is listed twice", fam)
			continue
		}
		seen[fam] = true
		out.Families = append(out.Families, fam)
	}
	out.Description = s.Description
	if _, err := profile.Lookup(s.Profile); err != nil {
		v.add(key("profile"), "%q is not a router profile: use one of %s (contrib/routers/README.md tells which)", s.Profile, strings.Join(profile.Names(), ", "))
	} else {
		out.Profile = s.Profile
	}

	out.HoldTime = v.duration(key("hold_time"), s.HoldTime, 3*time.Second, 65535*time.Second, "the hold time is 3s..65535s (BGP minimum 3s)")
	out.KeepaliveInterval = v.duration(key("keepalive_interval"), s.KeepaliveInterval, time.Second, 21845*time.Second, "the keepalive interval is at least 1s")
	if out.KeepaliveInterval > 0 {
		hold := out.HoldTime
		if hold == 0 {
			hold = 90 * time.Second
		}
		if out.KeepaliveInterval >= hold {
			v.add(key("keepalive_interval"), "%s is not shorter than the hold time %s: use at most a third of it", out.KeepaliveInterval, hold)
		}
	}
	switch {
	case s.MultihopTTL == 0:
	case s.MultihopTTL < 1 || s.MultihopTTL > 255:
		v.add(key("multihop_ttl"), "%d is not a TTL: use 1-255, or leave it out for a directly connected neighbor", s.MultihopTTL)
	default:
		out.MultihopTTL = uint8(s.MultihopTTL)
	}
	out.Password = v.password(key, s)
	out.GracefulRestart = s.GracefulRestart
	if s.RestartTime != "" && !s.GracefulRestart {
		v.add(key("restart_time"), "set only with graceful_restart = true")
	}
	if s.GracefulRestart {
		out.RestartTime = DefaultRestartTime
		if d := v.duration(key("restart_time"), s.RestartTime, time.Second, 4095*time.Second, "the graceful restart time is 1s..4095s (RFC 4724: 12 bits)"); d > 0 {
			out.RestartTime = d
		}
	}
	out.MaxPrefixes = DefaultMaxPrefixes
	if p := s.MaxPrefixes; p != nil {
		if *p < 0 || *p > maxMaxPrefixes {
			v.add(key("max_prefixes"), "%d is not a count: use the most routes the router may send per family (default %d), or 0 for no limit", *p, DefaultMaxPrefixes)
		} else {
			out.MaxPrefixes = uint32(*p)
		}
	}
	out.ConnectRetry = DefaultConnectRetry
	if d := v.duration(key("connect_retry"), s.ConnectRetry, 2*time.Second, time.Hour, "the connect retry is 2s..1h (GoBGP waits at least 2s between attempts)"); d > 0 {
		out.ConnectRetry = d
	}
	return out
}

// password reads the TCP MD5 key from exactly one of password,
// password_env or password_file.
func (v *validator) password(key func(string) string, s *sessionFile) string {
	n := 0
	for _, x := range []string{s.Password, s.PasswordEnv, s.PasswordFile} {
		if x != "" {
			n++
		}
	}
	if n > 1 {
		v.add(key("password"), "set only one of password, password_env and password_file")
		return ""
	}
	var pw, k string
	switch {
	case s.Password != "":
		pw, k = s.Password, key("password")
	case s.PasswordEnv != "":
		k = key("password_env")
		pw = os.Getenv(s.PasswordEnv)
		if pw == "" {
			v.add(k, "environment variable %s is not set or empty", s.PasswordEnv)
			return ""
		}
	case s.PasswordFile != "":
		k = key("password_file")
		b, err := os.ReadFile(s.PasswordFile)
		if err != nil {
			v.add(k, "cannot read the password file: %v", err)
			return ""
		}
		pw = strings.TrimRight(string(b), "\r\n")
		if pw == "" {
			v.add(k, "password file %s is empty", s.PasswordFile)
			return ""
		}
	default:
		return ""
	}
	if len(pw) > 80 {
		v.add(k, "the TCP MD5 password is %d bytes; the limit is 80", len(pw))
		return ""
	}
	return pw
}

// duration parses an optional duration in [lo, hi]; "" is 0.
func (v *validator) duration(key, s string, lo, hi time.Duration, hint string) time.Duration {
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < lo || d > hi {
		v.add(key, "%q is not a duration in range: %s (e.g. \"90s\")", s, hint)
		return 0
	}
	return d
}

// dynamic validates [[peer_group]] and [[dynamic_neighbor]].
func (v *validator) dynamic(f *file, c *Config) {
	groups := map[string]int{}
	for i, g := range f.PeerGroups {
		key := func(k string) string { return "peer_group." + strconv.Itoa(i) + "." + k }
		pg := PeerGroup{Name: g.Name, Session: v.session(key, &g.sessionFile, false)}
		switch j, dup := groups[g.Name]; {
		case g.Name == "":
			v.add(key("name"), "missing: name the peer group; dynamic neighbors refer to it")
		case !validName(g.Name):
			v.add(key("name"), "%q is not a valid peer group name: use letters, digits, '-', '_' or '.'", g.Name)
		case dup:
			v.add(key("name"), "peer group %q is defined twice (also peer_group %d)", g.Name, j+1)
		default:
			groups[g.Name] = i
		}
		c.PeerGroups = append(c.PeerGroups, pg)
	}
	seen := map[netip.Prefix]int{}
	for i, d := range f.DynamicNeighbors {
		key := func(k string) string { return "dynamic_neighbor." + strconv.Itoa(i) + "." + k }
		var dn DynamicNeighbor
		p, err := netip.ParsePrefix(d.Prefix)
		switch {
		case d.Prefix == "":
			v.add(key("prefix"), "missing: the prefix routers dial in from, e.g. \"192.0.2.0/24\"")
		case err != nil:
			v.add(key("prefix"), "%q is not a prefix such as 192.0.2.0/24", d.Prefix)
		case p.Masked() != p:
			v.add(key("prefix"), "%s has host bits set: write %s", p, p.Masked())
		default:
			dn.Prefix = p
			if j, dup := seen[p]; dup {
				v.add(key("prefix"), "%s is configured twice (also dynamic_neighbor %d)", p, j+1)
			}
			seen[p] = i
		}
		if _, ok := groups[d.PeerGroup]; !ok {
			if d.PeerGroup == "" {
				v.add(key("peer_group"), "missing: name the [[peer_group]] whose settings these sessions use")
			} else {
				v.add(key("peer_group"), "no [[peer_group]] is named %q", d.PeerGroup)
			}
		}
		dn.PeerGroup = d.PeerGroup
		c.DynamicNeighbors = append(c.DynamicNeighbors, dn)
	}
	if len(c.DynamicNeighbors) > 0 && c.BGP.ListenPort < 0 {
		v.add("dynamic_neighbor", "dynamic neighbors dial in, but bgp.listen_port is -1 (no listener)")
	}
}

// rtbh validates [rtbh].
func (v *validator) rtbh(f *file, c *Config) {
	c.RTBH.NextHopIPv4, c.RTBH.NextHopIPv6 = DefaultNextHopIPv4, DefaultNextHopIPv6
	if s := f.RTBH.NextHopIPv4; s != nil {
		a, err := netip.ParseAddr(*s)
		if err != nil || !a.Is4() {
			v.add("rtbh.next_hop_ipv4", "%q is not an IPv4 address", *s)
		} else {
			c.RTBH.NextHopIPv4 = a
		}
	}
	if s := f.RTBH.NextHopIPv6; s != nil {
		a, err := netip.ParseAddr(*s)
		if err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "" {
			v.add("rtbh.next_hop_ipv6", "%q is not an IPv6 address", *s)
		} else {
			c.RTBH.NextHopIPv6 = a
		}
	}
}

// guardrails validates [guardrails].
func (v *validator) guardrails(f *file, c *Config) {
	g := &f.Guardrails
	for i, s := range g.Safelist {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			if a, aerr := netip.ParseAddr(s); aerr == nil {
				p, err = netip.PrefixFrom(a, a.BitLen()), nil
			}
		}
		switch {
		case err != nil:
			v.add("guardrails.safelist", "entry %d, %q, is not a prefix such as 192.0.2.0/24", i+1, s)
		case p.Masked() != p:
			v.add("guardrails.safelist", "entry %d, %s, has host bits set: write %s", i+1, p, p.Masked())
		default:
			c.Guardrails.Safelist = append(c.Guardrails.Safelist, p)
		}
	}
	c.Guardrails.RequireTTL = g.RequireTTL
	c.Guardrails.AllowNeverExpire = g.AllowNeverExpire
	c.Guardrails.AllowNoDestination = g.AllowNoDestination
	c.Guardrails.DefaultTTL = v.ttl("guardrails.default_ttl", g.DefaultTTL, DefaultRuleTTL, "never",
		"rules without a TTL then never expire and need allow_never_expire")
	c.Guardrails.MaxTTL = v.ttl("guardrails.max_ttl", g.MaxTTL, DefaultMaxTTL, "none", "no TTL is too long")
	if d, m := c.Guardrails.TTLDefault(), c.Guardrails.TTLMax(); d > 0 && m > 0 && d > m {
		v.add("guardrails.default_ttl", "%s is longer than max_ttl %s: every rule without a TTL would be refused; shorten default_ttl or raise max_ttl", d, m)
	}
	for _, q := range []struct {
		key string
		n   int64
		dst *int
	}{
		{"guardrails.max_active_rules", g.MaxActiveRules, &c.Guardrails.MaxActiveRules},
		{"guardrails.max_rules_per_destination", g.MaxRulesPerDestination, &c.Guardrails.MaxRulesPerDestination},
		{"guardrails.max_new_rules_per_minute", g.MaxNewRulesPerMinute, &c.Guardrails.MaxNewRulesPerMinute},
	} {
		if q.n < 0 || q.n > 1<<31 {
			v.add(q.key, "%d is not a count: use a positive number, or 0 for no limit", q.n)
			continue
		}
		*q.dst = int(q.n)
	}
	pl := &g.PrefixLengths
	for _, r := range []struct {
		key  string
		fam  flowspec.Family
		vals []int64
	}{
		{"guardrails.prefix_lengths.ipv4_flowspec", flowspec.IPv4, pl.IPv4FlowSpec},
		{"guardrails.prefix_lengths.ipv6_flowspec", flowspec.IPv6, pl.IPv6FlowSpec},
		{"guardrails.prefix_lengths.ipv4_unicast", flowspec.IPv4Unicast, pl.IPv4Unicast},
		{"guardrails.prefix_lengths.ipv6_unicast", flowspec.IPv6Unicast, pl.IPv6Unicast},
	} {
		if r.vals == nil {
			continue
		}
		maxBits := int64(32)
		if r.fam.Is6() {
			maxBits = 128
		}
		if len(r.vals) != 2 || r.vals[0] < 0 || r.vals[0] > r.vals[1] || r.vals[1] > maxBits {
			v.add(r.key, "%v is not a range [shortest, longest] of prefix lengths within 0..%d, e.g. [24, %d]", r.vals, maxBits, maxBits)
			continue
		}
		if c.Guardrails.PrefixLengths == nil {
			c.Guardrails.PrefixLengths = map[flowspec.Family]Range{}
		}
		c.Guardrails.PrefixLengths[r.fam] = Range{Min: int(r.vals[0]), Max: int(r.vals[1])}
	}
}

// ttl reads a TTL setting of [guardrails]: "" is def, off (the word
// "never" or "none") is Unlimited, what off means; anything else is a
// duration of at least a second ("90m", "24h", "7d").
func (v *validator) ttl(key, s string, def time.Duration, off, means string) time.Duration {
	switch s = strings.TrimSpace(s); s {
	case "":
		return def
	case off:
		return Unlimited
	}
	d, ok := parseDays(s)
	if !ok || d < time.Second || d > 100*365*24*time.Hour {
		v.add(key, "%q is not a TTL: give a duration such as \"30m\", \"24h\" or \"7d\", or %q (%s)", s, off, means)
		return 0
	}
	return d
}

// Warnings returns what check-config reports without failing: neighbors
// and peer groups without a router profile (they get every rule, as the
// permissive "generic" profile; a router that cannot parse one may reset
// the session).
func (c *Config) Warnings() []string {
	var out []string
	for _, n := range c.Neighbors {
		if n.Profile == "" {
			out = append(out, fmt.Sprintf("neighbor %s has no profile: it gets every rule (profile \"generic\"); set profile = one of %s so that rules its router cannot take are held back (contrib/routers/README.md)",
				n.Address, strings.Join(profile.Names(), ", ")))
		}
	}
	for _, n := range c.Neighbors {
		if n.MaxPrefixes == 0 {
			out = append(out, fmt.Sprintf("neighbor %s has max_prefixes = 0: a router that sends its full table makes ribkeeper hold every route in memory (about 1 KB each); leave max_prefixes out for the default %d", n.Address, DefaultMaxPrefixes))
		}
	}
	for _, g := range c.PeerGroups {
		if g.MaxPrefixes == 0 {
			out = append(out, fmt.Sprintf("peer group %q has max_prefixes = 0: a router that sends its full table makes ribkeeper hold every route in memory (about 1 KB each); leave max_prefixes out for the default %d", g.Name, DefaultMaxPrefixes))
		}
	}
	for _, g := range c.PeerGroups {
		if g.Profile == "" {
			out = append(out, fmt.Sprintf("peer group %q has no profile: its routers get every rule (profile \"generic\"); set profile = one of %s (contrib/routers/README.md)",
				g.Name, strings.Join(profile.Names(), ", ")))
		}
	}
	return out
}
