package config

import (
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// Source kinds: how a detector sends its signals.
const (
	// SourceWebhook: the generic JSON endpoint, each request signed with
	// HMAC-SHA256 under the source's secret.
	SourceWebhook = "webhook"
	// SourceAlertmanager: Alertmanager's webhook receiver, authenticated
	// with the secret as a bearer token.
	SourceAlertmanager = "alertmanager"
	// SourceFastNetMon: FastNetMon's notify script (contrib/fastnetmon),
	// authenticated with the secret as a bearer token.
	SourceFastNetMon = "fastnetmon"
	// SourceGoBGP: a client of the GoBGP v3 gRPC API (FastNetMon with
	// gobgp = on) on the source's own listeners; its AddPath calls become
	// signals.
	SourceGoBGP = "gobgp"
)

// DefaultGoBGPListen is where FastNetMon dials GoBGP: localhost:50051,
// which gRPC resolves to both loopback addresses.
var DefaultGoBGPListen = []string{"127.0.0.1:50051", "[::1]:50051"}

// Source is one detector allowed to send signals ([[source]]). Name is
// the actor of every rule its signals cause; the scope fields are those of
// a token ([api.token]) and bound what its playbooks may write.
type Source struct {
	Name string
	Kind string
	// Secret authenticates it: the HMAC key of a webhook source, the
	// bearer token of an alertmanager or fastnetmon source; empty for a
	// gobgp source (its listeners are loopback or mTLS).
	Secret string
	// Listen: a gobgp source's listeners (default DefaultGoBGPListen).
	Listen []string
	// TLS of a gobgp source's listeners (optional): the server's
	// certificate and key, and the CA its clients' certificates must chain
	// to (mTLS). Without them the listeners must be loopback.
	TLSCert, TLSKey, TLSClientCA string
	// Scope, rate and permissions, as Token's.
	Prefixes             []netip.Prefix
	Actions              []string
	MaxActiveRules       int
	MaxNewRulesPerMinute int
	NeverExpires         bool

	// TimestampWindow: how far a webhook request's signed timestamp may
	// be from the daemon's clock, either way (default
	// DefaultTimestampWindow); signatures are remembered that long.
	TimestampWindow time.Duration
	// ReplayCache caps the signatures a webhook source's requests are
	// remembered by (default DefaultReplayCache): beyond it a request is
	// refused (429) until older ones leave the window.
	ReplayCache int
	// MaxSignalsPerRequest caps the signals of one webhook request and
	// the alerts of one Alertmanager notification (default
	// DefaultMaxSignalsPerRequest).
	MaxSignalsPerRequest int
	// Labels maps an alertmanager source's alert labels (or annotations)
	// to signal fields.
	Labels AlertLabels
}

// Defaults of a source's bounds.
const (
	DefaultTimestampWindow      = 5 * time.Minute
	DefaultReplayCache          = 65536
	DefaultMaxSignalsPerRequest = 100
)

// AlertLabels names the labels of an Alertmanager alert that carry each
// field of a signal; each is looked up in the alert's labels, then its
// annotations. Target is a list: the first label present wins, and a
// value "host:port" (Prometheus' instance) counts as its host.
type AlertLabels struct {
	Target                       []string
	Protocol, SrcPorts, DstPorts string
	TCPFlags, PPS, BPS           string
	Confidence, AttackID, Detail string
}

// DefaultAlertLabels are the labels used for the fields a source does
// not map ([source.labels]).
var DefaultAlertLabels = AlertLabels{
	Target:   []string{"target", "instance"},
	Protocol: "protocol", SrcPorts: "src_port", DstPorts: "dst_port", TCPFlags: "tcp_flags",
	PPS: "pps", BPS: "bps", Confidence: "confidence", AttackID: "attack_id", Detail: "summary",
}

// rawLabels mirrors [source.labels].
type rawLabels struct {
	Target     []string `toml:"target"`
	Protocol   string   `toml:"protocol"`
	SrcPorts   string   `toml:"src_ports"`
	DstPorts   string   `toml:"dst_ports"`
	TCPFlags   string   `toml:"tcp_flags"`
	PPS        string   `toml:"pps"`
	BPS        string   `toml:"bps"`
	Confidence string   `toml:"confidence"`
	AttackID   string   `toml:"attack_id"`
	Detail     string   `toml:"detail"`
}

// rawSource mirrors one [[source]] table.
type rawSource struct {
	Name        string   `toml:"name"`
	Kind        string   `toml:"kind"`
	Secret      string   `toml:"secret"`
	SecretEnv   string   `toml:"secret_env"`
	SecretFile  string   `toml:"secret_file"`
	Listen      []string `toml:"listen"`
	TLSCert     string   `toml:"tls_cert"`
	TLSKey      string   `toml:"tls_key"`
	TLSClientCA string   `toml:"tls_client_ca"`
	// Scope (all optional): see Source.
	Prefixes             []string `toml:"prefixes"`
	Actions              []string `toml:"actions"`
	MaxActiveRules       *int64   `toml:"max_active_rules"`
	MaxNewRulesPerMinute *int64   `toml:"max_new_rules_per_minute"`
	NeverExpires         bool     `toml:"never_expires"`
	// Bounds of the ways in (see Source).
	TimestampWindow      string     `toml:"timestamp_window"`
	ReplayCache          *int64     `toml:"replay_cache"`
	MaxSignalsPerRequest *int64     `toml:"max_signals_per_request"`
	Labels               *rawLabels `toml:"labels"`
}

// sources validates the [[source]] tables into c.Sources.
func (v *validator) sources(f *file, c *Config) {
	seen := map[string]bool{}
	for i, s := range f.Sources {
		key := func(k string) string { return "source." + strconv.Itoa(i) + "." + k }
		src := Source{Name: s.Name, Kind: strings.ToLower(s.Kind), NeverExpires: s.NeverExpires}
		switch {
		case s.Name == "":
			v.add(key("name"), "missing: name the detector, e.g. name = \"fastnetmon\"; it is the actor of the rules its signals cause")
		case !validName(s.Name):
			v.add(key("name"), "%q is not a valid name: use letters, digits, '-', '_' or '.'", s.Name)
		case seen[s.Name]:
			v.add(key("name"), "%q names two sources: give each its own name", s.Name)
		}
		seen[s.Name] = true
		switch src.Kind {
		case SourceWebhook, SourceAlertmanager, SourceFastNetMon, SourceGoBGP:
		case "":
			v.add(key("kind"), "missing: use \"webhook\", \"alertmanager\", \"fastnetmon\" or \"gobgp\"")
		default:
			v.add(key("kind"), "%q is not a source kind: use \"webhook\", \"alertmanager\", \"fastnetmon\" or \"gobgp\"", s.Kind)
		}
		if src.Kind == SourceGoBGP {
			v.gobgpSource(key, s, &src)
		} else {
			if len(s.Listen) > 0 || s.TLSCert != "" || s.TLSKey != "" || s.TLSClientCA != "" {
				v.add(key("listen"), "only a gobgp source has its own listeners and TLS: a %s source sends to the API's listener", src.Kind)
			}
			src.Secret, _ = v.secret(key, s.Secret, s.SecretEnv, s.SecretFile, "secret")
		}
		v.sourceBounds(key, s, &src)
		// The scope of a source is a token's: reuse its checks.
		tok := Token{Role: "write"}
		v.tokenScope(key, s.Prefixes, s.Actions, s.MaxActiveRules, &tok)
		src.Prefixes, src.Actions, src.MaxActiveRules = tok.Prefixes, tok.Actions, tok.MaxActiveRules
		if s.MaxNewRulesPerMinute != nil {
			n := *s.MaxNewRulesPerMinute
			if n < -1 || n > 1<<31 {
				v.add(key("max_new_rules_per_minute"), "%d is not a rate: use a positive number, -1 for no cap, or remove it for [limits] scoped_new_rules_per_minute", n)
			} else {
				src.MaxNewRulesPerMinute = int(n)
			}
		}
		c.Sources = append(c.Sources, src)
	}
}

// sourceBounds validates the bounds of the HTTP ways in: the timestamp
// window and replay cache of a webhook source, the signals per request
// of a webhook or alertmanager source, and an alertmanager source's
// labels.
func (v *validator) sourceBounds(key func(string) string, s rawSource, src *Source) {
	if src.Kind != SourceWebhook && (s.TimestampWindow != "" || s.ReplayCache != nil) {
		v.add(key("timestamp_window"), "timestamp_window and replay_cache are for a webhook source (signed requests); a %s source has none: remove them", src.Kind)
	}
	if src.Kind != SourceWebhook && src.Kind != SourceAlertmanager && s.MaxSignalsPerRequest != nil {
		v.add(key("max_signals_per_request"), "max_signals_per_request is for a webhook or alertmanager source; a %s source sends one signal at a time: remove it", src.Kind)
	}
	if src.Kind != SourceAlertmanager && s.Labels != nil {
		v.add(key("labels"), "[source.labels] maps an alertmanager source's alert labels; a %s source has none: remove it", src.Kind)
	}
	src.TimestampWindow = DefaultTimestampWindow
	if s.TimestampWindow != "" {
		if d := v.duration(key("timestamp_window"), s.TimestampWindow, time.Second, 24*time.Hour, "1s..24h, default 5m"); d > 0 {
			src.TimestampWindow = d
		}
	}
	src.ReplayCache = DefaultReplayCache
	if n := s.ReplayCache; n != nil {
		if *n < 1 || *n > 1<<24 {
			v.add(key("replay_cache"), "%d is not a cache size: use 1..16777216 signatures (default %d)", *n, DefaultReplayCache)
		} else {
			src.ReplayCache = int(*n)
		}
	}
	src.MaxSignalsPerRequest = DefaultMaxSignalsPerRequest
	if n := s.MaxSignalsPerRequest; n != nil {
		if *n < 1 || *n > 10000 {
			v.add(key("max_signals_per_request"), "%d is not a count: use 1..10000 (default %d)", *n, DefaultMaxSignalsPerRequest)
		} else {
			src.MaxSignalsPerRequest = int(*n)
		}
	}
	src.Labels = DefaultAlertLabels
	if l := s.Labels; l != nil {
		if len(l.Target) > 0 {
			src.Labels.Target = l.Target
		}
		for _, f := range []struct {
			raw string
			dst *string
		}{{l.Protocol, &src.Labels.Protocol}, {l.SrcPorts, &src.Labels.SrcPorts}, {l.DstPorts, &src.Labels.DstPorts},
			{l.TCPFlags, &src.Labels.TCPFlags}, {l.PPS, &src.Labels.PPS}, {l.BPS, &src.Labels.BPS},
			{l.Confidence, &src.Labels.Confidence}, {l.AttackID, &src.Labels.AttackID}, {l.Detail, &src.Labels.Detail}} {
			if f.raw != "" {
				*f.dst = f.raw
			}
		}
		for _, t := range src.Labels.Target {
			if t == "" {
				v.add(key("labels.target"), "an empty label name: list label names, e.g. target = [\"target\", \"instance\"]")
			}
		}
	}
}

// gobgpSource validates the listeners and TLS of a gobgp source.
func (v *validator) gobgpSource(key func(string) string, s rawSource, src *Source) {
	if s.Secret != "" || s.SecretEnv != "" || s.SecretFile != "" {
		v.add(key("secret"), "a gobgp source has no secret (the GoBGP API has none): it is bound by its listeners, loopback or mTLS; remove secret")
	}
	src.Listen = s.Listen
	if len(src.Listen) == 0 {
		src.Listen = DefaultGoBGPListen
	}
	src.TLSCert, src.TLSKey, src.TLSClientCA = s.TLSCert, s.TLSKey, s.TLSClientCA
	tlsSet := s.TLSCert != "" || s.TLSKey != "" || s.TLSClientCA != ""
	if tlsSet && (s.TLSCert == "" || s.TLSKey == "" || s.TLSClientCA == "") {
		v.add(key("tls_cert"), "mTLS needs all of tls_cert, tls_key and tls_client_ca")
	}
	for _, p := range []struct{ k, path string }{{"tls_cert", s.TLSCert}, {"tls_key", s.TLSKey}, {"tls_client_ca", s.TLSClientCA}} {
		if p.path == "" {
			continue
		}
		if _, err := os.Stat(p.path); err != nil {
			v.add(key(p.k), "cannot read %s: %v", p.path, err)
		}
	}
	for i, l := range src.Listen {
		host, port, err := net.SplitHostPort(l)
		if err != nil || port == "" {
			v.add(key("listen"), "entry %d, %q, is not an address with a port such as \"127.0.0.1:50051\"", i+1, l)
			continue
		}
		if !tlsSet && !loopbackHost(host) {
			v.add(key("listen"), "entry %d, %q, is not a loopback address: the GoBGP API carries no credentials, so listen on loopback or set tls_cert, tls_key and tls_client_ca for mTLS", i+1, l)
		}
	}
}

// secret reads the one of inline, env and file that is set; key(name) is
// the key of the inline form.
func (v *validator) secret(key func(string) string, inline, env, file, name string) (string, bool) {
	n := 0
	for _, s := range []string{inline, env, file} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		v.add(key(name), "set exactly one of %s, %s_env or %s_file", name, name, name)
		return "", false
	}
	var secret string
	switch {
	case inline != "":
		secret = inline
	case env != "":
		secret = os.Getenv(env)
		if secret == "" {
			v.add(key(name+"_env"), "environment variable %s is empty or not set", env)
			return "", false
		}
	default:
		if problems := secretFileProblems(file); len(problems) > 0 {
			for _, p := range problems {
				v.add(key(name+"_file"), "%s", p)
			}
			return "", false
		}
		b, err := os.ReadFile(file)
		if err != nil {
			v.add(key(name+"_file"), "cannot read the %s: %v", name, err)
			return "", false
		}
		secret = strings.TrimSpace(string(b))
	}
	if len(secret) < minTokenLen {
		v.add(key(name), "the %s is shorter than %d characters; use e.g. `openssl rand -hex 32`", name, minTokenLen)
		return "", false
	}
	return secret, true
}
