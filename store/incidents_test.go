package store

import (
	"fmt"
	"testing"
	"time"
)

// Incidents are kept per site: saved, replaced by id, read back as
// written; ended ones beyond keepEnded are deleted.
func testIncidents(t *testing.T, fresh freshFunc) {
	ctx := ctxT(t)
	cfg := fresh(t)
	a, b := open(t, cfg, "a"), open(t, cfg, "b")
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	save := func(s *Store, id int64, state string) {
		t.Helper()
		doc := fmt.Sprintf(`{"id":%d,"state":%q}`, id, state)
		if err := s.SaveIncidents(ctx, []IncidentRecord{{ID: id, State: state, OpenedAt: at, UpdatedAt: at.Add(time.Duration(id) * time.Second), Doc: []byte(doc)}}, 2); err != nil {
			t.Fatalf("SaveIncident %d: %v", id, err)
		}
	}
	for id := int64(1); id <= 5; id++ {
		save(a, id, "active")
	}
	save(b, 1, "holding")
	for _, id := range []int64{1, 2, 4, 5} {
		save(a, id, IncidentEnded)
	}
	open, recent, maxID, err := a.LoadIncidents(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 1 || open[0].ID != 3 || open[0].State != "active" || string(open[0].Doc) != `{"id":3,"state":"active"}` ||
		!open[0].OpenedAt.Equal(at) || !open[0].UpdatedAt.Equal(at.Add(3*time.Second)) {
		t.Fatalf("open = %+v", open)
	}
	if len(recent) != 2 || recent[0].ID != 4 || recent[1].ID != 5 || string(recent[1].Doc) != `{"id":5,"state":"ended"}` {
		t.Fatalf("recent = %+v (want 4, 5: keepEnded 2)", recent)
	}
	if maxID != 5 {
		t.Fatalf("maxID = %d", maxID)
	}
	if _, recent, _, _ := a.LoadIncidents(ctx, 1); len(recent) != 1 || recent[0].ID != 5 {
		t.Fatalf("the most recent ended one: %+v", recent)
	}
	open, recent, maxID, err = b.LoadIncidents(ctx, 10)
	if err != nil || len(open) != 1 || open[0].State != "holding" || len(recent) != 0 || maxID != 1 {
		t.Fatalf("site b: %+v %+v %d %v", open, recent, maxID, err)
	}
	if err := a.SaveIncidents(ctx, []IncidentRecord{{ID: 6, State: "active", OpenedAt: at, UpdatedAt: at}, {ID: 0, State: "active", OpenedAt: at, UpdatedAt: at}}, 1); err == nil {
		t.Fatal("an incident without id saved")
	}
	if open, _, _, _ := a.LoadIncidents(ctx, 0); len(open) != 1 {
		t.Fatalf("a refused batch stored %d open incidents", len(open))
	}
	// Many in one transaction.
	batch := []IncidentRecord{{ID: 7, State: "active", OpenedAt: at, UpdatedAt: at, Doc: []byte("{}")}, {ID: 8, State: IncidentEnded, OpenedAt: at, UpdatedAt: at, Doc: []byte("{}")}}
	if err := a.SaveIncidents(ctx, batch, 1); err != nil {
		t.Fatal(err)
	}
	if open, recent, maxID, err := a.LoadIncidents(ctx, 10); err != nil || len(open) != 2 || len(recent) != 1 || recent[0].ID != 8 || maxID != 8 {
		t.Fatalf("after a batch: %+v %+v %d %v", open, recent, maxID, err)
	}
}
