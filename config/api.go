package config

import (
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
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

// loopbackHost reports whether host names only loopback addresses; an empty
// host or a wildcard listens everywhere.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}
