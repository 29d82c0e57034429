package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ribkeeper/ribkeeper/api"
)

// command is one client command: its synopsis and what it does. The
// flags of its usage come from its FlagSet, so the usage --help prints and
// the flags the command accepts cannot differ.
type command struct {
	name     string // "rule add"
	synopsis string // arguments after the name
	about    string
}

// commands lists every client command, in the order usages show them.
var commands = []command{
	{"rule add", "[--ttl 10m|never] [--reason TEXT] [--sites a,b] [--dry-run] 'match ... then ...' | --file FILE|-",
		"Add a FlowSpec rule (or an RTBH route, 'route PREFIX then blackhole') and print its id. " +
			"--file: add the rules of FILE (- for stdin), one rule text per line (blank lines and # comments skipped), with the same flags, " +
			"in batches of up to 2000 rules (fewer if the daemon takes fewer), each all or none; every line is checked before anything is sent. " +
			"The same match again updates that rule: only what is given changes (--reason \"\" clears the reason). " +
			"--dry-run: check it as 'rule validate' does, storing nothing. " +
			"Rule text: README and flowspec/SYNTAX.md."},
	{"rule validate", "[--ttl 10m|never] [--sites a,b] 'match ... then ...'",
		"Check a rule as the daemon would store it (the same parser and errors, the column of the offending word) and print its canonical text; nothing is stored. " +
			"Also says which guardrail would refuse it (exit 1), when it would expire, and warns about what is allowed but dangerous."},
	{"rule list", "[--state active|withdrawing|withdrawn|expired] [--order precedence|id|expires] [--json]",
		"List the stored rules, by default in the order routers apply them."},
	{"rule show", "[--json] ID", "Show one rule, with its announce status and last error."},
	{"rule withdraw", "ID | --file FILE|-", "Withdraw a rule; it is withdrawn once the RIB shows it gone. " +
		"--file: withdraw the active rule of each line's match (one rule text per line, the action ignored; - for stdin), in batches, each all or none."},
	{"rule history", "[--json] ID", "Show every change to a rule, with its time, actor and site."},
	{"route add", "PREFIX --blackhole [--ttl 30m] [--reason TEXT] [--sites a,b] [--community AS:N,...] [--next-hop ADDR]",
		"Announce an RTBH route: PREFIX with BLACKHOLE and NO_EXPORT to the site's next hop (a rule of the unicast families)."},
	{"route list", "[--state S] [--json]", "List the RTBH routes."},
	{"route withdraw", "ID", "Withdraw an RTBH route."},
	{"set apply", "[--ttl 30m|never] [--reason TEXT] [--sites a,b] NAME FILE",
		"Make the rules of set NAME exactly the rules of FILE (- for standard input): one rule text per line, blank lines and # comments skipped. " +
			"Only the difference is written and announced; applying the same file again changes nothing. " +
			"A line whose rule belongs to another set, or that a guardrail refuses, refuses the whole file, naming the line."},
	{"set list", "[--json]", "List the sets, with their active rules and who wrote them."},
	{"set show", "[--json] NAME", "List the active rules of a set, newest first."},
	{"set delete", "NAME", "Withdraw every rule of a set."},
	{"rib", "[--json]", "Show what the embedded RIB holds."},
	{"peers", "[--json]", "Show the BGP sessions and their state."},
	{"status", "[--json]", "Show peers, rule counts and the reconcile passes."},
	{"diff", "[--json]", "Show what the next reconcile pass would change."},
	{"signals", "[--source NAME] [--limit N] [--json]",
		"Show the signals detectors sent most recently (newest first): source, target, state, vector, and whether it was accepted or why it was refused. " +
			"A scoped token sees only signals for its prefixes."},
	{"whoami", "[--json]", "Show who the API sees (the token's name over TCP) and what it may do: role, prefixes, actions, quota."},
	{"incidents list", "[--limit N] [--json]",
		"List the incidents of the playbook engine, newest first: signals for one target and vector, the playbook applied, its step and rules ('ribkeeper incidents' alone does the same)."},
	{"incidents show", "[--json] ID", "Show one incident: its rules, with their state, and its timeline."},
	{"shutdown", "[--withdraw] [--timeout 2m]",
		"Stop the daemon (control socket only). Without --withdraw, routers with graceful restart keep every rule until the next start, as on SIGTERM; " +
			"--withdraw first withdraws every rule from every router and waits until they were sent."},
}

