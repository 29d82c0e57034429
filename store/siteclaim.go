package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
)

// siteLockClass is the first key of the advisory lock a running instance
// holds on its site ("rk" in ASCII); the second is a hash of the site.
const siteLockClass int32 = 0x726b

// SiteTakenError is a claim refused because another running instance
// serves the same site of the same PostgreSQL database.
type SiteTakenError struct {
	Site, Where string
	Holder      string // the other instance's application_name, e.g. "ribkeeper site=fra host=rk1 pid=812"
	From        string // its client address, or "" when unknown
	Since       time.Time
}

func (e *SiteTakenError) Error() string {
	who := "another process"
	if e.Holder != "" {
		who = fmt.Sprintf("%q", e.Holder)
	}
	if e.From != "" {
		who += " connected from " + e.From
	}
	if !e.Since.IsZero() {
		who += " since " + e.Since.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("another ribkeeper already serves site %q on the PostgreSQL database %s: %s; "+
		"stop it first, or give this instance its own site (the top-level site setting)", e.Site, e.Where, who)
}

// ClaimSite makes this Store the only running instance of its site: on
// PostgreSQL it takes a session-level advisory lock, on a connection of
// its own named "ribkeeper site=S host=H pid=P" (application_name) so
// that a refused instance can say who holds it, and keeps it until Close.
// A claim already held elsewhere fails with a *SiteTakenError. It is a
// check at start: if the database drops the connection later, the lock
// goes with it and is not taken again. On SQLite it does nothing: the
// daemon locks the database file itself (package instance).
func (s *Store) ClaimSite(ctx context.Context) error {
	pg, ok := s.eng.(*pgEngine)
	if !ok {
		return nil
	}
	cctx, cancel := s.call(ctx, 1)
	defer cancel()
	pc, err := pg.pool.Acquire(cctx)
	if err != nil {
		return s.wrap(ctx, "claim site", err)
	}
	conn := pc.Hijack() // out of the pool: the lock lives as long as it
	host, _ := os.Hostname()
	name := fmt.Sprintf("ribkeeper site=%s host=%s pid=%d", s.site, host, os.Getpid())
	key := siteLockKey(s.site)
	if _, err := conn.Exec(cctx, "SELECT set_config('application_name', $1, false)", name); err != nil {
		conn.Close(context.Background())
		return s.wrap(ctx, "claim site", err)
	}
	var taken *SiteTakenError
	for {
		var got bool
		if err := conn.QueryRow(cctx, "SELECT pg_try_advisory_lock($1::int4, $2::int4)", siteLockClass, key).Scan(&got); err != nil {
			conn.Close(context.Background())
			if taken != nil {
				return taken // waited for a dead holder's lock in vain
			}
			return s.wrap(ctx, "claim site", err)
		}
		if got {
			break
		}
		taken = pg.siteHolder(cctx, conn, key, s.log)
		taken.Site = s.site
		// A holder on this host whose process is gone (killed, and
		// restarted by systemd) keeps its lock only until the database
		// notices the closed connection: wait for that, within the
		// store's timeout.
		if !taken.goneHere(host) || cctx.Err() != nil {
			conn.Close(context.Background())
			return taken
		}
		select {
		case <-cctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	pg.claim = conn
	return nil
}

// siteHolder says who holds site key's lock: its session's
// application_name, client address and start.
func (e *pgEngine) siteHolder(ctx context.Context, conn *pgx.Conn, key int32, log hclog.Logger) *SiteTakenError {
	taken := &SiteTakenError{Where: e.where}
	var from *string
	var since *time.Time
	// The client address is visible to the same role (or a superuser) only.
	if err := conn.QueryRow(ctx, `SELECT a.application_name, host(a.client_addr), a.backend_start
		FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
		  AND l.classid = $1::bigint::oid AND l.objid = $2::bigint::oid
		LIMIT 1`, int64(siteLockClass), int64(uint32(key))).Scan(&taken.Holder, &from, &since); err != nil && err != pgx.ErrNoRows {
		log.Debug("reading who holds the site", "error", err)
	}
	if from != nil {
		taken.From = *from
	}
	if since != nil {
		taken.Since = *since
	}
	return taken
}

// goneHere reports whether the holder names this host and a pid that no
// longer runs.
func (e *SiteTakenError) goneHere(host string) bool {
	f := strings.Fields(e.Holder) // as ClaimSite names its session
	if len(f) != 4 || f[0] != "ribkeeper" || f[2] != "host="+host || !strings.HasPrefix(f[3], "pid=") {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(f[3], "pid="))
	if err != nil || pid <= 0 {
		return false
	}
	_, err = os.Stat("/proc/" + strconv.Itoa(pid))
	return errors.Is(err, fs.ErrNotExist)
}

// siteLockKey is the second key of site's advisory lock.
func siteLockKey(site string) int32 {
	h := fnv.New32a()
	h.Write([]byte(site))
	return int32(h.Sum32())
}
