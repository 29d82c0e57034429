package store

import (
	"testing"

	"github.com/ribkeeper/ribkeeper/flowspec"
)

// Routes (RTBH) are stored like FlowSpec rules: keyed by family and prefix,
// the action (communities, optional next hop) read back unchanged.
func TestRoutesSQLite(t *testing.T)   { testRoutes(t, sqliteFresh) }
func TestRoutesPostgres(t *testing.T) { testRoutes(t, postgresFresh) }

func testRoutes(t *testing.T, fresh freshFunc) {
	s := open(t, fresh(t), "a")
	ctx := ctxT(t)
	parse := func(text string) flowspec.Rule {
		r, err := flowspec.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	bh := parse("route 203.0.113.7/32 then blackhole")
	bh6 := parse("route 2001:db8::7/128 then blackhole next-hop 100::1")
	fs := parse("match destination 203.0.113.7/32 then discard")
	var ids []int64
	for _, r := range []flowspec.Rule{bh, bh6, fs} {
		got, created, err := s.Upsert(ctx, Input{Rule: r, Actor: "cli"})
		if err != nil || !created {
			t.Fatalf("Upsert(%v) = %v %v", r, created, err)
		}
		if got.Rule != r || got.Text != r.String() {
			t.Errorf("Upsert returned %v %q, want %v", got.Rule, got.Text, r)
		}
		ids = append(ids, got.ID)
	}
	// Same prefix, other action: an update of the same rule.
	upd := parse("route 203.0.113.7/32 then blackhole community 64500:1")
	got, created, err := s.Upsert(ctx, Input{Rule: upd, Actor: "cli"})
	if err != nil || created || got.ID != ids[0] {
		t.Fatalf("Upsert(update) = %v %v %v", got.ID, created, err)
	}
	active, err := s.ActiveRules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[int64]flowspec.Rule{}
	for _, r := range active {
		byID[r.ID] = r.Rule
	}
	if byID[ids[0]] != upd || byID[ids[1]] != bh6 || byID[ids[2]] != fs || len(byID) != 3 {
		t.Errorf("active = %v", byID)
	}
}