// connectionHelp ends every command's usage: how the CLI finds the daemon.
const connectionHelp = `The daemon: --socket PATH, or the [api] socket of --config FILE, or
$RIBKEEPER_SOCKET, or ./data/ribkeeper.sock; or the TCP API with --url URL
(or $RIBKEEPER_URL), a token from --token-file FILE or $RIBKEEPER_TOKEN,
and --ca-file FILE (or $RIBKEEPER_CACERT) for a private CA.
`

// Synopsis is one line per client command, for the program's overview.
func Synopsis() string {
	var b strings.Builder
	for _, cmd := range commands {
		fmt.Fprintf(&b, "  ribkeeper %s %s\n", cmd.name, cmd.synopsis)
	}
	return b.String()
}

// IsCommand reports whether name is the first word of a client command
// (or its plural, as "rules" for "rule"): the program hands those to Main.
// It is read from the command table, so a new command cannot be left out
// of the program's dispatch.
func IsCommand(name string) bool {
	for _, cmd := range commands {
		first, _, _ := strings.Cut(cmd.name, " ")
		if name == first || name == first+"s" {
			return true
		}
	}
	return false
}

// groupUsage is the usage of "rule" or "route": its subcommands.
func groupUsage(group string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage:\n")
	for _, cmd := range commands {
		if strings.HasPrefix(cmd.name, group+" ") {
			fmt.Fprintf(&b, "  ribkeeper %s %s\n", cmd.name, cmd.synopsis)
		}
	}
	fmt.Fprintf(&b, "\nRun 'ribkeeper %s SUBCOMMAND --help' for one of them.\n", group)
	return b.String()
}

// usage is the --help text of the command fs parses.
func usage(fs *flag.FlagSet) string {
	var b strings.Builder
	for _, cmd := range commands {
		if cmd.name == fs.Name() {
			fmt.Fprintf(&b, "usage: ribkeeper %s %s\n\n%s\n", cmd.name, cmd.synopsis, wrap(cmd.about, 76))
		}
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		b.WriteString("\nflags:\n")
		t := newTable(&b)
		fs.VisitAll(func(f *flag.Flag) {
			name, help := flag.UnquoteUsage(f)
			t.row("  --"+strings.TrimSpace(f.Name+" "+name), help)
		})
		t.flush()
	}
	b.WriteString("\n" + connectionHelp)
	return b.String()
}

// wrap breaks s into lines of at most width bytes at spaces.
func wrap(s string, width int) string {
	var b strings.Builder
	line := 0
	for i, w := range strings.Fields(s) {
		if i > 0 && line+1+len(w) > width {
			b.WriteByte('\n')
			line = 0
		} else if i > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(w)
		line += len(w)
	}
	return b.String()
}

// Exit codes of Run.
const (
	exitOK    = 0
	exitError = 1 // the daemon said no, or could not be reached
	exitUsage = 2
)

// errUsage is a mistake in the command line of cmd ("rule add"; "" for
// none yet); the exit code is 2.
type errUsage struct{ cmd, msg string }

func (e errUsage) Error() string { return e.msg }

func usagef(cmd, format string, args ...any) error {
	return errUsage{cmd, fmt.Sprintf(format, args...)}
}

// Run runs a client subcommand ("rule ...", "rib", "peers", "status"; args exclude
// the program name) against the daemon at socketPath and returns the process
// exit code: 0 ok, 1 the daemon returned an error or could not be reached,
// 2 bad usage. An error is one line on stderr naming the command ("ribkeeper
// rule add: ...") and, for a usage mistake, pointing to its --help, which
// prints the command's usage on stdout. Flags may come before or after
// positional arguments.
func Run(ctx context.Context, socketPath string, args []string, stdout, stderr io.Writer) int {
	return RunWith(ctx, NewClient(socketPath, 0), args, stdout, stderr)
}

