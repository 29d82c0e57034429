package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/ribkeeper/ribkeeper/api"
)

// The set commands: a declarative set is a named list of rules that the
// daemon keeps exactly as last applied (PUT /v1/sets/NAME).

func (c *cli) set(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("set", "missing subcommand: apply, list, show or delete")
	}
	if isHelp(args[0]) {
		fmt.Fprint(c.stdout, groupUsage("set"))
		return flag.ErrHelp
	}
	switch args[0] {
	case "apply":
		return c.setApply(ctx, args[1:])
	case "list", "ls":
		return c.setList(ctx, args[1:])
	case "show", "get":
		return c.setShow(ctx, args[1:])
	case "delete", "rm", "withdraw":
		return c.setDelete(ctx, args[1:])
	}
	return usagef("set", "unknown subcommand %q: use apply, list, show or delete", args[0])
}

func (c *cli) setApply(ctx context.Context, args []string) error {
	fs := c.flagSet("set apply")
	ttl := fs.String("ttl", "", "time to live of every rule: a `DURATION` such as 30m or 2d, or never (default: the daemon's default_ttl; a rule is rewritten when half of it is left)")
	reason := fs.String("reason", "", "why the rules exist: printable `TEXT` given to every rule")
	sites := fs.String("sites", "", "comma-separated `SITES` every rule targets (default: every site)")
	fs.Bool("allow-unknown-sites", false, "let --sites name a site no appliance has registered yet")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("set apply", "want a set NAME and a FILE of rules (- for standard input)")
	}
	name, file := pos[0], pos[1]
	in, closeIn, err := c.open(file)
	if err != nil {
		return err
	}
	defer closeIn()
	// Every line gets the same fields: the flags given.
	tmpl, err := addRequest(fs, "set apply", "", *ttl, *reason, *sites)
	if err != nil {
		return err
	}
	body, lineOf, err := setBody(in, file, tmpl)
	if err != nil {
		return err
	}
	if len(lineOf) == 0 {
		return fmt.Errorf("%s has no rules (blank lines and # comments are skipped): to withdraw every rule of set %s, run 'ribkeeper set delete %s'", file, name, name)
	}
	res, err := c.client.ApplySet(ctx, name, body)
	if err != nil {
		return atLine(err, file, lineOf)
	}
	fmt.Fprintf(c.stdout, "set %s: %d rules: %d created, %d updated, %d withdrawn, %d unchanged\n",
		safeText(res.Set), res.Rules, res.Created, res.Updated, res.Withdrawn, res.Unchanged)
	return nil
}

// open opens file for reading, or standard input for "-".
func (c *cli) open(file string) (io.Reader, func(), error) {
	if file == "-" {
		return c.stdin, func() {}, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, nil, fmt.Errorf("read rules: %w", err)
	}
	return f, func() { f.Close() }, nil
}

// maxSetLine bounds one line of a set's file: far beyond any rule text
// the daemon accepts ([limits] max_text_bytes), short of holding a stray
// binary file in memory.
const maxSetLine = 1 << 20

// setBody reads one rule text per line (blank lines and # comments
// skipped) into the body of PUT /v1/sets/NAME, each rule with tmpl's
// fields, and returns the file line of each rule.
func setBody(in io.Reader, file string, tmpl api.AddRuleRequest) ([]byte, []int, error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), maxSetLine)
	var (
		body   = []byte(`{"rules":[`)
		lineOf []int
		n      int
	)
	for sc.Scan() {
		n++
		text := lineText(n, sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		req := tmpl
		req.Text = text
		b, err := json.Marshal(req)
		if err != nil {
			return nil, nil, fmt.Errorf("%s line %d: %w", file, n, err)
		}
		if len(lineOf) > 0 {
			body = append(body, ',')
		}
		body = append(body, b...)
		lineOf = append(lineOf, n)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, nil, fmt.Errorf("%s line %d is longer than %d bytes: one rule text per line", file, n+1, maxSetLine)
		}
		return nil, nil, fmt.Errorf("read %s: %w", file, err)
	}
	return append(body, "]}"...), lineOf, nil
}

// atLine names the file line of the rule the daemon refused.
func atLine(err error, file string, lineOf []int) error {
	var e *api.Error
	if !errors.As(err, &e) {
		return err
	}
	m := ruleIndex.FindStringSubmatch(e.Field)
	if m == nil {
		return err
	}
	i, _ := strconv.Atoi(m[1])
	if i >= len(lineOf) {
		return err
	}
	msg := ruleIndex.ReplaceAllString(strings.TrimPrefix(e.Message, e.Field+": "), "")
	// Another rule the message names by index is a line too.
	msg = regexp.MustCompile(`rules\[(\d+)\]`).ReplaceAllStringFunc(msg, func(s string) string {
		j, _ := strconv.Atoi(s[len("rules[") : len(s)-1])
		if j < len(lineOf) {
			return "line " + strconv.Itoa(lineOf[j])
		}
		return s
	})
	return fmt.Errorf("%s line %d: %s", file, lineOf[i], msg)
}

func (c *cli) setList(ctx context.Context, args []string) error {
	fs := c.flagSet("set list")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("set list", "unexpected argument %q", pos[0])
	}
	sets, err := c.client.Sets(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(api.SetList{Sets: api.NonNil(sets)})
	}
	t := newTable(c.stdout, "SET", "ACTIVE", "WRITTEN BY")
	for _, s := range sets {
		t.row(s.Name, strconv.Itoa(s.Active), strings.Join(s.Actors, ", "))
	}
	return t.flush()
}

func (c *cli) setShow(ctx context.Context, args []string) error {
	fs := c.flagSet("set show")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("set show", "want one set NAME")
	}
	rules, err := c.client.SetRules(ctx, pos[0], c.page())
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(api.RuleList{Order: api.OrderID, Rules: api.NonNil(rules)})
	}
	fmt.Fprintf(c.stderr, "set %s: %d active rules, newest first\n", safeText(pos[0]), len(rules))
	t := newTable(c.stdout, "ID", "RULE", "EXPIRES", "ANNOUNCED", "REASON")
	now := c.now()
	for _, r := range rules {
		t.row(strconv.FormatInt(r.ID, 10), r.Text, expiresIn(r.ExpiresAt, now), yesNo(r.Announced), r.Reason)
	}
	return t.flush()
}

func (c *cli) setDelete(ctx context.Context, args []string) error {
	fs := c.flagSet("set delete")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("set delete", "want one set NAME")
	}
	res, err := c.client.DeleteSet(ctx, pos[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "set %s: %d rules withdrawn\n", safeText(res.Set), res.Withdrawn)
	return nil
}
