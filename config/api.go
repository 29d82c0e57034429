package config

import (
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// minTokenLen is the shortest bearer token accepted: shorter ones can be
// guessed over the network.
const minTokenLen = 16

// apiListener validates [api] listen, tls_cert, tls_key and [[api.token]].
func (v *validator) apiListener(f *file, c *Config) {
	a := &f.API
	c.API.Listen = a.Listen
	c.API.TLSCert, c.API.TLSKey = a.TLSCert, a.TLSKey
	if (a.TLSCert == "") != (a.TLSKey == "") {
		v.add("api.tls_cert", "set both tls_cert and tls_key, or neither")
	}
	if a.TLSCert != "" && a.Listen == "" {
		v.add("api.tls_cert", "set only with listen: TLS applies to the TCP listener")
	}
	seen := map[string]int{}
	for i, t := range a.Tokens {
		key := func(k string) string { return "api.token." + strconv.Itoa(i) + "." + k }
		tok := Token{Name: t.Name, Role: strings.ToLower(t.Role)}
		switch {
		case t.Name == "":
			v.add(key("name"), "missing: name the token; the name is the actor in the audit trail")
		case !validName(t.Name):
			v.add(key("name"), "%q is not a valid token name: use letters, digits, '-', '_' or '.'", t.Name)
		case t.Name == "config" || t.Name == "guardrail" || t.Name == "reconciler" || t.Name == "cli":
			v.add(key("name"), "%q is the actor of ribkeeper's own changes: choose another token name", t.Name)
		default:
			if j, dup := seen[t.Name]; dup {
				v.add(key("name"), "token name %q is used twice (also token %d)", t.Name, j+1)
			}
			seen[t.Name] = i
		}
		if tok.Role != "read" && tok.Role != "write" {
			v.add(key("role"), "%q is not a role: use \"read\" or \"write\"", t.Role)
		}
		v.tokenScope(key, t.Prefixes, t.Actions, t.MaxActiveRules, &tok)
		tok.NeverExpires, tok.OthersRules = t.NeverExpires, t.OthersRules
		if n := t.MaxNewRulesPerMinute; n != nil {
			if *n < -1 || *n > 1<<31 {
				v.add(key("max_new_rules_per_minute"), "%d is not a rate: use a positive number, or -1 for no cap", *n)
			} else {
				tok.MaxNewRulesPerMinute = int(*n)
			}
		}
		if tok.Role == "read" && (t.NeverExpires || t.OthersRules || t.MaxNewRulesPerMinute != nil) {
			v.add(key("role"), "a read token writes nothing: remove never_expires, others_rules and max_new_rules_per_minute, or give the token role \"write\"")
		}
		sources := 0
		for _, s := range []string{t.Token, t.TokenEnv, t.TokenFile} {
			if s != "" {
				sources++
			}
		}
		if sources != 1 {
			v.add(key("token"), "set exactly one of token, token_env or token_file")
			continue
		}
		switch {
		case t.Token != "":
			tok.Secret = t.Token
		case t.TokenEnv != "":
			tok.Secret = os.Getenv(t.TokenEnv)
			if tok.Secret == "" {
				v.add(key("token_env"), "environment variable %s is empty or not set", t.TokenEnv)
				continue
			}
		default:
			if problems := secretFileProblems(t.TokenFile); len(problems) > 0 {
				for _, p := range problems {
					v.add(key("token_file"), "%s", p)
				}
				continue
			}
			b, err := os.ReadFile(t.TokenFile)
			if err != nil {
				v.add(key("token_file"), "cannot read the token: %v", err)
				continue
			}
			tok.Secret = strings.TrimSpace(string(b))
		}
		if len(tok.Secret) < minTokenLen {
			v.add(key("token"), "the token is shorter than %d characters; use e.g. `openssl rand -hex 32`", minTokenLen)
			continue
		}
		c.API.Tokens = append(c.API.Tokens, tok)
	}
	if len(a.Tokens) > 0 && a.Listen == "" {
		v.add("api.token", "tokens apply to the TCP listener: set listen too (the control socket needs none)")
	}
	v.apiNames(a.Listen, a.Hosts, a.Origins, &c.API)
	if a.Listen == "" {
		return
	}
	host, port, err := net.SplitHostPort(a.Listen)
	if err != nil {
		v.add("api.listen", "%q is not host:port, e.g. \"127.0.0.1:8080\"", a.Listen)
		return
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		v.add("api.listen", "%q: the port must be 1-65535", a.Listen)
	}
	if len(a.Tokens) == 0 && !loopbackHost(host) {
		v.add("api.listen", "%s is not a loopback address and no [[api.token]] is set: refusing an unauthenticated API on the network", a.Listen)
	}
}

// apiBounds validates the [api] bounds on connections, event streams and
// the event ring.
func (v *validator) apiBounds(f *file, c *Config) {
	a := &f.API
	positive := func(key string, p *int64, def, least int, hint string) int {
		switch {
		case p == nil:
			return def
		case *p < int64(least) || *p > 1<<31:
			v.add("api."+key, "%d is out of range: %s", *p, hint)
			return def
		}
		return int(*p)
	}
	c.API.MaxConnections = positive("max_connections", a.MaxConnections, 0, 0,
		"use a positive number of connections, or 0 to derive it from the open-file limit")
	c.API.MaxEventStreams = positive("max_event_streams", a.MaxEventStreams, 0, 0,
		"use a positive number of streams, or 0 to derive it from the open-file limit")
	c.API.MaxEventStreamsPerToken = positive("max_event_streams_per_token", a.MaxEventStreamsPerToken, DefaultMaxEventStreamsPerToken, 1,
		"use a positive number of streams (a console tab holds one)")
	c.API.EventRingBytes = positive("event_ring_bytes", a.EventRingBytes, DefaultEventRingBytes, minEventRingBytes,
		fmt.Sprintf("use at least %d bytes (default %d)", minEventRingBytes, DefaultEventRingBytes))
	c.API.MaxEventBytes = positive("max_event_bytes", a.MaxEventBytes, DefaultMaxEventBytes, minMaxEventBytes,
		fmt.Sprintf("use at least %d bytes (default %d)", minMaxEventBytes, DefaultMaxEventBytes))
	if c.API.MaxEventBytes > c.API.EventRingBytes {
		v.add("api.max_event_bytes", "%d is larger than event_ring_bytes (%d): the ring must hold at least one event; lower it or raise event_ring_bytes",
			c.API.MaxEventBytes, c.API.EventRingBytes)
	}
	if c.API.MaxConnections > 0 && c.API.MaxEventStreams > c.API.MaxConnections {
		v.add("api.max_event_streams", "%d is more than max_connections (%d): every stream is a connection; lower it or raise max_connections",
			c.API.MaxEventStreams, c.API.MaxConnections)
	}
}

// tokenScope validates the scope of a token (prefixes, actions,
// max_active_rules) into tok.
func (v *validator) tokenScope(key func(string) string, prefixes, actions []string, maxActive *int64, tok *Token) {
	if prefixes != nil && len(prefixes) == 0 {
		v.add(key("prefixes"), "an empty list lets the token act on no destination: list prefixes such as \"192.0.2.0/24\", or remove prefixes for every destination")
	}
	for i, s := range prefixes {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			if a, aerr := netip.ParseAddr(strings.TrimSpace(s)); aerr == nil {
				p, err = netip.PrefixFrom(a, a.BitLen()), nil
			}
		}
		switch {
		case err != nil:
			v.add(key("prefixes"), "entry %d, %q, is not a prefix such as 192.0.2.0/24 or 2001:db8::/32", i+1, s)
		case p.Addr().Zone() != "":
			v.add(key("prefixes"), "entry %d, %q, has a zone: write the prefix without %%%s", i+1, s, p.Addr().Zone())
		case p.Addr().Is4In6():
			v.add(key("prefixes"), "entry %d, %s, is an IPv4-mapped IPv6 prefix: write it as IPv4 (%s)", i+1, p, netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96))
		case p.Masked() != p:
			v.add(key("prefixes"), "entry %d, %s, has host bits set: write %s", i+1, p, p.Masked())
		default:
			tok.Prefixes = append(tok.Prefixes, p)
		}
	}
	if actions != nil && len(actions) == 0 {
		v.add(key("actions"), "an empty list allows no action: list some of %s, or remove actions for every action", strings.Join(flowspec.ActionNames(), ", "))
	}
	for i, a := range actions {
		name, ok := flowspec.CanonicalActionName(a)
		if !ok {
			v.add(key("actions"), "entry %d, %q, is not an action: use %s (\"blackhole\" is rtbh)", i+1, a, strings.Join(flowspec.ActionNames(), ", "))
			continue
		}
		if !slices.Contains(tok.Actions, name) {
			tok.Actions = append(tok.Actions, name)
		}
	}
	if maxActive != nil {
		if *maxActive < 0 || *maxActive > 1<<31 {
			v.add(key("max_active_rules"), "%d is not a count: use a positive number, or remove it for no cap", *maxActive)
		} else {
			tok.MaxActiveRules = int(*maxActive)
		}
	}
	if tok.Role == "read" {
		if actions != nil {
			v.add(key("actions"), "a read token adds no rules: remove actions, or give the token role \"write\"")
		}
		if maxActive != nil {
			v.add(key("max_active_rules"), "a read token adds no rules: remove max_active_rules, or give the token role \"write\"")
		}
	}
}