// RunWith is Run with the daemon reached through client (the control
// socket or TCP: NewTCPClient).
func RunWith(ctx context.Context, client *Client, args []string, stdout, stderr io.Writer) int {
	return RunWithStdin(ctx, client, os.Stdin, args, stdout, stderr)
}

// RunWithStdin is RunWith reading "--file -" from stdin.
func RunWithStdin(ctx context.Context, client *Client, stdin io.Reader, args []string, stdout, stderr io.Writer) int {
	c := &cli{client: client, stdin: stdin, stdout: stdout, stderr: stderr, now: time.Now}
	err := c.run(ctx, args)
	var ue errUsage
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		prefix, help := "ribkeeper", "ribkeeper --help"
		if ue.cmd != "" {
			prefix, help = "ribkeeper "+ue.cmd, "ribkeeper "+ue.cmd+" --help"
		}
		fmt.Fprintf(stderr, "%s: %s (see '%s')\n", prefix, safeText(api.OneLine(ue.msg)), help)
		return exitUsage
	default:
		prefix := "ribkeeper"
		if c.cmd != "" {
			prefix += " " + c.cmd
		}
		fmt.Fprintf(stderr, "%s: %s\n", prefix, safeText(api.OneLine(err.Error())))
		return exitError
	}
}

type cli struct {
	client *Client
	stdin  io.Reader // "--file -"
	stdout io.Writer
	stderr io.Writer
	now    func() time.Time
	// cmd is the command running ("rule add"), named in its errors.
	cmd string
	// onFlags, if set, is given each FlagSet a command builds (for the
	// completion script).
	onFlags func(*flag.FlagSet)
}

func (c *cli) page() int {
	if c.client.PageSize > 0 {
		return c.client.PageSize
	}
	return api.DefaultPage
}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

func (c *cli) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("", "missing command")
	}
	switch args[0] {
	case "rule", "rules":
		if len(args) < 2 {
			return usagef("rule", "missing subcommand: add, validate, list, show, withdraw or history")
		}
		switch args[1] {
		case "add":
			return c.ruleAdd(ctx, args[2:])
		case "validate", "check":
			return c.ruleValidate(ctx, args[2:])
		case "list", "ls":
			return c.ruleList(ctx, args[2:])
		case "show", "get":
			return c.ruleShow(ctx, args[2:])
		case "withdraw", "rm", "delete":
			return c.ruleWithdraw(ctx, "rule withdraw", args[2:])
		case "history", "log":
			return c.ruleHistory(ctx, args[2:])
		}
		if isHelp(args[1]) {
			fmt.Fprint(c.stdout, groupUsage("rule"))
			return flag.ErrHelp
		}
		return usagef("rule", "unknown subcommand %q: use add, validate, list, show, withdraw or history", args[1])
	case "route", "routes":
		return c.route(ctx, args[1:])
	case "set", "sets":
		return c.set(ctx, args[1:])
	case "rib":
		return c.rib(ctx, args[1:])
	case "peers":
		return c.peers(ctx, args[1:])
	case "status":
		return c.status(ctx, args[1:])
	case "diff":
		return c.diff(ctx, args[1:])
	case "whoami":
		return c.whoami(ctx, args[1:])
	case "signals":
		return c.signals(ctx, args[1:])
	case "shutdown":
		return c.shutdownCmd(ctx, args[1:])
	case "incidents":
		return c.incidents(ctx, args[1:])
	}
	if isHelp(args[0]) {
		fmt.Fprint(c.stdout, "usage:\n"+Synopsis())
		return flag.ErrHelp
	}
	return usagef("", "unknown command %q", args[0])
}

func (c *cli) flagSet(name string) *flag.FlagSet {
	c.cmd = name
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported once, by Run
	if c.onFlags != nil {
		c.onFlags(fs)
	}
	return fs
}

