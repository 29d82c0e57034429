package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// IncidentEnded is the state of an incident whose rules were withdrawn;
// every other state is open.
const IncidentEnded = "ended"

// MaxIncidentDocBytes bounds one incident's document.
const MaxIncidentDocBytes = 4 << 20

// IncidentRecord is one incident of this site's playbook engine as
// stored. The engine assigns ids and encodes Doc; the store keeps Doc as
// it is and reads only the id and state.
type IncidentRecord struct {
	ID        int64
	State     string
	OpenedAt  time.Time
	UpdatedAt time.Time
	Doc       []byte
}

// SaveIncidents stores rs in one transaction, each replacing this site's
// incident with its id. When one has ended, this site's ended incidents
// beyond the keepEnded most recent are deleted, so the table stays
// bounded.
func (s *Store) SaveIncidents(ctx context.Context, rs []IncidentRecord, keepEnded int) error {
	ended := false
	for _, r := range rs {
		switch {
		case r.ID <= 0 || r.State == "" || r.OpenedAt.IsZero() || r.UpdatedAt.IsZero():
			return fmt.Errorf("%w: an incident needs an id, a state and its times", ErrInvalidInput)
		case len(r.Doc) > MaxIncidentDocBytes:
			return fmt.Errorf("%w: incident %d is %d bytes, more than the %d stored: lower [incidents] max_timeline", ErrInvalidInput, r.ID, len(r.Doc), MaxIncidentDocBytes)
		}
		ended = ended || r.State == IncidentEnded
	}
	if len(rs) == 0 {
		return nil
	}
	return s.write(ctx, "save incidents", len(rs), func(ctx context.Context, w *wtx) (bool, error) {
		for _, r := range rs {
			_, err := w.exec(ctx, `INSERT INTO incidents (site, id, state, opened_at, updated_at, doc) VALUES (?, ?, ?, ?, ?, ?)
				ON CONFLICT (site, id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at, doc = excluded.doc`,
				s.site, r.ID, r.State, s.eng.timeArg(asStored(r.OpenedAt)), s.eng.timeArg(asStored(r.UpdatedAt)), string(r.Doc))
			if err != nil {
				return false, err
			}
		}
		if !ended {
			return false, nil
		}
		_, err := w.exec(ctx, `DELETE FROM incidents WHERE site = ? AND state = ? AND id NOT IN
			(SELECT id FROM incidents WHERE site = ? AND state = ? ORDER BY id DESC LIMIT ?)`,
			s.site, IncidentEnded, s.site, IncidentEnded, max(keepEnded, 0))
		return false, err
	})
}

// LoadIncidents returns this site's open incidents, its ended ones (at
// most ended, the most recent), both oldest first, and the highest id it
// ever stored that is still kept.
func (s *Store) LoadIncidents(ctx context.Context, ended int) (open, recent []IncidentRecord, maxID int64, err error) {
	cctx, cancel := s.call(ctx, 1)
	defer cancel()
	open, recent, maxID, err = s.loadIncidents(cctx, ended)
	return open, recent, maxID, s.wrap(ctx, "read incidents", err)
}

func (s *Store) loadIncidents(ctx context.Context, ended int) (open, recent []IncidentRecord, maxID int64, err error) {
	read := func(q string, args ...any) ([]IncidentRecord, error) {
		rs, err := s.eng.reader().query(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		defer rs.Close()
		var out []IncidentRecord
		for rs.Next() {
			var (
				r               IncidentRecord
				opened, updated dbTime
				doc             dbText
			)
			if err := rs.Scan(&r.ID, &r.State, &opened, &updated, &doc); err != nil {
				return nil, err
			}
			r.OpenedAt, r.UpdatedAt, r.Doc = opened.t, updated.t, []byte(doc.s)
			out = append(out, r)
		}
		return out, rs.Err()
	}
	const cols = `SELECT id, state, opened_at, updated_at, doc FROM incidents WHERE site = ? AND state `
	if open, err = read(cols+`<> ? ORDER BY id`, s.site, IncidentEnded); err != nil {
		return nil, nil, 0, err
	}
	if recent, err = read(cols+`= ? ORDER BY id DESC LIMIT ?`, s.site, IncidentEnded, max(ended, 0)); err != nil {
		return nil, nil, 0, err
	}
	for i, j := 0, len(recent)-1; i < j; i, j = i+1, j-1 {
		recent[i], recent[j] = recent[j], recent[i]
	}
	var top *int64
	err = s.eng.reader().queryRow(ctx, `SELECT MAX(id) FROM incidents WHERE site = ?`, s.site).Scan(&top)
	if err != nil && !errors.Is(err, errNoRows) {
		return nil, nil, 0, err
	}
	if top != nil {
		maxID = *top
	}
	return open, recent, maxID, nil
}
