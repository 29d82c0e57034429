package config

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestAPIListenerAndTokens(t *testing.T) {
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "grafana.token")
	if err := os.WriteFile(tokFile, []byte("file-secret-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RK_TEST_TOKEN", "env-secret-0123456789")
	cfg, err := Parse("ok.toml", []byte(minimal+`
[api]
listen = "0.0.0.0:8443"
tls_cert = "/etc/ribkeeper/cert.pem"
tls_key = "/etc/ribkeeper/key.pem"
[[api.token]]
name = "fastnetmon"
role = "write"
token_env = "RK_TEST_TOKEN"
[[api.token]]
name = "grafana"
role = "read"
token_file = "`+tokFile+`"
[[api.token]]
name = "noc"
role = "Write"
token = "inline-secret-0123456789"
`))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.API
	if a.Listen != "0.0.0.0:8443" || a.TLSCert == "" || a.TLSKey == "" || len(a.Tokens) != 3 {
		t.Fatalf("api = %+v", a)
	}
	want := []Token{{Name: "fastnetmon", Role: "write", Secret: "env-secret-0123456789"}, {Name: "grafana", Role: "read", Secret: "file-secret-0123456789"}, {Name: "noc", Role: "write", Secret: "inline-secret-0123456789"}}
	for i, w := range want {
		if !reflect.DeepEqual(a.Tokens[i], w) || a.Tokens[i].Scoped() {
			t.Errorf("token %d = %+v, want %+v", i, a.Tokens[i], w)
		}
	}

	for _, ok := range []string{`listen = "127.0.0.1:8080"`, `listen = "[::1]:8080"`, `listen = "localhost:8080"`, ``} {
		if _, err := Parse("ok.toml", []byte(minimal+"[api]\n"+ok+"\n")); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// The [api] bounds: defaults when absent (connections and streams derive
// from the open-file limit at start: 0 here), the values when set.
func TestAPIBounds(t *testing.T) {
	cfg, err := Parse("m.toml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.API
	if a.MaxConnections != 0 || a.MaxEventStreams != 0 || a.MaxEventStreamsPerToken != DefaultMaxEventStreamsPerToken ||
		a.EventRingBytes != DefaultEventRingBytes || a.MaxEventBytes != DefaultMaxEventBytes {
		t.Errorf("defaults: %+v", a)
	}
	if _, err := Parse("m.toml", []byte(minimal+"[api]\nmax_connections = 0\nmax_event_streams = 0\n")); err != nil {
		t.Errorf("0, derived: %v", err)
	}
	cfg, err = Parse("m.toml", []byte(minimal+"[api]\nmax_connections = 50\nmax_event_streams = 20\nmax_event_streams_per_token = 2\nevent_ring_bytes = 1048576\nmax_event_bytes = 8192\n"))
	if err != nil {
		t.Fatal(err)
	}
	a = cfg.API
	if a.MaxConnections != 50 || a.MaxEventStreams != 20 || a.MaxEventStreamsPerToken != 2 || a.EventRingBytes != 1<<20 || a.MaxEventBytes != 8192 {
		t.Errorf("set: %+v", a)
	}
}

func TestAPIErrors(t *testing.T) {
	tok := func(extra string) string {
		return "[[api.token]]\nname = \"x\"\nrole = \"read\"\n" + extra + "\n"
	}
	wtok := func(extra string) string {
		return "[[api.token]]\nname = \"x\"\nrole = \"write\"\ntoken = \"0123456789abcdef\"\n" + extra + "\n"
	}
	for _, c := range []struct {
		name, body, key, msg string
	}{
		{"non-loopback without tokens", `listen = "0.0.0.0:8080"`, "api.listen", "not a loopback"},
		{"wildcard without tokens", `listen = ":8080"`, "api.listen", "not a loopback"},
		{"bad listen", `listen = "8080"`, "api.listen", "host:port"},
		{"bad port", `listen = "127.0.0.1:99999"`, "api.listen", "port"},
		{"cert without key", "listen = \"127.0.0.1:1\"\ntls_cert = \"c.pem\"", "api.tls_cert", "both"},
		{"tls without listen", "tls_cert = \"c.pem\"\ntls_key = \"k.pem\"", "api.tls_cert", "listen"},
		{"tokens without listen", tok(`token = "0123456789abcdef"`), "api.token", "listen"},
		{"no secret", "listen = \"127.0.0.1:1\"\n" + tok(""), "api.token.0.token", "exactly one"},
		{"two secrets", "listen = \"127.0.0.1:1\"\n" + tok("token = \"0123456789abcdef\"\ntoken_env = \"X\""), "api.token.0.token", "exactly one"},
		{"short secret", "listen = \"127.0.0.1:1\"\n" + tok(`token = "short"`), "api.token.0.token", "shorter"},
		{"empty env", "listen = \"127.0.0.1:1\"\n" + tok(`token_env = "RK_TEST_UNSET_VARIABLE"`), "api.token.0.token_env", "not set"},
		{"missing file", "listen = \"127.0.0.1:1\"\n" + tok(`token_file = "/nonexistent/token"`), "api.token.0.token_file", "cannot read"},
		{"bad role", "listen = \"127.0.0.1:1\"\n[[api.token]]\nname = \"x\"\nrole = \"admin\"\ntoken = \"0123456789abcdef\"", "api.token.0.role", "role"},
		{"no name", "listen = \"127.0.0.1:1\"\n[[api.token]]\nrole = \"read\"\ntoken = \"0123456789abcdef\"", "api.token.0.name", "missing"},
		{"duplicate name", "listen = \"127.0.0.1:1\"\n" + tok(`token = "0123456789abcdef"`) + tok(`token = "0123456789abcdeg"`), "api.token.1.name", "twice"},
		{"unknown key", "listen = \"127.0.0.1:1\"\n" + tok("secret = \"0123456789abcdef\""), "api.token.0.secret", "unknown key"},
		{"bad prefix", "listen = \"127.0.0.1:1\"\n" + wtok(`prefixes = ["192.0.2.0/24", "192.0.2"]`), "api.token.0.prefixes", `entry 2, "192.0.2", is not a prefix`},
		{"host bits", "listen = \"127.0.0.1:1\"\n" + wtok(`prefixes = ["192.0.2.1/24"]`), "api.token.0.prefixes", "write 192.0.2.0/24"},
		{"v6 host bits", "listen = \"127.0.0.1:1\"\n" + wtok(`prefixes = ["2001:db8::1/32"]`), "api.token.0.prefixes", "write 2001:db8::/32"},
		{"mapped v4", "listen = \"127.0.0.1:1\"\n" + wtok(`prefixes = ["::ffff:192.0.2.0/120"]`), "api.token.0.prefixes", "write it as IPv4 (192.0.2.0/24)"},
		{"empty prefixes", "listen = \"127.0.0.1:1\"\n" + wtok(`prefixes = []`), "api.token.0.prefixes", "remove prefixes for every destination"},
		{"bad action", "listen = \"127.0.0.1:1\"\n" + wtok(`actions = ["discard", "drop"]`), "api.token.0.actions", `"drop", is not an action: use discard, rate-limit`},
		{"empty actions", "listen = \"127.0.0.1:1\"\n" + wtok(`actions = []`), "api.token.0.actions", "allows no action"},
		{"negative quota", "listen = \"127.0.0.1:1\"\n" + wtok(`max_active_rules = -1`), "api.token.0.max_active_rules", "not a count"},
		{"read token with actions", "listen = \"127.0.0.1:1\"\n" + tok("token = \"0123456789abcdef\"\nactions = [\"discard\"]"), "api.token.0.actions", "read token adds no rules"},
		{"read token with quota", "listen = \"127.0.0.1:1\"\n" + tok("token = \"0123456789abcdef\"\nmax_active_rules = 5"), "api.token.0.max_active_rules", "read token adds no rules"},
		{"negative connections", "max_connections = -1", "api.max_connections", "0 to derive it from the open-file limit"},
		{"negative streams", "max_event_streams = -3", "api.max_event_streams", "out of range"},
		{"no streams per token", "max_event_streams_per_token = 0", "api.max_event_streams_per_token", "a console tab holds one"},
		{"tiny ring", "event_ring_bytes = 1000", "api.event_ring_bytes", "at least 65536"},
		{"tiny event", "max_event_bytes = 100", "api.max_event_bytes", "at least 4096"},
		{"event beyond the ring", "event_ring_bytes = 65536\nmax_event_bytes = 131072", "api.max_event_bytes", "raise event_ring_bytes"},
		{"streams beyond connections", "max_connections = 10\nmax_event_streams = 20", "api.max_event_streams", "every stream is a connection"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("bad.toml", []byte(minimal+"[api]\n"+c.body+"\n"))
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("err = %v, want Errors", err)
			}
			for _, e := range es {
				if e.Key == c.key && strings.Contains(e.Msg, c.msg) {
					if e.Line == 0 {
						t.Errorf("%v: no line", e)
					}
					return
				}
			}
			t.Errorf("errors %v lack key %s with %q", err, c.key, c.msg)
		})
	}
}

// A scoped token: prefixes (IPv4 and IPv6, an address is its host
// prefix), actions as rule text names them ("blackhole" is rtbh), and a
// quota of its own rules.
func TestScopedToken(t *testing.T) {
	cfg, err := Parse("ok.toml", []byte(minimal+`
[api]
listen = "127.0.0.1:8443"
[[api.token]]
name = "cust-a"
role = "write"
token = "inline-secret-0123456789"
prefixes = ["192.0.2.0/24", "2001:db8:a::/48", "198.51.100.7"]
actions = ["discard", "Rate-Limit", "blackhole", "rtbh"]
max_active_rules = 50
[[api.token]]
name = "cust-a-view"
role = "read"
token = "inline-secret-9876543210"
prefixes = ["192.0.2.0/24"]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := Token{Name: "cust-a", Role: "write", Secret: "inline-secret-0123456789",
		Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8:a::/48"), netip.MustParsePrefix("198.51.100.7/32")},
		Actions:  []string{"discard", "rate-limit", "rtbh"}, MaxActiveRules: 50}
	if got := cfg.API.Tokens[0]; !reflect.DeepEqual(got, want) || !got.Scoped() {
		t.Errorf("token = %+v\nwant %+v", got, want)
	}
	if got := cfg.API.Tokens[1]; len(got.Prefixes) != 1 || !got.Scoped() || got.Actions != nil {
		t.Errorf("read token = %+v", got)
	}
}

// A token file others could read, or replace, is refused as ssh refuses a
// key: the message names the file, its mode, and the chmod that fixes it.
// A sticky directory (/tmp) is fine; so are 0600 and 0400 in a 0700 or
// 0755 directory.
func TestTokenFileModes(t *testing.T) {
	for _, c := range []struct {
		name              string
		file, dir         os.FileMode
		sticky            bool
		wantFile, wantDir bool
	}{
		{"0600 in 0700", 0o600, 0o700, false, false, false},
		{"0400 in 0755", 0o400, 0o755, false, false, false},
		{"0600 in sticky 1777", 0o600, 0o777, true, false, false},
		{"0644", 0o644, 0o700, false, true, false},
		{"0640", 0o640, 0o700, false, true, false},
		{"0604", 0o604, 0o755, false, true, false},
		{"0620 (group may write)", 0o620, 0o700, false, true, false},
		{"0600 in 0777", 0o600, 0o777, false, false, true},
		{"0600 in 0775", 0o600, 0o775, false, false, true},
		{"0666 in 0777", 0o666, 0o777, false, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "my tokens")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, "cust.token")
			if err := os.WriteFile(file, []byte("file-secret-0123456789\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			// Set after writing: the umask does not apply to chmod.
			if err := os.Chmod(file, c.file); err != nil {
				t.Fatal(err)
			}
			dirMode := c.dir
			if c.sticky {
				dirMode |= os.ModeSticky
			}
			if err := os.Chmod(dir, dirMode); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(dir, 0o700) })
			cfg, err := Parse("t.toml", []byte(minimal+`
[api]
listen = "127.0.0.1:8080"
[[api.token]]
name = "cust"
role = "read"
token_file = "`+file+`"
`))
			if !c.wantFile && !c.wantDir {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if cfg.API.Tokens[0].Secret != "file-secret-0123456789" {
					t.Errorf("secret = %q", cfg.API.Tokens[0].Secret)
				}
				return
			}
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("err = %v, want Errors", err)
			}
			var fileMsg, dirMsg string
			for _, e := range es {
				if e.Key != "api.token.0.token_file" || e.Line == 0 {
					t.Errorf("error %v: want key api.token.0.token_file with a line", e)
				}
				switch {
				case strings.Contains(e.Msg, "chmod 600"):
					fileMsg = e.Msg
				case strings.Contains(e.Msg, "chmod go-w"):
					dirMsg = e.Msg
				default:
					t.Errorf("unexpected error: %v", e)
				}
			}
			if c.wantFile {
				want := fmt.Sprintf("token file %s has mode %04o: group or others can read it (or change it); run `chmod 600 '%s'`", file, c.file, file)
				if fileMsg != want {
					t.Errorf("file message\n %q\nwant\n %q", fileMsg, want)
				}
			} else if fileMsg != "" {
				t.Errorf("file refused: %s", fileMsg)
			}
			if c.wantDir {
				want := fmt.Sprintf("the directory %s of token file %s has mode %04o: group or others can replace the token in it; run `chmod go-w '%s'`", dir, file, c.dir, dir)
				if dirMsg != want {
					t.Errorf("directory message\n %q\nwant\n %q", dirMsg, want)
				}
			} else if dirMsg != "" {
				t.Errorf("directory refused: %s", dirMsg)
			}
		})
	}
}

// [api] hosts and origins: names and addresses, lower-cased; what is not
// a name or an origin is an error naming the entry.
func TestAPIHostsAndOrigins(t *testing.T) {
	cfg, err := Parse("ok.toml", []byte(minimal+`
[api]
listen = "127.0.0.1:8080"
hosts = ["RK.example.net.", "rk", "[::1]", "10.0.0.5"]
origins = ["https://NOC.example.net", "http://10.0.0.5:8080/"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"rk.example.net", "rk", "::1", "10.0.0.5"}; !reflect.DeepEqual(cfg.API.Hosts, want) {
		t.Errorf("hosts = %q, want %q", cfg.API.Hosts, want)
	}
	if want := []string{"https://noc.example.net", "http://10.0.0.5:8080"}; !reflect.DeepEqual(cfg.API.Origins, want) {
		t.Errorf("origins = %q, want %q", cfg.API.Origins, want)
	}
	for _, c := range []struct{ body, key, msg string }{
		{"listen = \"127.0.0.1:1\"\nhosts = [\"rk.example.net:8443\"]", "api.hosts", "has a port"},
		{"listen = \"127.0.0.1:1\"\nhosts = [\"https://rk.example.net\"]", "api.hosts", "is a URL"},
		{"listen = \"127.0.0.1:1\"\nhosts = [\"*.example.net\"]", "api.hosts", "wildcards"},
		{"listen = \"127.0.0.1:1\"\nhosts = [\"\"]", "api.hosts", "not a host name"},
		{"listen = \"127.0.0.1:1\"\nhosts = [\"rk example\"]", "api.hosts", "not a host name"},
		{"listen = \"127.0.0.1:1\"\norigins = [\"null\"]", "api.origins", "not a web origin"},
		{"listen = \"127.0.0.1:1\"\norigins = [\"noc.example.net\"]", "api.origins", "not a web origin"},
		{"listen = \"127.0.0.1:1\"\norigins = [\"https://noc.example.net/ui/\"]", "api.origins", "not a web origin"},
		{"listen = \"127.0.0.1:1\"\norigins = [\"ftp://noc.example.net\"]", "api.origins", "not a web origin"},
		{"hosts = [\"rk.example.net\"]", "api.hosts", "set only with listen"},
		{"origins = [\"https://noc.example.net\"]", "api.origins", "set only with listen"},
	} {
		_, err := Parse("bad.toml", []byte(minimal+"[api]\n"+c.body+"\n"))
		var es Errors
		if !errors.As(err, &es) {
			t.Fatalf("%s: err = %v, want Errors", c.body, err)
		}
		found := false
		for _, e := range es {
			found = found || e.Key == c.key && strings.Contains(e.Msg, c.msg) && e.Line > 0
		}
		if !found {
			t.Errorf("%s: errors %v lack key %s with %q", c.body, err, c.key, c.msg)
		}
	}
}