// parse parses flags anywhere among args and returns the positional
// arguments; everything after "--" is positional. -h/--help prints the
// command's usage on stdout and returns flag.ErrHelp.
func (c *cli) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(c.stdout, usage(fs))
				return nil, err
			}
			return nil, usagef(fs.Name(), "%s", flagError(err))
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagError rewords the flag package's errors to name the flag as typed.
func flagError(err error) string {
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return fmt.Sprintf("unknown flag --%s", f)
	}
	if f, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Sprintf("--%s needs a value", f)
	}
	return strings.Replace(msg, "for flag -", "for --", 1)
}

func (c *cli) ruleAdd(ctx context.Context, args []string) error {
	fs := c.flagSet("rule add")
	ttl := fs.String("ttl", "", "time to live: a `DURATION` such as 10m, 1h30m or 2d, or never (default: the daemon's default_ttl for a new rule, 1h as shipped; unchanged on an update)")
	reason := fs.String("reason", "", "why the rule exists: printable `TEXT`, at most 512 bytes (default: unchanged on an update; \"\" clears it)")
	sites := fs.String("sites", "", "comma-separated `SITES` the rule targets (default: every site for a new rule, unchanged on an update)")
	fs.Bool("allow-unknown-sites", false, "let --sites name a site no appliance has registered yet")
	dryRun := fs.Bool("dry-run", false, "check the rule as 'rule validate' does and store nothing")
	file := fs.String("file", "", "add the rules of `FILE`, one rule text per line (- reads stdin)")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if *file != "" {
		if len(pos) > 0 {
			return usagef("rule add", "give the rule text or --file, not both")
		}
		if *dryRun {
			return usagef("rule add", "--dry-run checks one rule: with --file, every line is checked before anything is sent; use 'rule validate' for one of them")
		}
		lines, err := readRuleFile(*file, c.stdin)
		if err != nil {
			return err
		}
		req, err := addRequest(fs, "rule add", "", *ttl, *reason, *sites)
		if err != nil {
			return err
		}
		return c.addFile(ctx, fileName(*file), lines, req)
	}
	if len(pos) == 0 {
		return usagef("rule add", "missing the rule text 'match ... then ...' (or --file FILE)")
	}
	// Unquoted rule text arrives as several words.
	req, err := addRequest(fs, "rule add", strings.Join(pos, " "), *ttl, *reason, *sites)
	if err != nil {
		return err
	}
	if *dryRun {
		return c.validate(ctx, req)
	}
	return c.addRule(ctx, req)
}

// addRequest builds the request of rule add and route add: only the flags
// given on the command line are sent, so an update changes only them.
func addRequest(fs *flag.FlagSet, cmd, text, ttl, reason, sites string) (api.AddRuleRequest, error) {
	req := api.AddRuleRequest{Text: text}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if given["ttl"] {
		ttl = strings.TrimSpace(ttl)
		if ttl != "" && ttl != api.TTLNever {
			// Catch typos here, before asking the daemon.
			if _, err := api.ParseTTL(ttl); err != nil {
				return req, usagef(cmd, "--ttl %q is not a positive duration such as 10m, 1h30m or 2d, or never", ttl)
			}
		}
		req.TTL = ttl
		if ttl == "" {
			req.Clear = append(req.Clear, "ttl")
		}
	}
	if given["reason"] {
		req.Reason = reason
		if reason == "" {
			req.Clear = append(req.Clear, "reason")
		}
	}
	if f := fs.Lookup("allow-unknown-sites"); f != nil {
		req.AllowUnknownSites = f.Value.String() == "true"
	}
	if given["sites"] {
		for _, s := range strings.Split(sites, ",") {
			if s = strings.TrimSpace(s); s != "" {
				req.Sites = append(req.Sites, s)
			}
		}
		if len(req.Sites) == 0 {
			req.Clear = append(req.Clear, "sites")
		}
	}
	return req, nil
}

func (c *cli) addRule(ctx context.Context, req api.AddRuleRequest) error {
	r, created, err := c.client.AddRule(ctx, req)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, r.ID)
	verb := "updated"
	if created {
		verb = "created"
	}
	fmt.Fprintf(c.stderr, "%s rule %d: %s\n", verb, r.ID, safeText(r.Text))
	return nil
}

