package api

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// table prints aligned columns.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			c = "-"
		}
		cells[i] = cellText(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// cellText keeps a cell on one line and out of the column separators.
func cellText(s string) string {
	if !strings.ContainsAny(s, "\t\r\n\v\f") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// expiresIn renders an expiry relative to now: "never", "in 9m59s",
// "3m0s ago".
func expiresIn(t *time.Time, now time.Time) string {
	if t == nil {
		return "never"
	}
	d := t.Sub(now)
	if d >= 0 {
		return "in " + shortDuration(d)
	}
	return shortDuration(-d) + " ago"
}

// shortDuration renders d to the second, without zero units: "9m59s",
// "10m", "1d12h", "0s".
func shortDuration(d time.Duration) string {
	d = d.Round(time.Second)
	if d <= 0 {
		return "0s"
	}
	var b strings.Builder
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if n := d / u.d; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			d -= n * u.d
		}
	}
	return b.String()
}

// changes renders an event's changed fields: "text: a -> b; reason: -> x".
func changes(old, new map[string]string) string {
	keys := make([]string, 0, len(new))
	for k := range new {
		keys = append(keys, k)
	}
	for k := range old {
		if _, ok := new[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		o, hadOld := old[k]
		if !hadOld {
			parts = append(parts, fmt.Sprintf("%s: %s", k, quoteEmpty(new[k])))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %s -> %s", k, quoteEmpty(o), quoteEmpty(new[k])))
	}
	return strings.Join(parts, "; ")
}

func quoteEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}
