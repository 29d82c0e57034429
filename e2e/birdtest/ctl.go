package birdtest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Ctl is one persistent connection to BIRD's control socket. A birdc
// process per query costs about 50 ms (measured: 20 runs of birdc "show
// route count" in 1.0 s); a query on an open connection costs well under
// a millisecond, which is what lets a test sample a table every few
// milliseconds. A Ctl is not safe for concurrent use.
type Ctl struct {
	c net.Conn
	r *bufio.Reader
}

// Dial opens a control connection and reads BIRD's greeting.
func (r *Router) Dial() (*Ctl, error) {
	c, err := net.Dial("unix", r.sock)
	if err != nil {
		return nil, fmt.Errorf("connect to bird's control socket: %w", err)
	}
	ctl := &Ctl{c: c, r: bufio.NewReader(c)}
	if _, err := ctl.reply(); err != nil {
		c.Close()
		return nil, fmt.Errorf("bird's greeting: %w", err)
	}
	return ctl, nil
}

// Close closes the connection.
func (c *Ctl) Close() error { return c.c.Close() }

// Cmd runs one command and returns the reply's text lines without their
// reply codes. A reply code of 8000 or above (BIRD's errors) is an error.
func (c *Ctl) Cmd(cmd string) ([]string, error) {
	if err := c.c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(c.c, "%s\n", cmd); err != nil {
		return nil, err
	}
	return c.reply()
}

// reply reads lines up to the one that ends the reply: "NNNN-text" and
// " text" continue it, "NNNN text" ends it.
func (c *Ctl) reply() ([]string, error) {
	var lines []string
	for {
		l, err := c.r.ReadString('\n')
		if err != nil {
			return lines, err
		}
		l = strings.TrimRight(l, "\n")
		if strings.HasPrefix(l, " ") {
			lines = append(lines, l[1:])
			continue
		}
		if len(l) < 5 {
			return lines, fmt.Errorf("unexpected line %q from bird", l)
		}
		code, sep, text := l[:4], l[4], l[5:]
		if code >= "8000" {
			return lines, &ReplyError{Code: code, Text: text}
		}
		if text != "" {
			lines = append(lines, text)
		}
		if sep == ' ' {
			return lines, nil
		}
	}
}

// ReplyError is an error reply from BIRD, e.g. 8001 "Network not found".
type ReplyError struct {
	Code string
	Text string
}

func (e *ReplyError) Error() string { return "bird: " + e.Code + " " + e.Text }

// Count returns the number of routes in table.
func (c *Ctl) Count(table string) (int, error) {
	lines, err := c.Cmd("show route table " + table + " count")
	if err != nil {
		return 0, err
	}
	for _, l := range lines {
		var n int
		if _, err := fmt.Sscanf(l, "%d of", &n); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("show route count: unexpected reply %q", lines)
}

// Counts returns the number of routes in each of tables, in one command.
func (c *Ctl) Counts(tables ...string) (map[string]int, error) {
	cmd := "show route"
	for _, t := range tables {
		cmd += " table " + t
	}
	lines, err := c.Cmd(cmd + " count")
	if err != nil {
		return nil, err
	}
	// "N of N routes for N networks in table ft4", one line per table,
	// then "Total: ..." when there are several.
	out := map[string]int{}
	for _, l := range lines {
		var n, m, k int
		var table string
		if _, err := fmt.Sscanf(l, "%d of %d routes for %d networks in table %s", &n, &m, &k, &table); err == nil {
			out[table] = n
		}
	}
	for _, t := range tables {
		if _, ok := out[t]; !ok {
			return nil, fmt.Errorf("%s: no count for table %s in %q", cmd, t, lines)
		}
	}
	return out, nil
}

// RouteTimeLayout is the layout of RouteTime's t, in the machine's local
// time (BIRD's "timeformat route iso long us").
const RouteTimeLayout = "2006-01-02 15:04:05.000000"

// RouteTime returns the time BIRD shows for net (BIRD's text of it, as in
// Route.Net) in table: when the route last changed, i.e. when the peer
// last announced it. ok is false when table holds no route for net.
func (c *Ctl) RouteTime(table, net string) (t string, ok bool, err error) {
	lines, err := c.Cmd("show route table " + table + " " + net)
	var re *ReplyError
	if errors.As(err, &re) && re.Code == "8001" { // Network not found
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	// "flow4 { dst 198.51.100.9/32; }  [up0 2026-11-23 19:32:11.054321] * (100)"
	for _, l := range lines {
		if !strings.HasPrefix(l, net) {
			continue
		}
		i := strings.Index(l, "[")
		j := strings.Index(l, "]")
		if i < 0 || j < i {
			return "", false, fmt.Errorf("show route: no [protocol time] in %q", l)
		}
		f := strings.Fields(l[i+1 : j])
		if len(f) < 3 {
			return "", false, fmt.Errorf("show route: unexpected [protocol time] in %q", l)
		}
		return f[1] + " " + f[2], true, nil
	}
	return "", false, nil
}