func (c *cli) ruleList(ctx context.Context, args []string) error {
	fs := c.flagSet("rule list")
	asJSON := fs.Bool("json", false, "print JSON")
	state := fs.String("state", "", "only rules in this `STATE`: active, withdrawing, withdrawn or expired")
	order := fs.String("order", api.OrderPrecedence, "list in this `ORDER`: precedence (the order routers apply rules in), id (newest first) or expires (soonest first)")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("rule list", "unexpected argument %q", pos[0])
	}
	switch *order {
	case api.OrderPrecedence, api.OrderID, api.OrderExpires:
	default:
		return usagef("rule list", "--order %q is not one of precedence, id, expires", *order)
	}
	var rules []api.Rule
	if *order == api.OrderID {
		rules, err = c.client.ListAllRules(ctx, *state, c.page())
	} else {
		// The other orders sort every rule: one request.
		rules, err = c.client.ListRulesOrdered(ctx, *state, *order)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(api.RuleList{Order: *order, Rules: api.NonNil(rules)})
	}
	fmt.Fprintf(c.stderr, "%d rules %s (--order precedence|id|expires)\n", len(rules), api.OrderText(*order))
	t := newTable(c.stdout, "ID", "STATE", "FAMILY", "RULE", "EXPIRES", "ANNOUNCED", "REASON")
	now := c.now()
	for _, r := range rules {
		// One field: "no" until a pass saw the path in the RIB, then to
		// how many of the configured peers it went.
		expires, announced := expiresIn(r.ExpiresAt, now), yesNo(r.Announced)
		if r.Announced && r.AnnouncedTo != "" {
			announced = "announced " + r.AnnouncedTo
		}
		switch r.State {
		case "withdrawn":
			// Finished rules are gone from the RIB: their announce status
			// and expiry are history, not state.
			expires, announced = "-", "-"
		case "expired":
			announced = "-"
		}
		t.row(strconv.FormatInt(r.ID, 10), r.State, r.Family, r.Text, expires, announced, r.Reason)
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, r := range rules {
		for _, n := range r.NotSent {
			fmt.Fprintf(c.stderr, "rule %d %s\n", r.ID, n)
		}
	}
	for _, r := range rules {
		if r.ShadowedBy != 0 {
			fmt.Fprintf(c.stderr, "warning: rule %d never applies: rule %d comes first in the routers' order (RFC 8955 §5.1) and matches all of its traffic with a final action\n", r.ID, r.ShadowedBy)
		}
	}
	return nil
}

func (c *cli) ruleShow(ctx context.Context, args []string) error {
	fs := c.flagSet("rule show")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	id, err := oneID("rule show", pos)
	if err != nil {
		return err
	}
	r, err := c.client.GetRule(ctx, id)
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(r)
	}
	now := c.now()
	expires := "never"
	if r.ExpiresAt != nil {
		expires = fmt.Sprintf("%s (%s)", r.ExpiresAt.Local().Format(time.RFC3339), expiresIn(r.ExpiresAt, now))
	}
	sites := "all"
	if len(r.Sites) > 0 {
		sites = strings.Join(r.Sites, ", ")
	}
	lastErr := r.LastError
	if lastErr == "" {
		lastErr = "-"
	}
	t := newTable(c.stdout)
	t.row("id:", strconv.FormatInt(r.ID, 10))
	t.row("state:", r.State)
	t.row("family:", r.Family)
	t.row("rule:", r.Text)
	t.row("match:", r.Match)
	t.row("action:", r.Action)
	t.row("reason:", r.Reason)
	t.row("actor:", r.Actor)
	t.row("sites:", sites)
	if r.Origin != "" {
		t.row("declared in:", r.Origin+" (a static rule: change it in that configuration and reload)")
	}
	if r.Set != "" {
		t.row("set:", r.Set+" (applying the set again puts back what it says)")
	}
	t.row("created:", r.CreatedAt.Local().Format(time.RFC3339))
	t.row("updated:", r.UpdatedAt.Local().Format(time.RFC3339))
	t.row("expires:", expires)
	t.row("announced:", yesNo(r.Announced))
	if r.Announced && r.AnnouncedTo != "" {
		peers := strings.Join(r.Peers, ", ")
		if peers == "" {
			peers = "none"
		}
		t.row("delivered to:", r.AnnouncedTo+" peers: "+peers)
	}
	for _, n := range r.NotSent {
		t.row("held back:", n)
	}
	t.row("last error:", lastErr)
	return t.flush()
}

