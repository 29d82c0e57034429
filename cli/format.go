package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
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

// cellText keeps a cell on one line, out of the column separators, and
// safe to print.
func cellText(s string) string {
	if strings.ContainsAny(s, "\t\r\n\v\f") {
		s = strings.Join(strings.Fields(s), " ")
	}
	return safeText(s)
}

// safeText escapes what a terminal could act on instead of printing it:
// control characters (NUL, ESC, DEL, C1), bidirectional overrides and
// other invisible format characters, and bytes that are not UTF-8, as
// \x1b, \u202e or \xff. Printable text, spaces included, is unchanged.
// Every string the CLI prints from the daemon goes through it: rows
// stored before the store checked free text may hold anything.
func safeText(s string) string {
	i := 0
	for i < len(s) {
		c, n := utf8.DecodeRuneInString(s[i:])
		if !printable(c, n) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	b := []byte(s[:i])
	for i < len(s) {
		c, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case printable(c, n):
			b = append(b, s[i:i+n]...)
		case c == utf8.RuneError && n <= 1:
			b = fmt.Appendf(b, "\\x%02x", s[i])
		case c < 0x80:
			b = fmt.Appendf(b, "\\x%02x", c)
		case c <= 0xffff:
			b = fmt.Appendf(b, "\\u%04x", c)
		default:
			b = fmt.Appendf(b, "\\U%08x", c)
		}
		i += n
	}
	return string(b)
}

func printable(c rune, n int) bool {
	return unicode.IsPrint(c) && (c != utf8.RuneError || n > 1)
}

// safeJSON is a writer that escapes, inside JSON text, every character
// safeText would not print as \uXXXX (still valid JSON). encoding/json
// already escapes C0 controls; this catches DEL, C1 controls and format
// characters such as U+202E, which it writes raw.
type safeJSON struct{ w io.Writer }

func (j safeJSON) Write(p []byte) (int, error) {
	s := string(p)
	var b []byte
	for i := 0; i < len(s); {
		c, n := utf8.DecodeRuneInString(s[i:])
		if printable(c, n) || c == '\n' || c == '\t' || (c == utf8.RuneError && n <= 1) {
			b = append(b, s[i:i+n]...)
		} else {
			for _, u := range utf16.Encode([]rune{c}) {
				b = fmt.Appendf(b, "\\u%04x", u)
			}
		}
		i += n
	}
	if _, err := j.w.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
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
