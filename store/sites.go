package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// registerSite records this instance's site as known (at Open): rules may
// then target it without AllowUnknownSites.
func (s *Store) registerSite(ctx context.Context) error {
	now := s.eng.timeArg(s.now())
	_, err := s.eng.reader().exec(ctx, `INSERT INTO sites (name, registered_at, last_started_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET last_started_at = excluded.last_started_at`, s.site, now, now)
	return err
}

// Sites returns the known sites, sorted: every site an instance of this
// store was started with (and, from before sites were registered, every
// site that reported announce status).
func (s *Store) Sites(ctx context.Context) ([]string, error) {
	cctx, cancel := s.call(ctx, 1)
	defer cancel()
	out, err := s.sites(cctx)
	return out, s.wrap(ctx, "read sites", err)
}

func (s *Store) sites(ctx context.Context) ([]string, error) {
	rs, err := s.eng.reader().query(ctx, `SELECT name FROM sites ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var name string
		if err := rs.Scan(&name); err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, rs.Err()
}

// checkSites refuses inputs that target a site no instance registered,
// unless they allow it: a mistyped site would be stored and then never
// announced anywhere. It reads the sites only if an input names some.
func (s *Store) checkSites(ctx context.Context, es []encoded, batch bool) error {
	var known []string
	read := false
	for i := range es {
		e := &es[i]
		if len(e.sites) == 0 || e.in.AllowUnknownSites || e.in.Keep&KeepSites != 0 {
			continue
		}
		if !read {
			cctx, cancel := s.call(ctx, 1)
			var err error
			known, err = s.sites(cctx)
			cancel()
			if err != nil {
				return s.wrap(ctx, "read sites", err)
			}
			read = true
		}
		for _, site := range e.sites {
			if _, ok := slices.BinarySearch(known, site); ok {
				continue
			}
			idx := -1
			if batch {
				idx = i
			}
			list := "none yet"
			if len(known) > 0 {
				list = strings.Join(known, ", ")
			}
			return &InputError{Index: idx, Field: "sites", Msg: fmt.Sprintf(
				"unknown site %q: the known sites are %s (each appliance registers its site when it starts); check the spelling, or allow unknown sites (CLI --allow-unknown-sites, JSON allow_unknown_sites) for a site not started yet",
				site, list)}
		}
	}
	return nil
}