func (c *cli) ruleWithdraw(ctx context.Context, cmd string, args []string) error {
	fs := c.flagSet(cmd)
	var file *string
	if cmd == "rule withdraw" {
		file = fs.String("file", "", "withdraw the active rule of each line's match in `FILE` (- reads stdin)")
	}
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if file != nil && *file != "" {
		if len(pos) > 0 {
			return usagef(cmd, "give a rule ID or --file, not both")
		}
		lines, err := readRuleFile(*file, c.stdin)
		if err != nil {
			return err
		}
		return c.withdrawFile(ctx, fileName(*file), lines)
	}
	id, err := oneID(cmd, pos)
	if err != nil {
		return err
	}
	r, err := c.client.WithdrawRule(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "rule %d: %s\n", r.ID, safeText(r.State))
	return nil
}

func (c *cli) ruleHistory(ctx context.Context, args []string) error {
	fs := c.flagSet("rule history")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	id, err := oneID("rule history", pos)
	if err != nil {
		return err
	}
	evs, err := c.client.History(ctx, id)
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(api.EventList{Events: api.NonNil(evs)})
	}
	t := newTable(c.stdout, "TIME", "EVENT", "ACTOR", "SITE", "CHANGES")
	for _, e := range evs {
		t.row(e.At.Local().Format(time.RFC3339), e.Kind, e.Actor, e.Site, changes(e.Old, e.New))
	}
	return t.flush()
}

func (c *cli) whoami(ctx context.Context, args []string) error {
	fs := c.flagSet("whoami")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("whoami", "unexpected argument %q", pos[0])
	}
	w, err := c.client.Whoami(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(w)
	}
	or := func(l []string, all string) string {
		if len(l) == 0 {
			return all
		}
		return strings.Join(l, ", ")
	}
	quota := "none of its own (the guardrails apply)"
	if w.MaxActiveRules > 0 {
		quota = fmt.Sprintf("%d active rules it wrote (the guardrails apply on top)", w.MaxActiveRules)
	}
	fmt.Fprintf(c.stdout, "name:      %s\nrole:      %s\nprefixes:  %s\nactions:   %s\nquota:     %s\n",
		w.Name, w.Role, or(w.Prefixes, "every destination"), or(w.Actions, "every action"), quota)
	return nil
}

func (c *cli) rib(ctx context.Context, args []string) error {
	fs := c.flagSet("rib")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("rib", "unexpected argument %q", pos[0])
	}
	paths, err := c.client.RIB(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(api.PathList{Paths: api.NonNil(paths)})
	}
	t := newTable(c.stdout, "RULE", "FAMILY", "AGE", "PEERS", "MATCH", "ACTION")
	now := c.now()
	for _, p := range paths {
		// "-": a path no rule asks for (the reconciler withdraws it).
		rule, age := "-", "-"
		if p.RuleID != 0 {
			rule = strconv.FormatInt(p.RuleID, 10)
		}
		if p.Since != nil {
			age = shortDuration(now.Sub(*p.Since))
		}
		peers := p.AnnouncedTo
		if len(p.Peers) > 0 {
			peers += " " + strings.Join(p.Peers, ",")
		}
		t.row(rule, p.Family, age, peers, p.Match, p.Action)
	}
	return t.flush()
}