// loopbackHost reports whether host names only loopback addresses; an empty
// host or a wildcard listens everywhere.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// secretFileProblems refuses a token file that others could read, or
// replace, as ssh does with keys: the file must not be readable or
// writable by group or others, and its directory not writable by them
// unless sticky (as /tmp is). Each problem says the command that fixes it.
func secretFileProblems(path string) []string {
	fi, err := os.Stat(path)
	if err != nil {
		return nil // reading it says why
	}
	var out []string
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		out = append(out, fmt.Sprintf("token file %s has mode %04o: group or others can read it (or change it); run `chmod 600 %s`",
			path, m, shellWord(path)))
	}
	dir := filepath.Dir(path)
	if di, err := os.Stat(dir); err == nil {
		if m := di.Mode(); m.Perm()&0o022 != 0 && m&fs.ModeSticky == 0 {
			out = append(out, fmt.Sprintf("the directory %s of token file %s has mode %04o: group or others can replace the token in it; run `chmod go-w %s`",
				dir, path, m.Perm(), shellWord(dir)))
		}
	}
	return out
}

// shellWord quotes a path for a shell when it needs it.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,=@:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// apiNames validates [api] hosts and origins: further names the TCP
// listener answers to (Host header), and further web origins whose pages
// may write.
func (v *validator) apiNames(listen string, hosts, origins []string, c *API) {
	if listen == "" {
		if hosts != nil {
			v.add("api.hosts", "set only with listen: names apply to the TCP listener")
		}
		if origins != nil {
			v.add("api.origins", "set only with listen: origins apply to the TCP listener")
		}
		return
	}
	for i, h := range hosts {
		n := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
		if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(n, "["), "]")); err == nil && a.Zone() == "" {
			c.Hosts = append(c.Hosts, a.Unmap().String())
			continue
		}
		switch {
		case strings.Contains(n, "://"):
			v.add("api.hosts", "entry %d, %q, is a URL: write the name alone, e.g. \"rk.example.net\" (web origins go in origins)", i+1, h)
		case strings.Contains(n, ":"):
			v.add("api.hosts", "entry %d, %q, has a port: write the name alone, it matches every port", i+1, h)
		case strings.Contains(n, "*"):
			v.add("api.hosts", "entry %d, %q: wildcards are not supported, list each name", i+1, h)
		case !hostName(n):
			v.add("api.hosts", "entry %d, %q, is not a host name such as \"rk.example.net\" or an address", i+1, h)
		default:
			c.Hosts = append(c.Hosts, n)
		}
	}
	for i, o := range origins {
		u, err := url.Parse(strings.TrimSpace(o))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
			v.add("api.origins", "entry %d, %q, is not a web origin: write scheme://host[:port] as the browser shows it, e.g. \"https://noc.example.net\"", i+1, o)
			continue
		}
		c.Origins = append(c.Origins, strings.ToLower(u.Scheme+"://"+u.Host))
	}
}

// hostName reports whether s is a DNS name: dot-separated labels of
// letters, digits, '-' and '_'.
func hostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			return false
		}
	}
	return true
}
