package cli

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/ribkeeper/ribkeeper/api"
)

// route runs "route add|list|withdraw": RTBH routes are rules of the
// ipv4-unicast/ipv6-unicast families ("route PREFIX then blackhole"), so
// these commands build that text and use the rule routes of the API.
func (c *cli) route(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("route", "missing subcommand: add, list or withdraw")
	}
	if isHelp(args[0]) {
		fmt.Fprint(c.stdout, groupUsage("route"))
		return flag.ErrHelp
	}
	switch args[0] {
	case "add":
		return c.routeAdd(ctx, args[1:])
	case "list", "ls":
		return c.routeList(ctx, args[1:])
	case "withdraw", "rm", "delete":
		return c.routeWithdraw(ctx, args[1:])
	}
	return usagef("route", "unknown subcommand %q: use add, list or withdraw", args[0])
}

func (c *cli) routeAdd(ctx context.Context, args []string) error {
	fs := c.flagSet("route add")
	blackhole := fs.Bool("blackhole", false, "tag the route BLACKHOLE (65535:666) and NO_EXPORT")
	ttl := fs.String("ttl", "", "time to live: a `DURATION` such as 30m or 2d, or never (default: the daemon's default_ttl for a new route, 1h as shipped; unchanged on an update)")
	reason := fs.String("reason", "", "why the route exists: printable `TEXT`, at most 512 bytes (default: unchanged on an update; \"\" clears it)")
	sites := fs.String("sites", "", "comma-separated `SITES` the route targets (default: every site for a new route, unchanged on an update)")
	comms := fs.String("community", "", "extra standard `COMMUNITIES` AS:N, comma-separated")
	nh := fs.String("next-hop", "", "next hop `ADDR` (default: the site's [rtbh] next hop)")
	fs.Bool("allow-unknown-sites", false, "let --sites name a site no appliance has registered yet")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("route add", "give exactly one prefix, e.g. 203.0.113.7/32")
	}
	if _, perr := netip.ParsePrefix(pos[0]); perr != nil {
		if _, aerr := netip.ParseAddr(pos[0]); aerr != nil {
			return usagef("route add", "%q is not a prefix such as 203.0.113.7/32", pos[0])
		}
	}
	var acts []string
	if *blackhole {
		acts = append(acts, "blackhole")
	}
	for _, s := range strings.Split(*comms, ",") {
		if s = strings.TrimSpace(s); s != "" {
			acts = append(acts, "community "+s)
		}
	}
	if len(acts) == 0 {
		return usagef("route add", "give --blackhole (or --community)")
	}
	if *nh != "" {
		acts = append(acts, "next-hop "+*nh)
	}
	text := "route " + pos[0] + " then " + strings.Join(acts, " ")
	req, err := addRequest(fs, "route add", text, *ttl, *reason, *sites)
	if err != nil {
		return err
	}
	return c.addRule(ctx, req)
}

func (c *cli) routeList(ctx context.Context, args []string) error {
	fs := c.flagSet("route list")
	asJSON := fs.Bool("json", false, "print JSON")
	state := fs.String("state", "", "only routes in this `STATE`: active, withdrawing, withdrawn or expired")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("route list", "unexpected argument %q", pos[0])
	}
	rules, err := c.client.ListAllRules(ctx, *state, c.page())
	if err != nil {
		return err
	}
	routes := []api.Rule{}
	for _, r := range rules {
		if strings.HasSuffix(r.Family, "-unicast") {
			routes = append(routes, r)
		}
	}
	if *asJSON {
		return c.printJSON(api.RuleList{Rules: routes})
	}
	t := newTable(c.stdout, "ID", "STATE", "ROUTE", "EXPIRES", "ANNOUNCED", "REASON")
	now := c.now()
	for _, r := range routes {
		t.row(strconv.FormatInt(r.ID, 10), r.State, r.Text, expiresIn(r.ExpiresAt, now), yesNo(r.Announced), r.Reason)
	}
	return t.flush()
}

// routeWithdraw withdraws a route by id, and refuses an id that names a
// FlowSpec rule: "route withdraw" must not take a filter off the routers
// by a mistyped id. (A rule's family never changes, so the check holds.)
func (c *cli) routeWithdraw(ctx context.Context, args []string) error {
	fs := c.flagSet("route withdraw")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	id, err := oneID("route withdraw", pos)
	if err != nil {
		return err
	}
	r, err := c.client.GetRule(ctx, id)
	if err != nil {
		return err
	}
	if !strings.HasSuffix(r.Family, "-unicast") {
		return fmt.Errorf("rule %d is a FlowSpec rule (%s), not a route: nothing withdrawn; "+
			"to withdraw it, run: ribkeeper rule withdraw %d (route list shows the routes)", id, safeText(r.Family), id)
	}
	return c.ruleWithdraw(ctx, "route withdraw", pos)
}
