package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/ribkeeper/ribkeeper/api"
)

// A lost or corrupt database is never a mass withdrawal (issue 21). Each
// test runs ribkeeper and a BIRD with graceful restart on both sides,
// announces grRules4+grRules6 rules, samples BIRD's tables throughout,
// and checks that BIRD never held fewer than all of them until the
// operator said otherwise.

// storeStatus reads GET /v1/status's store part through the CLI.
func storeStatus(d *daemon) api.StoreStatus {
	out, _, code := d.cli("status", "--json")
	var st api.Status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Store == nil {
		return api.StoreStatus{}
	}
	return *st.Store
}

// refusedWrite adds a rule that must be refused, and returns the CLI's
// error output.
func refusedWrite(t *testing.T, d *daemon, text string, says ...string) string {
	t.Helper()
	out, errOut, code := d.cli("rule", "add", text)
	if code == 0 {
		t.Fatalf("rule add %q was acknowledged (%s) by a store that should refuse it", text, strings.TrimSpace(out))
	}
	for _, s := range says {
		if !strings.Contains(errOut, s) {
			t.Errorf("the refusal %q does not say %q", strings.TrimSpace(errOut), s)
		}
	}
	return errOut
}

// keptAll fails t if BIRD held fewer than every rule at a sample from
// from on, before until (zero: to the end).
func keptAll(t *testing.T, samples []sample, from, until time.Time, what string) {
	t.Helper()
	if !until.IsZero() {
		samples = slices.DeleteFunc(slices.Clone(samples), func(s sample) bool { return !s.at.Before(until) })
	}
	low, n := minSample(samples, from)
	t.Logf("%s: %d samples, fewest routes %d+%d", what, n, low.n4, low.n6)
	for _, s := range samples {
		if !s.at.Before(from) && s.err == nil && (s.n4 > grRules4 || s.n6 > grRules6) {
			t.Errorf("%s: BIRD held %d+%d routes, more than the %d+%d rules: a refused write reached it", what, s.n4, s.n6, grRules4, grRules6)
			break
		}
	}
	if n == 0 {
		t.Fatalf("%s: no sample of BIRD's tables", what)
	}
	if low.n4 < grRules4 || low.n6 < grRules6 {
		t.Errorf("%s: BIRD held only %d+%d of %d+%d rules %v in", what, low.n4, low.n6, grRules4, grRules6, low.at.Sub(from).Round(time.Millisecond))
	}
}

func TestStoreLostWhileRunning(t *testing.T) {
	for _, tc := range []struct {
		name, what string
		lose       func(t *testing.T, path string)
		// restore: the operator moves the copy of the lost file back
		// (else accepts the new store).
		restore bool
	}{
		{"deleted", "was deleted", func(t *testing.T, path string) { removeStore(t, path) }, true},
		{"replaced by an empty file", "replaced", func(t *testing.T, path string) {
			removeStore(t, path)
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, bird := startGR(t, true, true)
			path := filepath.Join(d.dir, "rk.db")
			s := startSampler(t, bird, 20*time.Millisecond)
			from := time.Now()
			tc.lose(t, path)
			lostAt := time.Now()

			// The periodic check finds it without a write (every second).
			waitFor(t, 30*time.Second, "status says the store is lost", func() bool { return storeStatus(d).State == "lost" })
			t.Logf("store lost %v after the files went (status)", time.Since(lostAt).Round(time.Millisecond))
			// Writes are refused, naming the file and the next step.
			refusedWrite(t, d, "match destination 198.51.100.77/32 then discard", path, tc.what, "--accept-new-store")

			// A restart on the new, empty store: held, said in one line,
			// BGP sessions down, BIRD keeps every rule (graceful restart).
			d.stop()
			d.start()
			waitFor(t, 30*time.Second, "the held store's log line", func() bool { return d.logCount(`refusing to take the routers' rules away`) == 1 })
			line := regexp.MustCompile(`.*refusing to take the routers' rules away.*`).FindString(readLog(t, d))
			for _, want := range []string{fmt.Sprintf("%d active rules", grRules4+grRules6), "0 active rules", path, "--accept-new-store"} {
				if !strings.Contains(line, want) {
					t.Errorf("the log line does not name %q: %s", want, line)
				}
			}
			if st := storeStatus(d); st.State != "held" {
				t.Errorf("status after the restart: %+v, want held", st)
			}
			refusedWrite(t, d, "match destination 198.51.100.78/32 then discard", "--accept-new-store")
			if bird.Established(0) {
				t.Error("the BGP session came up on a held store")
			}
			if tc.restore {
				// The copy the daemon made of the lost file, moved in
				// place: the same store, every rule, the session back,
				// writes taken again.
				waitFor(t, 30*time.Second, "the lost file copied out", func() bool { return d.logCount(`copied the lost database out`) == 1 })
				d.stop()
				removeStore(t, path)
				for _, suffix := range []string{"", "-wal"} {
					if err := os.Rename(path+".rescued"+suffix, path+suffix); err != nil {
						t.Fatal(err)
					}
				}
				d.start()
				waitFor(t, 30*time.Second, "BGP session with BIRD established on the restored store", func() bool { return bird.Established(0) })
				if st := storeStatus(d); st.State != "ok" {
					t.Errorf("status on the restored store: %+v, want ok", st)
				}
				restored := time.Now()
				d.addRule("match destination 198.51.100.79/32 then discard")
				bird.WaitRoutes(t, "ft4", 30*time.Second, "a rule added to the restored store", hasRoute("flow4 { dst 198.51.100.79/32; }"))
				keptAll(t, s.finish(), from, restored, "from the loss through the restore")
				return
			}
			accepted := time.Now()

			// The operator's word: the new store is the desired state.
			d.stop()
			d.args = []string{"--accept-new-store"}
			d.start()
			waitFor(t, 60*time.Second, "BIRD emptied once the operator accepted the new store", func() bool {
				n4, err4 := bird.Count("ft4")
				n6, err6 := bird.Count("ft6")
				return err4 == nil && err6 == nil && n4 == 0 && n6 == 0
			})
			waitFor(t, 60*time.Second, "the sampler saw BIRD empty", func() bool { l := s.last(); return l.err == nil && l.n4+l.n6 == 0 })
			samples := s.finish()
			keptAll(t, samples, from, accepted, "from the loss until the operator's word")
			// Control: the sampler sees BIRD's table go once the
			// operator accepted the empty store.
			if low, _ := minSample(samples, accepted); low.n4+low.n6 != 0 {
				t.Errorf("BIRD never emptied after --accept-new-store (fewest %d+%d)", low.n4, low.n6)
			}
		})
	}
}

