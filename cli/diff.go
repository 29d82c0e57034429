package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/ribkeeper/ribkeeper/api"
)

// Diff returns what the next reconcile pass would change.
func (c *Client) Diff(ctx context.Context) (api.Diff, error) {
	var d api.Diff
	_, err := c.do(ctx, http.MethodGet, "/v1/diff", nil, &d)
	return d, err
}

func (c *cli) diff(ctx context.Context, args []string) error {
	fs := c.flagSet("diff")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("diff", "unexpected argument %q", pos[0])
	}
	d, err := c.client.Diff(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(d)
	}
	return printDiff(c.stdout, d)
}

func printDiff(w io.Writer, d api.Diff) error {
	n := len(d.Add) + len(d.Update) + len(d.Retire) + len(d.Finish)
	if !d.Capped {
		n += len(d.Withdraw)
	}
	if n == 0 {
		_, err := fmt.Fprintf(w, "nothing to change (%d rules in the RIB as wanted)\n", d.Adopted)
		return err
	}
	t := newTable(w, "OP", "ID", "FAMILY", "MATCH", "ACTION")
	id := func(i int64) string {
		if i == 0 {
			return "-"
		}
		return strconv.FormatInt(i, 10)
	}
	for _, it := range d.Add {
		t.row("add", id(it.ID), it.Family, it.Match, it.Action)
	}
	for _, it := range d.Update {
		t.row("update", id(it.ID), it.Family, it.Match, it.Old+" -> "+it.Action)
	}
	for _, it := range d.Retire {
		t.row("withdraw ("+it.State+")", id(it.ID), it.Family, it.Match, it.Action)
	}
	op := "withdraw (orphan)"
	if d.Capped {
		op = "orphan (capped: kept)"
	}
	for _, it := range d.Withdraw {
		t.row(op, id(it.ID), it.Family, it.Match, it.Action)
	}
	for _, it := range d.Finish {
		t.row("finish ("+it.State+")", id(it.ID), it.Family, it.Match, "")
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d changes; %d rules in the RIB as wanted\n", n, d.Adopted)
	return err
}