func (c *cli) peers(ctx context.Context, args []string) error {
	fs := c.flagSet("peers")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("peers", "unexpected argument %q", pos[0])
	}
	peers, err := c.client.Peers(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(api.PeerList{Peers: api.NonNil(peers)})
	}
	return peerTable(c.stdout, peers)
}

// peerTable prints the sessions, then for each one that is not
// established (or has flapped) why, as `birdc show protocols all` does.
func peerTable(w io.Writer, peers []api.Peer) error {
	t := newTable(w, "PEER", "ASN", "STATE", "UPTIME", "SENT", "HELD BACK", "RECEIVED/MAX", "FLAPS", "FAMILIES", "PROFILE", "DESCRIPTION")
	for _, p := range peers {
		uptime := "-"
		if p.UptimeSeconds > 0 {
			uptime = shortDuration(time.Duration(p.UptimeSeconds) * time.Second)
		}
		profile := p.Profile
		if profile == "" {
			profile = "-"
		}
		description := p.Description
		if description == "" {
			description = "-"
		}
		limit := "-"
		if p.MaxPrefixes > 0 {
			limit = strconv.FormatUint(uint64(p.MaxPrefixes), 10)
		}
		t.row(p.Address, strconv.FormatUint(uint64(p.ASN), 10), p.State, uptime,
			strconv.Itoa(p.Sent), strconv.Itoa(p.HeldBack), strconv.Itoa(p.Received)+"/"+limit, strconv.Itoa(p.Flaps), strings.Join(p.Families, ","), profile, description)
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, p := range peers {
		if p.LastError == "" && p.Hint == "" {
			continue
		}
		fmt.Fprintf(w, "\n%s: %s", safeText(p.Address), safeText(p.State))
		if p.Since != nil {
			fmt.Fprintf(w, " since %s", p.Since.Local().Format(time.DateTime))
		}
		fmt.Fprintln(w)
		if p.LastError != "" {
			at := ""
			if p.LastErrorAt != nil {
				at = " (" + p.LastErrorAt.Local().Format(time.DateTime) + ")"
			}
			fmt.Fprintf(w, "  last error: %s%s\n", safeText(p.LastError), at)
		}
		if p.Hint != "" {
			fmt.Fprintf(w, "  hint: %s\n", safeText(p.Hint))
		}
	}
	return nil
}

// status prints three aligned blocks: peers, rule counts, last pass.
func (c *cli) status(ctx context.Context, args []string) error {
	fs := c.flagSet("status")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("status", "unexpected argument %q", pos[0])
	}
	st, err := c.client.Status(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		st.Peers = api.NonNil(st.Peers)
		return c.printJSON(st)
	}
	fmt.Fprintln(c.stdout, "Peers:")
	if len(st.Peers) == 0 {
		fmt.Fprintln(c.stdout, "  (none configured)")
	} else if err := peerTable(&indent{w: c.stdout}, st.Peers); err != nil {
		return err
	}
	if len(st.Sites) > 0 {
		fmt.Fprintf(c.stdout, "\nSites: %s\n", safeText(strings.Join(st.Sites, ", ")))
	}
	if sc := st.Store; sc != nil && sc.State != "ok" {
		fmt.Fprintf(c.stdout, "\nStore: %s, refusing every write:\n  %s\n", safeText(sc.State), safeText(api.OneLine(sc.Error)))
	}
	fmt.Fprintln(c.stdout, "\nRules:")
	if rc := st.Rules; rc != nil {
		t := newTable(&indent{w: c.stdout}, "STATE", "COUNT")
		t.row("active", strconv.Itoa(rc.Active))
		t.row("  announced", strconv.Itoa(rc.Announced))
		t.row("withdrawing", strconv.Itoa(rc.Withdrawing))
		t.row("withdrawn", strconv.Itoa(rc.Withdrawn))
		t.row("expired", strconv.Itoa(rc.Expired))
		fams := make([]string, 0, len(rc.ByFamily))
		for f := range rc.ByFamily {
			fams = append(fams, f)
		}
		slices.Sort(fams)
		for _, f := range fams {
			t.row("active "+f, strconv.Itoa(rc.ByFamily[f]))
		}
		if err := t.flush(); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(c.stdout, "  unknown")
	}
	fmt.Fprintln(c.stdout, "\nLast reconcile pass:")
	if p := st.LastPass; p != nil {
		t := newTable(&indent{w: c.stdout})
		t.row("started:", fmt.Sprintf("%s (%s ago)", p.Started.Local().Format(time.RFC3339), shortDuration(c.now().Sub(p.Started))))
		t.row("duration:", time.Duration(p.DurationSeconds*float64(time.Second)).String())
		t.row("result:", p.Result)
		t.row("changes:", fmt.Sprintf("added %d, updated %d, withdrawn %d, finished %d",
			p.Added, p.Updated, p.Withdrawn, p.Finished))
		t.row("in the RIB as wanted:", strconv.Itoa(p.Adopted))
		t.row("orphans:", strconv.Itoa(p.Orphans))
		t.row("pending:", strconv.Itoa(p.Pending))
		t.row("errors:", strconv.Itoa(p.Errors))
		if p.Err != "" {
			t.row("error:", p.Err)
		}
		if err := t.flush(); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(c.stdout, "  none yet")
	}
	if tot := st.SinceStart; tot != nil {
		fmt.Fprintf(c.stdout, "\nSince start (%s, %s ago):\n", tot.Started.Local().Format(time.RFC3339), shortDuration(c.now().Sub(tot.Started)))
		t := newTable(&indent{w: c.stdout})
		t.row("passes:", fmt.Sprintf("%d (%d with errors)", tot.Passes, tot.ErrorPasses))
		t.row("changes:", fmt.Sprintf("added %d, updated %d, withdrawn %d, finished %d", tot.Added, tot.Updated, tot.Withdrawn, tot.Finished))
		t.row("errors:", strconv.FormatUint(tot.Errors, 10))
		t.row("drift repaired:", fmt.Sprintf("re-added %d, replaced %d, orphans withdrawn %d", tot.Readded, tot.Replaced, tot.OrphansWithdrawn))
		t.row("restarts:", fmt.Sprintf("speaker %d, peer resets %d", tot.SpeakerRestarts, tot.PeerResets))
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(st.Notifications) > 0 {
		fmt.Fprintln(c.stdout, "\nNotifications:")
		t := newTable(&indent{w: c.stdout}, "RECEIVER", "KIND", "QUEUED", "DELIVERED", "RETRIES", "FAILED", "DROPPED", "LAST ERROR")
		for _, n := range st.Notifications {
			last := "-"
			if n.LastError != "" {
				last = fmt.Sprintf("%s (%s ago)", api.OneLine(n.LastError), shortDuration(c.now().Sub(n.LastErrAt)))
			}
			t.row(safeText(n.Name), n.Kind, strconv.Itoa(n.Queued), strconv.FormatUint(n.Delivered, 10),
				strconv.FormatUint(n.Retries, 10), strconv.FormatUint(n.Failed, 10), strconv.FormatUint(n.Dropped, 10), safeText(last))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	for _, e := range st.Errors {
		fmt.Fprintf(c.stderr, "ribkeeper: status incomplete: %s\n", safeText(api.OneLine(e)))
	}
	return nil
}

// indent prefixes every line written with two spaces.
type indent struct {
	w   io.Writer
	mid bool // the last write did not end a line
}

func (i *indent) Write(b []byte) (int, error) {
	var out []byte
	for _, c := range b {
		if !i.mid {
			out = append(out, ' ', ' ')
		}
		out = append(out, c)
		i.mid = c != '\n'
	}
	if _, err := i.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(safeJSON{c.stdout})
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// fileName is how messages name the file of --file.
func fileName(path string) string {
	if path == "-" {
		return "stdin"
	}
	return path
}

func oneID(cmd string, pos []string) (int64, error) {
	if len(pos) != 1 {
		return 0, usagef(cmd, "want exactly one rule ID, got %d arguments", len(pos))
	}
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || id <= 0 {
		return 0, usagef(cmd, "%q is not a rule ID", pos[0])
	}
	return id, nil
}
