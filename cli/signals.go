package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ribkeeper/ribkeeper/api"
)

// Signals returns the most recent signals detectors sent (newest first),
// of source if not "", at most limit (0: the daemon's default).
func (c *Client) Signals(ctx context.Context, source string, limit int) ([]api.Signal, error) {
	q := url.Values{}
	if source != "" {
		q.Set("source", source)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/v1/signals"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out api.SignalList
	_, err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out.Signals, err
}

// signals prints what detectors sent: one line per signal, newest first,
// and why a refused one was refused.
func (c *cli) signals(ctx context.Context, args []string) error {
	fs := c.flagSet("signals")
	asJSON := fs.Bool("json", false, "print JSON")
	source := fs.String("source", "", "only the signals of this [[source]]")
	limit := fs.Int("limit", 0, fmt.Sprintf("at most this many (default %d)", api.DefaultSignalLimit))
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("signals", "unexpected argument %q", pos[0])
	}
	if *limit < 0 {
		return usagef("signals", "--limit %d is negative", *limit)
	}
	sigs, err := c.client.Signals(ctx, *source, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(api.SignalList{Signals: api.NonNil(sigs)})
	}
	t := newTable(c.stdout, "TIME", "SOURCE", "VIA", "TARGET", "STATE", "VECTOR", "PPS", "RESULT")
	for _, s := range sigs {
		result := "accepted"
		if !s.Accepted {
			result = "refused: " + s.Reason
		}
		t.row(s.At.Local().Format(time.DateTime), s.Source, s.Via, s.Target, s.State, vector(s), pps(s.PPS), result)
	}
	return t.flush()
}

// vector is a signal's vector in a few words: "udp dst 53,123".
func vector(s api.Signal) string {
	var parts []string
	if s.Protocol != "" {
		parts = append(parts, s.Protocol)
	}
	for _, p := range []struct {
		what  string
		ports []uint16
	}{{"src", s.SrcPorts}, {"dst", s.DstPorts}} {
		if len(p.ports) == 0 {
			continue
		}
		ns := make([]string, len(p.ports))
		for i, n := range p.ports {
			ns[i] = strconv.Itoa(int(n))
		}
		parts = append(parts, p.what+" "+strings.Join(ns, ","))
	}
	if s.TCPFlags != "" {
		parts = append(parts, "flags "+s.TCPFlags)
	}
	return strings.Join(parts, " ")
}

func pps(n uint64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatUint(n, 10)
}
