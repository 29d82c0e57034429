package cli

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ribkeeper/ribkeeper/api"
)

// Validate checks a rule as AddRule would, storing nothing.
func (c *Client) Validate(ctx context.Context, req api.AddRuleRequest) (api.Validation, error) {
	var v api.Validation
	_, err := c.do(ctx, http.MethodPost, "/v1/validate", req, &v)
	return v, err
}

// ruleValidate is "ribkeeper rule validate" (and "rule add --dry-run"):
// the daemon parses the rule as it would store it; the canonical text is
// printed, nothing is stored.
func (c *cli) ruleValidate(ctx context.Context, args []string) error {
	fs := c.flagSet("rule validate")
	ttl := fs.String("ttl", "", "time to live: a `DURATION` such as 10m, 1h30m or 2d, or never")
	reason := fs.String("reason", "", "why the rule exists: printable `TEXT`, at most 512 bytes")
	sites := fs.String("sites", "", "comma-separated `SITES` the rule targets")
	fs.Bool("allow-unknown-sites", false, "let --sites name a site no appliance has registered yet")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("rule validate", "missing the rule text 'match ... then ...'")
	}
	req, err := addRequest(fs, "rule validate", strings.Join(pos, " "), *ttl, *reason, *sites)
	if err != nil {
		return err
	}
	return c.validate(ctx, req)
}

func (c *cli) validate(ctx context.Context, req api.AddRuleRequest) error {
	v, err := c.client.Validate(ctx, req)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, safeText(v.Text))
	for _, w := range v.Warnings {
		fmt.Fprintf(c.stderr, "warning: %s\n", safeText(api.OneLine(w)))
	}
	if !v.Valid && v.Guardrail != nil {
		return fmt.Errorf("refused by guardrail %s: %s; nothing stored", safeText(v.Guardrail.Name), safeText(api.OneLine(v.Guardrail.Message)))
	}
	expires := "never expires"
	switch {
	case v.ExpiresAt != nil && v.KeepsExpiry:
		expires = "keeps its expiry, " + v.ExpiresAt.Local().Format(time.RFC3339)
	case v.ExpiresAt != nil && v.DefaultTTL:
		expires = "would expire " + v.ExpiresAt.Local().Format(time.RFC3339) + ", the default TTL"
	case v.ExpiresAt != nil:
		expires = "would expire " + v.ExpiresAt.Local().Format(time.RFC3339)
	case v.KeepsExpiry:
		expires = "keeps never expiring"
	}
	fmt.Fprintf(c.stderr, "valid %s rule (%s); nothing stored\n", v.Family, expires)
	return nil
}
