package config

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// parseDays parses a Go duration, or a whole number of days "90d".
func parseDays(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseUint(n, 10, 16)
		return time.Duration(days) * 24 * time.Hour, err == nil
	}
	d, err := time.ParseDuration(s)
	return d, err == nil && d >= 0
}

// Defaults applied where the file is silent.
const (
	// DefaultHistoryRetention keeps 90 days of audit history.
	DefaultHistoryRetention = 90 * 24 * time.Hour
	// DefaultWriteTimeout bounds a write from arrival to commit.
	DefaultWriteTimeout = 5 * time.Second
	// DefaultIntegrityCheckInterval is how often the database is checked
	// for corruption while running.
	DefaultIntegrityCheckInterval = time.Hour
	DefaultSite                   = "default"
	DefaultListenPort             = 179
	DefaultResyncInterval         = 5 * time.Minute
	DefaultMaxWithdraw            = 10000
)

// file mirrors the TOML layout. Values stay in their textual form here and
// are converted and validated in one place, where errors can name the key.
type file struct {
	Site string `toml:"site"`
	Log  struct {
		Level  string `toml:"level"`
		Format string `toml:"format"`
	} `toml:"log"`
	BGP struct {
		ASN             int64    `toml:"asn"`
		RouterID        string   `toml:"router_id"`
		ListenAddresses []string `toml:"listen_addresses"`
		ListenPort      *int64   `toml:"listen_port"`
		GRPCListen      string   `toml:"grpc_listen"`
		GRPCAllowRemote bool     `toml:"grpc_allow_remote"`
		CompactAfter    *int64   `toml:"compact_after"`
	} `toml:"bgp"`
	Neighbors []struct {
		Address      string `toml:"address"`
		Port         int64  `toml:"port"`
		LocalAddress string `toml:"local_address"`
		Passive      bool   `toml:"passive"`
		sessionFile
	} `toml:"neighbor"`
	PeerGroups []struct {
		Name string `toml:"name"`
		sessionFile
	} `toml:"peer_group"`
	DynamicNeighbors []struct {
		Prefix    string `toml:"prefix"`
		PeerGroup string `toml:"peer_group"`
	} `toml:"dynamic_neighbor"`
	RTBH struct {
		NextHopIPv4 *string `toml:"next_hop_ipv4"`
		NextHopIPv6 *string `toml:"next_hop_ipv6"`
	} `toml:"rtbh"`
	Guardrails struct {
		Safelist               []string `toml:"safelist"`
		RequireTTL             bool     `toml:"require_ttl"`
		DefaultTTL             string   `toml:"default_ttl"`
		MaxTTL                 string   `toml:"max_ttl"`
		AllowNeverExpire       bool     `toml:"allow_never_expire"`
		AllowNoDestination     bool     `toml:"allow_no_destination"`
		MaxActiveRules         int64    `toml:"max_active_rules"`
		MaxRulesPerDestination int64    `toml:"max_rules_per_destination"`
		MaxNewRulesPerMinute   int64    `toml:"max_new_rules_per_minute"`
		PrefixLengths          struct {
			IPv4FlowSpec []int64 `toml:"ipv4_flowspec"`
			IPv6FlowSpec []int64 `toml:"ipv6_flowspec"`
			IPv4Unicast  []int64 `toml:"ipv4_unicast"`
			IPv6Unicast  []int64 `toml:"ipv6_unicast"`
		} `toml:"prefix_lengths"`
	} `toml:"guardrails"`
	Rules  []staticRuleFile `toml:"rule"`
	Limits struct {
		MaxBatchRules           int64 `toml:"max_batch_rules"`
		MaxSitesPerRule         int64 `toml:"max_sites_per_rule"`
		MaxSiteNameBytes        int64 `toml:"max_site_name_bytes"`
		MaxTextBytes            int64 `toml:"max_text_bytes"`
		ScopedNewRulesPerMinute int64 `toml:"scoped_new_rules_per_minute"`
		MaxSetRules             int64 `toml:"max_set_rules"`
		MaxSetBodyBytes         int64 `toml:"max_set_body_bytes"`
	} `toml:"limits"`
	Store struct {
		Driver           string `toml:"driver"`
		Path             string `toml:"path"`
		DSN              string `toml:"dsn"`
		HistoryRetention string `toml:"history_retention"`
		WriteTimeout     string `toml:"write_timeout"`
		IntegrityCheck   string `toml:"integrity_check_interval"`
		IdentityFile     string `toml:"identity_file"`
	} `toml:"store"`
	API struct {
		Socket  string   `toml:"socket"`
		Listen  string   `toml:"listen"`
		TLSCert string   `toml:"tls_cert"`
		TLSKey  string   `toml:"tls_key"`
		Hosts   []string `toml:"hosts"`
		Origins []string `toml:"origins"`
		// Bounds (all optional): see API.
		MaxConnections          *int64 `toml:"max_connections"`
		MaxEventStreams         *int64 `toml:"max_event_streams"`
		MaxEventStreamsPerToken *int64 `toml:"max_event_streams_per_token"`
		EventRingBytes          *int64 `toml:"event_ring_bytes"`
		MaxEventBytes           *int64 `toml:"max_event_bytes"`
		Tokens                  []struct {
			Name      string `toml:"name"`
			Role      string `toml:"role"`
			Token     string `toml:"token"`
			TokenEnv  string `toml:"token_env"`
			TokenFile string `toml:"token_file"`
			// Scope (all optional): see Token.
			Prefixes       []string `toml:"prefixes"`
			Actions        []string `toml:"actions"`
			MaxActiveRules *int64   `toml:"max_active_rules"`
			// Rate and permissions (all optional): see Token.
			MaxNewRulesPerMinute *int64 `toml:"max_new_rules_per_minute"`
			NeverExpires         bool   `toml:"never_expires"`
			OthersRules          bool   `toml:"others_rules"`
		} `toml:"token"`
	} `toml:"api"`
	Reconcile struct {
		ResyncInterval     string `toml:"resync_interval"`
		DryRun             bool   `toml:"dry_run"`
		MaxWithdrawPerPass *int64 `toml:"max_withdraw_per_pass"`
		AnnounceRate       *int64 `toml:"announce_rate"`
	} `toml:"reconcile"`
	Sources   []rawSource   `toml:"source"`
	Notify    []rawNotify   `toml:"notify"`
	Playbooks []rawPlaybook `toml:"playbook"`
	Incidents rawIncidents  `toml:"incidents"`
}

