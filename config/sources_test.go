package config

import (
	"strings"
	"testing"
	"time"
)

const sourcesBase = `
[bgp]
asn = 65000
router_id = "192.0.2.1"
`

func TestSources(t *testing.T) {
	c, err := Parse("t.toml", []byte(sourcesBase+`
[[source]]
name = "fnm"
kind = "gobgp"
prefixes = ["192.0.2.0/24"]
actions = ["rtbh"]

[[source]]
name = "am"
kind = "alertmanager"
secret = "0123456789abcdef0123"
max_new_rules_per_minute = 600
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Sources) != 2 {
		t.Fatalf("sources = %+v", c.Sources)
	}
	g := c.Sources[0]
	if g.Kind != SourceGoBGP || len(g.Listen) != 2 || len(g.Prefixes) != 1 || g.Actions[0] != "rtbh" {
		t.Errorf("gobgp source = %+v", g)
	}
	if a := c.Sources[1]; a.Secret != "0123456789abcdef0123" || a.MaxNewRulesPerMinute != 600 {
		t.Errorf("alertmanager source = %+v", a)
	}
}

func TestSourceErrors(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"[[source]]\nkind = \"webhook\"\nsecret = \"0123456789abcdef0123\"", "source[1].name: missing"},
		{"[[source]]\nname = \"x\"\nkind = \"snmp\"\nsecret = \"0123456789abcdef0123\"", "not a source kind"},
		{"[[source]]\nname = \"x\"\nkind = \"webhook\"", "set exactly one of secret"},
		{"[[source]]\nname = \"x\"\nkind = \"webhook\"\nsecret = \"short\"", "shorter than"},
		{"[[source]]\nname = \"x\"\nkind = \"gobgp\"\nlisten = [\"0.0.0.0:50051\"]", "not a loopback address"},
		{"[[source]]\nname = \"x\"\nkind = \"gobgp\"\nsecret = \"0123456789abcdef0123\"", "has no secret"},
		{"[[source]]\nname = \"x\"\nkind = \"gobgp\"\n[[source]]\nname = \"x\"\nkind = \"gobgp\"\nlisten = [\"127.0.0.2:50051\"]", "names two sources"},
	} {
		_, err := Parse("t.toml", []byte(sourcesBase+tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.body, err, tc.want)
		}
	}
}

func TestNotify(t *testing.T) {
	c, err := Parse("t.toml", []byte(sourcesBase+`
[[notify]]
name = "noc"
kind = "slack"
url = "https://hooks.example.net/T000/B000/XXXX"
events = ["peer.down", "incident.opened"]

[[notify]]
name = "soar"
kind = "webhook"
url = "http://127.0.0.1:9000/hook"
secret = "0123456789abcdef0123"
queue = 50
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Notify) != 2 || c.Notify[0].Kind != "slack" || len(c.Notify[0].Events) != 2 || c.Notify[1].Queue != 50 || c.Notify[1].Secret == "" {
		t.Errorf("notify = %+v", c.Notify)
	}
	for _, tc := range []struct{ body, want string }{
		{"[[notify]]\nname = \"x\"\nkind = \"slack\"\nurl = \"http://hooks.example.net/x\"", "clear text"},
		{"[[notify]]\nname = \"x\"\nkind = \"webhook\"\nurl = \"https://h.example.net/x\"", "set exactly one of secret"},
		{"[[notify]]\nname = \"x\"\nkind = \"slack\"\nurl = \"https://h.example.net/x\"\nevents = [\"peer.flap\"]", "not an event"},
		{"[[notify]]\nname = \"x\"\nkind = \"pager\"\nurl = \"https://h.example.net/x\"", "not a receiver kind"},
		{"[[notify]]\nname = \"x\"\nkind = \"slack\"\nurl = \"https://h.example.net/x\"\nqueue = 0", "out of range"},
	} {
		_, err := Parse("t.toml", []byte(sourcesBase+tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.body, err, tc.want)
		}
	}
}

func TestSourceBounds(t *testing.T) {
	c, err := Parse("t.toml", []byte(sourcesBase+`
[[source]]
name = "hook"
kind = "webhook"
secret = "0123456789abcdef0123"
timestamp_window = "90s"
replay_cache = 1000
max_signals_per_request = 5

[[source]]
name = "am"
kind = "alertmanager"
secret = "0123456789abcdef0123"
[source.labels]
target = ["victim"]
pps = "packets"
`))
	if err != nil {
		t.Fatal(err)
	}
	h, am := c.Sources[0], c.Sources[1]
	if h.TimestampWindow != 90*time.Second || h.ReplayCache != 1000 || h.MaxSignalsPerRequest != 5 {
		t.Errorf("webhook bounds = %v %d %d", h.TimestampWindow, h.ReplayCache, h.MaxSignalsPerRequest)
	}
	if am.TimestampWindow != DefaultTimestampWindow || am.MaxSignalsPerRequest != DefaultMaxSignalsPerRequest {
		t.Errorf("alertmanager defaults = %v %d", am.TimestampWindow, am.MaxSignalsPerRequest)
	}
	if len(am.Labels.Target) != 1 || am.Labels.Target[0] != "victim" || am.Labels.PPS != "packets" || am.Labels.Protocol != "protocol" {
		t.Errorf("labels = %+v", am.Labels)
	}
	for _, tc := range []struct{ body, want string }{
		{"[[source]]\nname = \"x\"\nkind = \"alertmanager\"\nsecret = \"0123456789abcdef0123\"\ntimestamp_window = \"1m\"", "for a webhook source"},
		{"[[source]]\nname = \"x\"\nkind = \"webhook\"\nsecret = \"0123456789abcdef0123\"\ntimestamp_window = \"soon\"", "source[1].timestamp_window"},
		{"[[source]]\nname = \"x\"\nkind = \"webhook\"\nsecret = \"0123456789abcdef0123\"\nreplay_cache = 0", "not a cache size"},
		{"[[source]]\nname = \"x\"\nkind = \"webhook\"\nsecret = \"0123456789abcdef0123\"\n[source.labels]\npps = \"p\"", "alertmanager source's alert labels"},
		{"[[source]]\nname = \"x\"\nkind = \"fastnetmon\"\nsecret = \"0123456789abcdef0123\"\nmax_signals_per_request = 3", "one signal at a time"},
		{"[[source]]\nname = \"x\"\nkind = \"alertmanager\"\nsecret = \"0123456789abcdef0123\"\n[source.labels]\nfoo = \"p\"", "unknown key"},
	} {
		_, err := Parse("t.toml", []byte(sourcesBase+tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.body, err, tc.want)
		}
	}
}
