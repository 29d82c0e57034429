package api

import (
	"fmt"
	"io"
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

// shortDuration renders d to the second, with days: "2d3h0m0s", "9m59s".
func shortDuration(d time.Duration) string {
	d = d.Round(time.Second)
	const day = 24 * time.Hour
	if d < day {
		return d.String()
	}
	days := d / day
	return fmt.Sprintf("%dd%s", days, (d - days*day).String())
}