// Load reads and validates the file at path. The error, if any, is an
// Errors value listing every problem found.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w (pass an existing file with --config)", err)
	}
	return Parse(path, data)
}

// Parse validates data as the contents of the file name. Past a TOML
// syntax error nothing can be read; otherwise every problem of the file
// is reported, decoding (unknown keys, values of the wrong type) and
// checks alike, each with its key and line.
func Parse(name string, data []byte) (*Config, error) {
	var f file
	problems, bad, err := decodeFile(string(data), &f)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, Errors{{File: name, Line: pe.Position.Line, Key: pe.LastKey, Msg: pe.Message}}
		}
		return nil, Errors{{File: name, Msg: strings.TrimPrefix(err.Error(), "toml: ")}}
	}
	v := &validator{file: name, lines: indexLines(string(data))}
	for _, p := range problems {
		v.add(p.key, "%s", p.msg)
	}
	v.bad = bad
	cfg := v.build(&f)
	if len(v.errs) > 0 {
		// In file order, those without a line last.
		sort.SliceStable(v.errs, func(i, j int) bool {
			a, b := v.errs[i].Line, v.errs[j].Line
			return a != 0 && (b == 0 || a < b)
		})
		return nil, v.errs
	}
	cfg.lines = v.lines
	return cfg, nil
}

// Problem is a problem with the value of key that a check outside this
// package found (e.g. a static rule a guardrail refuses), located in the
// file like Load's own errors: "rule.0.text" is rule[1].text, with its
// line.
func (c *Config) Problem(key, format string, args ...any) *Error {
	v := validator{file: c.File, lines: c.lines}
	v.add(key, format, args...)
	return v.errs[0]
}

type validator struct {
	file  string
	lines map[string]int
	errs  Errors
	// bad holds the keys whose value could not be decoded; they were
	// reported once, and a check does not report them again (as missing).
	bad map[string]bool
}

func (v *validator) add(key, format string, args ...any) {
	for k := key; len(v.bad) > 0; {
		if v.bad[k] {
			return
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			break
		}
		k = k[:i]
	}
	v.errs = append(v.errs, &Error{File: v.file, Line: v.line(key), Key: key, Msg: fmt.Sprintf(format, args...)})
}

