package bgp

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// gobgpHandler is an slog.Handler that writes GoBGP's log records to
// ribkeeper's hclog logger: levels map one to one, GoBGP's attributes
// become key/value pairs (keys lower-cased, "Key" of the Peer topic named
// "peer", "Err"/"Error" named "error").
//
// observe, when set, sees every Warn and Error record before it is
// logged. The speaker uses it to catch failures GoBGP only logs (setting
// the TCP MD5 key on a listener) and turn them into errors.
type gobgpHandler struct {
	l       hclog.Logger
	observe func(msg string, attrs map[string]string)
	attrs   []slog.Attr // from WithAttrs
	group   string      // from WithGroup, as a key prefix
}

// newGoBGPLogger returns the *slog.Logger handed to GoBGP.
func newGoBGPLogger(l hclog.Logger, observe func(string, map[string]string)) *slog.Logger {
	return slog.New(&gobgpHandler{l: l, observe: observe})
}

// Enabled matters: GoBGP skips building expensive debug records unless the
// handler is enabled for them.
func (h *gobgpHandler) Enabled(_ context.Context, level slog.Level) bool {
	switch {
	case level >= slog.LevelError:
		return h.l.IsError()
	case level >= slog.LevelWarn:
		return h.l.IsWarn()
	case level >= slog.LevelInfo:
		return h.l.IsInfo()
	default:
		return h.l.IsDebug()
	}
}

func (h *gobgpHandler) Handle(_ context.Context, r slog.Record) error {
	fields := make(map[string]string, r.NumAttrs()+len(h.attrs))
	add := func(a slog.Attr) bool {
		if a.Key != "" {
			fields[h.group+a.Key] = a.Value.Resolve().String()
		}
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	if r.Level >= slog.LevelWarn && h.observe != nil {
		h.observe(r.Message, fields)
	}
	args := kv(fields)
	level := r.Level
	if r.Message == "failed to stop BGP server" {
		// BgpServer.Stop (which ends its BFD loop and gRPC listener) runs
		// StopBgp again after the speaker's own graceful StopBgp, and
		// GoBGP logs the second one failing as an error.
		level = slog.LevelDebug
	}
	switch {
	case level >= slog.LevelError:
		h.l.Error(r.Message, args...)
	case level >= slog.LevelWarn:
		h.l.Warn(r.Message, args...)
	case level >= slog.LevelInfo:
		h.l.Info(r.Message, args...)
	default:
		h.l.Debug(r.Message, args...)
	}
	return nil
}

func (h *gobgpHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(slices.Clip(h.attrs), attrs...)
	return &c
}

func (h *gobgpHandler) WithGroup(name string) slog.Handler {
	c := *h
	if name != "" {
		c.group = h.group + name + "."
	}
	return &c
}

// kv turns GoBGP's fields into hclog key/value pairs in a stable order.
func kv(fields map[string]string) []any {
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
		}
		out = append(out, name, fields[k])
	}
	return out
}
