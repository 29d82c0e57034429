package cli

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ribkeeper/ribkeeper/api"
)

// Incidents returns the open incidents and the ended ones the daemon
// keeps, newest first, at most limit (0: the daemon's default).
func (c *Client) Incidents(ctx context.Context, limit int) ([]api.Incident, error) {
	path := "/v1/incidents"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	var out api.IncidentList
	_, err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out.Incidents, err
}

// Incident returns one incident with its timeline.
func (c *Client) Incident(ctx context.Context, id int64) (api.Incident, error) {
	var out api.Incident
	_, err := c.do(ctx, http.MethodGet, "/v1/incidents/"+strconv.FormatInt(id, 10), nil, &out)
	return out, err
}

// incidents runs "incidents" and "incidents show ID".
func (c *cli) incidents(ctx context.Context, args []string) error {
	if len(args) > 0 && (args[0] == "show" || args[0] == "get") {
		return c.incidentShow(ctx, args[1:])
	}
	if len(args) > 0 && (args[0] == "list" || args[0] == "ls") {
		args = args[1:]
	}
	fs := c.flagSet("incidents list")
	asJSON := fs.Bool("json", false, "print JSON")
	limit := fs.Int("limit", 0, "show at most `N` incidents (default 100)")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("incidents list", "unexpected argument %q: use 'ribkeeper incidents show ID' for one incident", pos[0])
	}
	if *limit < 0 || *limit > api.MaxIncidentLimit {
		return usagef("incidents list", "--limit must be 1 to %d", api.MaxIncidentLimit)
	}
	list, err := c.client.Incidents(ctx, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(api.IncidentList{Incidents: api.NonNil(list)})
	}
	if len(list) == 0 {
		fmt.Fprintln(c.stdout, "no incidents")
		return nil
	}
	now := c.now()
	t := newTable(c.stdout, "ID", "STATE", "TARGET", "VECTOR", "SOURCE", "PLAYBOOK", "STEP", "SIGNALS", "RULES", "OPENED")
	for _, in := range list {
		state := in.State
		if in.Shadow {
			state += " (shadow)"
		}
		if in.State == "holding" && in.EndsAt != nil {
			state += " until " + in.EndsAt.Local().Format("15:04:05")
		}
		active := 0
		for _, r := range in.Rules {
			if r.State == "active" || r.State == "shadow" {
				active++
			}
		}
		t.row(strconv.FormatInt(in.ID, 10), state, in.Target, vectorText(in.Vector), in.Source, in.Playbook,
			fmt.Sprintf("%d/%d", in.Step, in.Steps), strconv.FormatInt(in.Signals, 10), strconv.Itoa(active), ago(in.OpenedAt, now))
	}
	return t.flush()
}

func (c *cli) incidentShow(ctx context.Context, args []string) error {
	fs := c.flagSet("incidents show")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	id, err := oneID("incidents show", pos)
	if err != nil {
		return err
	}
	in, err := c.client.Incident(ctx, id)
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(in)
	}
	t := newTable(c.stdout)
	t.row("id:", strconv.FormatInt(in.ID, 10))
	state := in.State
	if in.Shadow {
		state += " (shadow: nothing is written)"
	}
	t.row("state:", state)
	t.row("target:", in.Target)
	t.row("vector:", vectorText(in.Vector))
	t.row("source:", in.Source)
	t.row("playbook:", fmt.Sprintf("%s, step %d of %d", in.Playbook, in.Step, in.Steps))
	t.row("signals:", fmt.Sprintf("%d (%d in this step), peak %d pps %d bps", in.Signals, in.StepSigs, in.PeakPPS, in.PeakBPS))
	if in.AttackID != "" {
		t.row("attack id:", in.AttackID)
	}
	t.row("opened:", in.OpenedAt.Local().Format(time.RFC3339))
	t.row("last signal:", in.LastAt.Local().Format(time.RFC3339))
	if in.EndsAt != nil {
		t.row("ends:", in.EndsAt.Local().Format(time.RFC3339)+" (hold-down)")
	}
	if in.EndedAt != nil {
		t.row("ended:", in.EndedAt.Local().Format(time.RFC3339))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, "\nrules:")
	rt := newTable(c.stdout, "  ID", "STEP", "STATE", "EXPIRES", "RULE")
	for _, r := range in.Rules {
		id := "-"
		if r.ID != 0 {
			id = strconv.FormatInt(r.ID, 10)
		}
		exp := "-"
		if r.ExpiresAt != nil {
			exp = r.ExpiresAt.Local().Format(time.RFC3339)
		}
		text := r.Text
		if r.Error != "" {
			text += "  (" + r.Error + ")"
		}
		rt.row("  "+id, strconv.Itoa(r.Step), r.State, exp, text)
	}
	if err := rt.flush(); err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, "\ntimeline:")
	tt := newTable(c.stdout)
	for _, e := range in.Timeline {
		tt.row("  "+e.At.Local().Format(time.RFC3339), e.Kind, e.Text)
	}
	if in.Omitted > 0 {
		tt.row("  ...", "", fmt.Sprintf("%d more entries not kept ([incidents] max_timeline)", in.Omitted))
	}
	return tt.flush()
}

func vectorText(v api.IncidentVector) string {
	var parts []string
	if v.Protocol != "" {
		parts = append(parts, v.Protocol)
	}
	if len(v.DstPorts) > 0 {
		parts = append(parts, "dst "+ports(v.DstPorts))
	}
	if len(v.SrcPorts) > 0 {
		parts = append(parts, "src "+ports(v.SrcPorts))
	}
	if v.TCPFlags != "" {
		parts = append(parts, "flags "+v.TCPFlags)
	}
	if len(parts) == 0 {
		return "any"
	}
	return strings.Join(parts, " ")
}

func ports(ps []uint16) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ",")
}

func ago(t, now time.Time) string {
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String() + " ago"
}