// line finds where key is written. Keys of array tables are tried with their
// index first ("neighbor.1.asn"), then without it, then their parents.
func (v *validator) line(key string) int {
	for k := key; k != ""; {
		if n, ok := v.lines[k]; ok {
			return n
		}
		if n, ok := v.lines[stripIndexes(k)]; ok {
			return n
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return 0
}

func (v *validator) build(f *file) *Config {
	c := &Config{File: v.file}

	c.Site = f.Site
	if c.Site == "" {
		c.Site = DefaultSite
	} else if !validName(c.Site) {
		v.add("site", "%q is not a valid site name: use letters, digits, '-', '_' or '.'", c.Site)
	}

	c.Log.Level = strings.ToLower(orDefault(f.Log.Level, "info"))
	switch c.Log.Level {
	case "trace", "debug", "info", "warn", "error":
	default:
		v.add("log.level", "%q is not a log level: use trace, debug, info, warn or error", f.Log.Level)
	}
	c.Log.Format = strings.ToLower(orDefault(f.Log.Format, "text"))
	if c.Log.Format != "text" && c.Log.Format != "json" {
		v.add("log.format", "%q is not a log format: use \"text\" or \"json\"", f.Log.Format)
	}

	// [bgp]
	if f.BGP.ASN == 0 {
		v.add("bgp.asn", "missing: set the local AS number, e.g. asn = 65000")
	} else if asn, ok := v.asn("bgp.asn", f.BGP.ASN); ok {
		c.BGP.ASN = asn
	}
	if f.BGP.RouterID == "" {
		v.add("bgp.router_id", "missing: set an IPv4 router id, e.g. router_id = \"192.0.2.1\"")
	} else if a, err := netip.ParseAddr(f.BGP.RouterID); err != nil || !a.Is4() {
		v.add("bgp.router_id", "%q is not an IPv4 address; the BGP router id is written as one", f.BGP.RouterID)
	} else {
		c.BGP.RouterID = a
	}
	for i, s := range f.BGP.ListenAddresses {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			v.add("bgp.listen_addresses", "entry %d, %q, is not an IP address", i+1, s)
			continue
		}
		c.BGP.ListenAddresses = append(c.BGP.ListenAddresses, a)
	}
	c.BGP.ListenPort = DefaultListenPort
	if f.BGP.ListenPort != nil {
		p := *f.BGP.ListenPort
		if p != -1 && (p < 1 || p > 65535) {
			v.add("bgp.listen_port", "%d is not a TCP port: use 1-65535, or -1 to accept no incoming sessions", p)
		} else {
			c.BGP.ListenPort = int32(p)
		}
	}
	v.grpcAndCompaction(f, c)

	// [[neighbor]]
	seen := map[netip.Addr]int{}
	for i, n := range f.Neighbors {
		key := func(k string) string { return "neighbor." + strconv.Itoa(i) + "." + k }
		nb := Neighbor{Session: v.session(key, &n.sessionFile, true)}
		a, err := netip.ParseAddr(n.Address)
		switch {
		case n.Address == "":
			v.add(key("address"), "missing: set the neighbor's IP address")
		case err != nil || a.Zone() != "":
			v.add(key("address"), "%q is not an IP address", n.Address)
		default:
			nb.Address = a
			if j, dup := seen[a]; dup {
				v.add(key("address"), "neighbor %s is configured twice (also neighbor %d): remove one", a, j+1)
			}
			seen[a] = i
		}
		switch {
		case n.Port == 0:
			nb.Port = 179
		case n.Port < 1 || n.Port > 65535:
			v.add(key("port"), "%d is not a TCP port: use 1-65535 (default 179)", n.Port)
		default:
			nb.Port = uint16(n.Port)
		}
		if n.LocalAddress != "" {
			la, err := netip.ParseAddr(n.LocalAddress)
			if err != nil || la.Zone() != "" {
				v.add(key("local_address"), "%q is not an IP address", n.LocalAddress)
			} else if nb.Address.IsValid() && la.Is4() != nb.Address.Is4() {
				v.add(key("local_address"), "%s and the neighbor address %s are of different families", la, nb.Address)
			} else {
				nb.LocalAddress = la
			}
		}
		nb.Passive = n.Passive
		if nb.Passive && c.BGP.ListenPort < 0 {
			v.add(key("passive"), "a passive neighbor must dial in, but bgp.listen_port is -1 (no listener)")
		}
		c.Neighbors = append(c.Neighbors, nb)
	}
	v.dynamic(f, c)
	v.rtbh(f, c)
	v.guardrails(f, c)
	v.limits(f, c)
	c.Guardrails.Protected = protectedOf(c)
	v.staticRules(f.Rules, c)

	// [store]
	c.Store.Driver = strings.ToLower(orDefault(f.Store.Driver, "sqlite"))
	switch c.Store.Driver {
	case "sqlite":
		c.Store.Path = orDefault(f.Store.Path, filepath.Join("data", "ribkeeper.db"))
		if f.Store.DSN != "" {
			v.add("store.dsn", "set only with driver = \"postgres\"")
		}
	case "postgres":
		c.Store.DSN = f.Store.DSN
		if c.Store.DSN == "" {
			c.Store.DSN = os.Getenv(DSNEnv)
		}
		if c.Store.DSN == "" {
			v.add("store.dsn", "missing: set dsn, or the environment variable %s, to a PostgreSQL connection string", DSNEnv)
		}
		if f.Store.Path != "" {
			v.add("store.path", "set only with driver = \"sqlite\"")
		}
	default:
		v.add("store.driver", "%q is not a store driver: use \"sqlite\" or \"postgres\"", f.Store.Driver)
	}

	c.Store.HistoryRetention = DefaultHistoryRetention
	if r := f.Store.HistoryRetention; r != "" {
		d, ok := parseDays(r)
		switch {
		case !ok:
			v.add("store.history_retention", "%q is not a duration such as \"90d\" or \"720h\" (or \"0\": keep forever)", r)
		case d != 0 && d < time.Hour:
			v.add("store.history_retention", "%q is shorter than 1h: keep at least an hour of history, or \"0\" to keep it forever", r)
		default:
			c.Store.HistoryRetention = d
		}
	}

	c.Store.WriteTimeout = DefaultWriteTimeout
	if d := v.duration("store.write_timeout", f.Store.WriteTimeout, 100*time.Millisecond, 10*time.Minute,
		"100ms..10m: how long a write may take to reach the disk before it is answered 503"); d > 0 {
		c.Store.WriteTimeout = d
	}
	c.Store.IntegrityCheckInterval = DefaultIntegrityCheckInterval
	if r := f.Store.IntegrityCheck; r == "0" {
		c.Store.IntegrityCheckInterval = 0
	} else if d := v.duration("store.integrity_check_interval", r, time.Second, 30*24*time.Hour,
		"1s..720h, or \"0\" to check only at start"); d > 0 {
		c.Store.IntegrityCheckInterval = d
	}
	c.Store.IdentityFile = f.Store.IdentityFile
	if c.Store.IdentityFile == "" && c.Store.Driver == "sqlite" {
		base := strings.TrimSuffix(filepath.Base(c.Store.Path), filepath.Ext(c.Store.Path))
		c.Store.IdentityFile = filepath.Join(filepath.Dir(c.Store.Path), base+".identity")
	}

	// [api]
	c.API.Socket = orDefault(f.API.Socket, filepath.Join("data", "ribkeeper.sock"))
	v.apiListener(f, c)
	v.apiBounds(f, c)
	v.sources(f, c)
	v.notifyTargets(f, c)
	v.playbooks(f, c)

	// [reconcile]
	c.Reconcile.ResyncInterval = DefaultResyncInterval
	if s := f.Reconcile.ResyncInterval; s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Second {
			v.add("reconcile.resync_interval", "%q is not a duration of at least 1s (e.g. \"5m\")", s)
		} else {
			c.Reconcile.ResyncInterval = d
		}
	}
	c.Reconcile.DryRun = f.Reconcile.DryRun
	c.Reconcile.MaxWithdrawPerPass = v.nonNegative("reconcile.max_withdraw_per_pass", f.Reconcile.MaxWithdrawPerPass, DefaultMaxWithdraw, "use 0 for no cap, or a positive number")
	c.Reconcile.AnnounceRate = v.nonNegative("reconcile.announce_rate", f.Reconcile.AnnounceRate, DefaultAnnounceRate, "use 0 for unpaced, or paths per second")
	return c
}

// nonNegative returns *p, or def when the key is absent; a negative value
// is an error whose message ends with hint.
func (v *validator) nonNegative(key string, p *int64, def int, hint string) int {
	switch {
	case p == nil:
		return def
	case *p < 0:
		v.add(key, "%d is negative: %s", *p, hint)
		return def
	}
	return int(*p)
}

func (v *validator) asn(key string, n int64) (uint32, bool) {
	if n < 1 || n > 4294967295 || n == 23456 {
		v.add(key, "%d is not a usable AS number: use 1-4294967295 (not 23456, AS_TRANS)", n)
		return 0, false
	}
	return uint32(n), true
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func validName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return s != ""
}
