package cli

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/ribkeeper/ribkeeper/api"
)

// Shutdown asks the daemon to stop (see ShutdownRequest). It waits as long
// as the withdrawal takes, up to timeout.
func (c *Client) Shutdown(ctx context.Context, withdraw bool, timeout time.Duration) (api.ShutdownResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	long := *c
	hc := *c.hc
	hc.Timeout = timeout
	long.hc = &hc
	var out api.ShutdownResponse
	_, err := long.do(ctx, http.MethodPost, "/v1/shutdown", api.ShutdownRequest{Withdraw: withdraw}, &out)
	return out, err
}

// shutdownCmd is `ribkeeper shutdown [--withdraw] [--timeout D]`.
func (c *cli) shutdownCmd(ctx context.Context, args []string) error {
	fs := c.flagSet("shutdown")
	withdraw := fs.Bool("withdraw", false, "withdraw every rule from every router before stopping")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for the daemon")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("shutdown", "unexpected argument %q", pos[0])
	}
	res, err := c.client.Shutdown(ctx, *withdraw, *timeout)
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	fmt.Fprintln(c.stdout, res.Message)
	return nil
}