func removeStore(t *testing.T, path string) {
	t.Helper()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

func readLog(t *testing.T, d *daemon) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.dir, "ribkeeper.log"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// corruptMiddle overwrites pages in the middle of a SQLite file whose
// WAL was checkpointed into it.
func corruptMiddle(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	pages := fi.Size() / page
	if pages < 16 {
		t.Fatalf("%s has %d pages: too few to corrupt in the middle", path, pages)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := []byte(strings.Repeat("\x5acorrupt", page/8))
	for i := int64(0); i < 4; i++ {
		if _, err := f.WriteAt(junk, (pages/2+i*pages/8)*page); err != nil {
			t.Fatal(err)
		}
	}
}

// checkpoint moves the WAL's pages into the database file, as another
// program opening the file may.
func checkpoint(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var busy, logged, moved int
	if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(FULL)").Scan(&busy, &logged, &moved); err != nil || busy != 0 {
		t.Fatalf("checkpoint %s: busy %d, %v", path, busy, err)
	}
}

func TestStoreCorrupt(t *testing.T) {
	t.Run("at start", func(t *testing.T) {
		d, bird := startGR(t, true, true)
		path := filepath.Join(d.dir, "rk.db")
		s := startSampler(t, bird, 20*time.Millisecond)
		from := time.Now()
		d.stop() // closing the store checkpoints the WAL into the file
		corruptMiddle(t, path)
		d.ready = []string{"status"}
		d.start()
		waitFor(t, 30*time.Second, "the log names the corrupt file", func() bool { return d.logCount(`database file is corrupt`) >= 1 })
		if st := storeStatus(d); st.State != "corrupt" || st.Integrity == nil || st.Integrity.Result != "corrupt" {
			t.Errorf("status: %+v, want corrupt", st)
		}
		refusedWrite(t, d, "match destination 198.51.100.79/32 then discard", path, ".recover", "backup")
		if bird.Established(0) {
			t.Error("the BGP session came up on a corrupt store")
		}
		// Time for a wrong start to show in BIRD's tables: the status
		// says the reconciler did not run.
		waitFor(t, 30*time.Second, "a second look at the status", func() bool { return storeStatus(d).State == "corrupt" })
		keptAll(t, s.finish(), from, time.Time{}, "stopped, then started on a corrupt file")
	})

	t.Run("while running", func(t *testing.T) {
		d, bird := startGR(t, true, true)
		path := filepath.Join(d.dir, "rk.db")
		// Check every second, from a restart (hitless: graceful restart).
		conf, err := os.ReadFile(d.conf)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(d.conf, []byte(strings.Replace(string(conf), "[store]\n", "[store]\nintegrity_check_interval = \"1s\"\n", 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		d.stop()
		d.start()
		waitFor(t, 30*time.Second, "BGP session with BIRD established again", func() bool { return bird.Established(0) })
		waitFull(t, bird)
		s := startSampler(t, bird, 20*time.Millisecond)
		from := time.Now()
		checkpoint(t, path)
		corruptMiddle(t, path)
		waitFor(t, 30*time.Second, "the log names the corrupt file", func() bool { return d.logCount(`database file is corrupt`) >= 1 })
		refusedWrite(t, d, "match destination 198.51.100.80/32 then discard", path, ".recover")
		// The refusal wakes the reconciler, whose pass finds the desired
		// state unreadable and keeps the rules it holds, withdrawing
		// nothing.
		waitFor(t, 30*time.Second, "a reconcile pass that found the store unreadable", func() bool { return passErr(d) })
		if !bird.Established(0) {
			t.Error("the BGP session went down")
		}
		keptAll(t, s.finish(), from, time.Time{}, "corrupted while running")
	})
}

// passErr reports whether the last reconcile pass says the desired state
// was unreadable.
func passErr(d *daemon) bool {
	out, _, code := d.cli("status", "--json")
	var st api.Status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.LastPass == nil {
		return false
	}
	return strings.Contains(st.LastPass.Err, "desired state unreadable")
}
