package config

import (
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// NotifyKinds are the events a [[notify]] target may select (notify.Kind
// values; config does not import notify).
var NotifyKinds = []string{"incident.opened", "incident.escalated", "incident.ended", "rule.failed", "peer.down", "peer.up"}

// Notify is one receiver of notifications ([[notify]]).
type Notify struct {
	Name string
	Kind string // "webhook" (signed JSON) or "slack"
	URL  string
	// Secret signs a webhook's deliveries (HMAC-SHA256).
	Secret string
	// Events, if any, are the only kinds sent (NotifyKinds).
	Events []string
	// Queue bounds the events waiting for this receiver (0: the default).
	Queue int
}

// rawNotify mirrors one [[notify]] table.
type rawNotify struct {
	Name       string   `toml:"name"`
	Kind       string   `toml:"kind"`
	URL        string   `toml:"url"`
	Secret     string   `toml:"secret"`
	SecretEnv  string   `toml:"secret_env"`
	SecretFile string   `toml:"secret_file"`
	Events     []string `toml:"events"`
	Queue      *int64   `toml:"queue"`
}

// notifyTargets validates the [[notify]] tables into c.Notify.
func (v *validator) notifyTargets(f *file, c *Config) {
	seen := map[string]bool{}
	for i, n := range f.Notify {
		key := func(k string) string { return "notify." + strconv.Itoa(i) + "." + k }
		t := Notify{Name: n.Name, Kind: strings.ToLower(n.Kind), URL: n.URL}
		switch {
		case n.Name == "":
			v.add(key("name"), "missing: name the receiver, e.g. name = \"noc-slack\"")
		case !validName(n.Name):
			v.add(key("name"), "%q is not a valid name: use letters, digits, '-', '_' or '.'", n.Name)
		case seen[n.Name]:
			v.add(key("name"), "%q names two receivers: give each its own name", n.Name)
		}
		seen[n.Name] = true
		switch t.Kind {
		case "webhook":
			t.Secret, _ = v.secret(key, n.Secret, n.SecretEnv, n.SecretFile, "secret")
		case "slack":
			if n.Secret != "" || n.SecretEnv != "" || n.SecretFile != "" {
				v.add(key("secret"), "a slack receiver is not signed (its url is the secret): remove secret")
			}
		case "":
			v.add(key("kind"), "missing: use \"webhook\" (signed JSON) or \"slack\" (a Slack-compatible incoming webhook)")
		default:
			v.add(key("kind"), "%q is not a receiver kind: use \"webhook\" or \"slack\"", n.Kind)
		}
		u, err := url.Parse(n.URL)
		switch {
		case n.URL == "":
			v.add(key("url"), "missing: the receiver's URL, e.g. \"https://hooks.example.net/ribkeeper\"")
		case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
			v.add(key("url"), "%q is not an http(s) URL", n.URL)
		case u.Scheme == "http" && !loopbackHost(hostOnly(u.Host)):
			v.add(key("url"), "%q sends notifications in clear text off this host: use https (http only to a loopback address)", n.URL)
		}
		for _, e := range n.Events {
			if !slices.Contains(NotifyKinds, e) {
				v.add(key("events"), "%q is not an event: use some of %s", e, strings.Join(NotifyKinds, ", "))
				continue
			}
			t.Events = append(t.Events, e)
		}
		if n.Events != nil && len(n.Events) == 0 {
			v.add(key("events"), "an empty list sends nothing: list some of %s, or remove events for all", strings.Join(NotifyKinds, ", "))
		}
		if n.Queue != nil {
			if *n.Queue < 1 || *n.Queue > 1_000_000 {
				v.add(key("queue"), "%d is out of range: use 1 to 1000000 (events kept for a receiver that is down)", *n.Queue)
			} else {
				t.Queue = int(*n.Queue)
			}
		}
		c.Notify = append(c.Notify, t)
	}
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}
