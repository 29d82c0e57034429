package store

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// On PostgreSQL one instance serves a site: a second claim of the same
// site is refused naming the holder (its site, host and pid), a claim of
// another site succeeds, and the site is free again once the holder
// closes.
func TestClaimSitePostgres(t *testing.T) {
	ctx := ctxT(t)
	cfg := postgresFresh(t)
	first := open(t, cfg, "fra")
	if err := first.ClaimSite(ctx); err != nil {
		t.Fatal(err)
	}
	second := open(t, cfg, "fra")
	err := second.ClaimSite(ctx)
	var taken *SiteTakenError
	if !errors.As(err, &taken) {
		t.Fatalf("second claim of site fra: %v, want a *SiteTakenError", err)
	}
	for _, want := range []string{`another ribkeeper already serves site "fra"`, "pid=" + strconv.Itoa(os.Getpid()), "own site"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	t.Log(err)
	if err := open(t, cfg, "ams").ClaimSite(ctx); err != nil {
		t.Errorf("claim of another site refused: %v", err)
	}
	first.Close()
	// The server releases the lock when its backend has seen the closed
	// connection, a moment after Close returns: the same process (whose
	// pid is alive, so ClaimSite does not wait for it) asks until then.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := second.ClaimSite(ctx)
		if err == nil {
			break
		}
		if !errors.As(err, &taken) || time.Now().After(deadline) {
			t.Fatalf("claim after the holder closed: %v", err)
		}
		// The next try is a round trip to the server: no sleep needed
		// for it to see the closed connection in between.
	}
}

// On SQLite ClaimSite does nothing (the daemon locks the file itself).
func TestClaimSiteSQLite(t *testing.T) {
	s := open(t, sqliteFresh(t), "a")
	if err := s.ClaimSite(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// A holder is waited for only when it names this host and a process that
// is gone: its lock goes once the database notices the closed connection.
func TestSiteHolderGoneHere(t *testing.T) {
	host, _ := os.Hostname()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no `true` to get a finished pid from")
	}
	dead := cmd.Process.Pid
	for _, c := range []struct {
		holder string
		gone   bool
	}{
		{fmt.Sprintf("ribkeeper site=fra host=%s pid=%d", host, dead), true},
		{fmt.Sprintf("ribkeeper site=fra host=%s pid=%d", host, os.Getpid()), false},
		{fmt.Sprintf("ribkeeper site=fra host=%s-other pid=%d", host, dead), false},
		{"psql", false},
		{"", false},
	} {
		if got := (&SiteTakenError{Holder: c.holder}).goneHere(host); got != c.gone {
			t.Errorf("goneHere(%q) = %v, want %v", c.holder, got, c.gone)
		}
	}
}
