package bgp

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
)

// gobgpLogger adapts hclog to GoBGP's log.Logger so that GoBGP's messages
// land in ribkeeper's log with levels mapped one to one and GoBGP's fields
// as key/value pairs (keys lower-cased; GoBGP's "Key" names the peer).
//
// observe, when set, sees every Warn and Error message before it is
// logged. The speaker uses it to catch failures GoBGP only logs (setting
// the TCP MD5 key on a listener) and turn them into errors.
type gobgpLogger struct {
	l       hclog.Logger
	observe func(msg string, fields gobgplog.Fields)
}

func newGoBGPLogger(l hclog.Logger, observe func(string, gobgplog.Fields)) *gobgpLogger {
	return &gobgpLogger{l: l, observe: observe}
}

// Panic logs and panics: GoBGP calls it on "code logic bug" paths and does
// not expect it to return.
func (g *gobgpLogger) Panic(msg string, fields gobgplog.Fields) {
	g.l.Error(msg, kv(fields)...)
	panic(fmt.Sprintf("gobgp: %s %v", msg, fields))
}

// Fatal logs and panics rather than calling os.Exit, so deferred cleanup and
// the stack trace survive. GoBGP does not expect it to return either.
func (g *gobgpLogger) Fatal(msg string, fields gobgplog.Fields) {
	g.l.Error(msg, kv(fields)...)
	panic(fmt.Sprintf("gobgp fatal: %s %v", msg, fields))
}

func (g *gobgpLogger) Error(msg string, fields gobgplog.Fields) {
	if g.observe != nil {
		g.observe(msg, fields)
	}
	g.l.Error(msg, kv(fields)...)
}

func (g *gobgpLogger) Warn(msg string, fields gobgplog.Fields) {
	if g.observe != nil {
		g.observe(msg, fields)
	}
	g.l.Warn(msg, kv(fields)...)
}

func (g *gobgpLogger) Info(msg string, fields gobgplog.Fields) {
	if g.l.IsInfo() {
		g.l.Info(msg, kv(fields)...)
	}
}

func (g *gobgpLogger) Debug(msg string, fields gobgplog.Fields) {
	if g.l.IsDebug() {
		g.l.Debug(msg, kv(fields)...)
	}
}

// SetLevel is only reached through GoBGP's SetLogLevel API.
func (g *gobgpLogger) SetLevel(level gobgplog.LogLevel) {
	switch {
	case level >= gobgplog.TraceLevel:
		g.l.SetLevel(hclog.Trace)
	case level == gobgplog.DebugLevel:
		g.l.SetLevel(hclog.Debug)
	case level == gobgplog.InfoLevel:
		g.l.SetLevel(hclog.Info)
	case level == gobgplog.WarnLevel:
		g.l.SetLevel(hclog.Warn)
	default:
		g.l.SetLevel(hclog.Error)
	}
}

// GetLevel matters: GoBGP skips building expensive debug messages unless
// GetLevel() >= DebugLevel.
func (g *gobgpLogger) GetLevel() gobgplog.LogLevel {
	switch {
	case g.l.IsTrace():
		return gobgplog.TraceLevel
	case g.l.IsDebug():
		return gobgplog.DebugLevel
	case g.l.IsInfo():
		return gobgplog.InfoLevel
	case g.l.IsWarn():
		return gobgplog.WarnLevel
	default:
		return gobgplog.ErrorLevel
	}
}

// kv turns GoBGP fields into hclog key/value pairs in a stable order.
func kv(fields gobgplog.Fields) []any {
	if len(fields) == 0 {
		return nil
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	peerTopic := fields["Topic"] == "Peer"
	out := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		name := strings.ToLower(k)
		switch {
		case k == "Key" && peerTopic:
			name = "peer"
		case k == "Err" || k == "Error":
			name = "error"
		case k == gobgplog.FieldFacility:
			name = "facility"
		}
		out = append(out, name, fields[k])
	}
	return out
}
