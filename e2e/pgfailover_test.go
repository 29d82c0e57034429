package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/cli"
	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"github.com/ribkeeper/ribkeeper/store/pgtest"
)

// The failover test's loopback addresses: the two PostgreSQL servers, and
// appliance i's ribkeeper and BIRD on .1+i and .21+i.
const (
	foPrimary = "127.0.86.10"
	foStandby = "127.0.86.11"
	foSync    = "rk_standby" // the standby's application_name
	foBase    = 200          // rules announced before the writes start
	foWrites  = 100          // writes each appliance acknowledges before the kill and after the promotion
	// foQuiet is the appliance that writes nothing from the pause until it
	// has caught up on what the others wrote after the promotion: only its
	// own reconnects bring it there.
	foQuiet = 2
)

// foWrite is one API write of the failover test and its outcome.
type foWrite struct {
	appliance  int
	text, flow string
	start, end time.Time
	id         int64  // the acknowledged rule's id; 0 if not acknowledged
	status     int    // the HTTP status of a refusal; 0 for none or a transport error
	err        string // a refusal's message
}

// foLog is every write of the failover test, from the writers running
// during it.
type foLog struct {
	mu     sync.Mutex
	writes []foWrite
}

func (l *foLog) add(w foWrite) {
	l.mu.Lock()
	l.writes = append(l.writes, w)
	l.mu.Unlock()
}

// count is the number of writes through appliance a (-1: any) that
// answered after since and were acknowledged (ok) or refused (!ok).
func (l *foLog) count(a int, since time.Time, ok bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, w := range l.writes {
		if (a < 0 || w.appliance == a) && w.end.After(since) && (w.id != 0) == ok {
			n++
		}
	}
	return n
}

// ackedFlows is BIRD's text of every write acknowledged before t.
func (l *foLog) ackedFlows(t time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, w := range l.writes {
		if w.id != 0 && w.end.Before(t) {
			out = append(out, w.flow)
		}
	}
	return out
}

// firstAck is when the first write through appliance a started after
// since was acknowledged (zero: none yet).
func (l *foLog) firstAck(a int, since time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.writes {
		if w.appliance == a && w.id != 0 && !w.start.Before(since) {
			return w.end
		}
	}
	return time.Time{}
}

// A primary PostgreSQL with a synchronous standby serves three
// appliances through a two-host DSN (target_session_attrs=read-write).
// During API writes every ~20 ms, the primary's WAL sender is paused so
// that commits wait for the standby, and the primary is killed with
// SIGKILL; then the standby is promoted. Every acknowledged write is on
// the new primary, every appliance reconnects by itself and catches up on
// what was written through the others (one of them writes nothing from the
// pause until it has), its change feed moves to the new primary, its log
// names the server it talks to, and no BIRD ever holds fewer routes than
// were acknowledged before the primary died.
func TestPostgresFailover(t *testing.T) {
	birdtest.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	primary := pgtest.StartPrimary(t, foPrimary)
	if err := primary.Exec(ctx, "CREATE DATABASE rk"); err != nil {
		t.Fatal(err)
	}
	standby := primary.StartStandby(t, foStandby, foSync)
	sctx, scancel := context.WithTimeout(ctx, 60*time.Second)
	err := primary.RequireSync(sctx, foSync)
	scancel()
	if err != nil {
		t.Fatal(err)
	}
	dsn := fmt.Sprintf("host=%s,%s port=%d,%d dbname=rk user=postgres sslmode=disable target_session_attrs=read-write connect_timeout=5",
		primary.Addr, standby.Addr, primary.Port, standby.Port)
	newServer := fmt.Sprintf("%s:%d", standby.Addr, standby.Port)

	const n = 3
	var (
		ds      [n]*daemon
		birds   [n]*birdtest.Router
		clients [n]*cli.Client
	)
	for i := range n {
		ds[i], birds[i] = startPair(t, pair{
			rkAddr: fmt.Sprintf("127.0.86.%d", 1+i), birdAddr: fmt.Sprintf("127.0.86.%d", 21+i),
			site: fmt.Sprintf("fo%d", i), dir: t.TempDir(),
			store: fmt.Sprintf("[store]\ndriver = \"postgres\"\ndsn = %q\n", dsn),
		})
		clients[i] = cli.NewClient(ds[i].socket, 30*time.Second)
	}

	// A table to keep: foBase rules through the first appliance, on every
	// BIRD.
	var base []api.AddRuleRequest
	for i := range foBase {
		base = append(base, api.AddRuleRequest{Text: fmt.Sprintf("match destination 198.19.%d.%d/32 protocol tcp then discard", i/200, i%200+1)})
	}
	if _, err := clients[0].AddRules(ctx, base); err != nil {
		t.Fatalf("add %d rules: %v", foBase, err)
	}
	for i, b := range birds {
		waitFor(t, 60*time.Second, fmt.Sprintf("BIRD %d holds the %d rules", i, foBase), func() bool {
			c, err := b.Count("ft4")
			return err == nil && c == foBase
		})
	}
	var samplers [n]*sampler
	for i, b := range birds {
		samplers[i] = startSampler(t, b, 50*time.Millisecond)
	}

	// Writers: one per appliance, each every 60 ms, so a write every
	// ~20 ms in all; each records its outcome.
	var (
		log   foLog
		wg    sync.WaitGroup
		stop  = make(chan struct{})
		quiet atomic.Bool // foQuiet writes nothing
	)
	var seq struct {
		sync.Mutex
		n int
	}
	next := func() (text, flow string) {
		seq.Lock()
		i := seq.n
		seq.n++
		seq.Unlock()
		a, b := i/250, i%250+1
		return fmt.Sprintf("match destination 198.18.%d.%d/32 protocol udp then discard", a, b),
			fmt.Sprintf("flow4 { dst 198.18.%d.%d/32; proto 17; }", a, b)
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(60 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if i == foQuiet && quiet.Load() {
					continue
				}
				w := foWrite{appliance: i, start: time.Now()}
				w.text, w.flow = next()
				r, _, err := clients[i].AddRule(ctx, api.AddRuleRequest{Text: w.text})
				w.end = time.Now()
				var ae *api.Error
				switch {
				case err == nil:
					w.id = r.ID
				case errors.As(err, &ae):
					w.status, w.err = ae.Status, ae.Message
				default:
					w.err = err.Error()
				}
				log.add(w)
			}
		}()
	}
	stopWriters := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopWriters()

	start := time.Now()
	for i := range n {
		waitFor(t, 60*time.Second, fmt.Sprintf("appliance %d acknowledged %d writes", i, foWrites), func() bool { return log.count(i, start, true) >= foWrites })
	}

	// Pause the WAL sender so commits wait for the standby, then crash
	// the primary while they do: the crash catches commits the standby
	// never received, which no client may have been told are done.
	walsender, err := primary.WALSender(ctx, foSync)
	if err != nil {
		t.Fatalf("the primary's WAL sender: %v", err)
	}
	quiet.Store(true)
	pausedAt := time.Now()
	if err := syscall.Kill(walsender, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a commit waits for the paused standby", func() bool {
		w, err := primary.SyncRepWaiters(ctx)
		return err == nil && w > 0
	})
	// What each BIRD must keep from now on: the base rules and every write
	// acknowledged before the pause (a write refused later may have been
	// announced early, or committed on the old primary alone, and may go).
	durable := log.ackedFlows(pausedAt)
	for i, b := range birds {
		b.WaitRoutes(t, "ft4", 60*time.Second, fmt.Sprintf("BIRD %d holds the %d writes acknowledged before the pause", i, len(durable)),
			func(m map[string]birdtest.Route) bool {
				for _, f := range durable {
					if _, ok := m[f]; !ok {
						return false
					}
				}
				return true
			})
	}
	floor := foBase + len(durable)
	atKill := make([]int, n)
	for i, s := range samplers {
		atKill[i] = s.last().n4
	}
	killedAt := time.Now()
	primary.Crash()

	// The appliances notice by themselves: each refuses writes while
	// there is no primary.
	for i := range n {
		if i != foQuiet {
			waitFor(t, 60*time.Second, fmt.Sprintf("appliance %d refuses writes without a primary", i), func() bool { return log.count(i, killedAt, false) >= 3 })
		}
	}
	// A failover manager takes a while to decide: promote once every
	// change feed has failed to reconnect five times, so that it waits
	// its longest between tries (0.1, 0.2, 0.4, 0.8, then 1 s).
	for i, d := range ds {
		waitFor(t, 60*time.Second, fmt.Sprintf("appliance %d's change feed failed to reconnect 5 times", i), func() bool {
			return len(logTimes(t, d, "change feed still cannot reconnect")) >= 4
		})
	}
	// Times after the promotion count from when it was asked for: pg_ctl
	// promote returns only once it has seen it done, on its own polling.
	promotedAt := time.Now()
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	t.Logf("primary killed; promotion asked %v later, pg_ctl promote took %v",
		promotedAt.Sub(killedAt).Round(time.Millisecond), time.Since(promotedAt).Round(time.Millisecond))

	// Every appliance writes again, and its change feed listens on the
	// new primary, without any help.
	feedAt, poolAt := make([]time.Time, n), make([]time.Time, n)
	for i := range n {
		waitFor(t, 60*time.Second, fmt.Sprintf("appliance %d's change feed listens on %s", i, newServer), func() bool {
			feedAt[i] = logTime(t, ds[i], "change feed listening", "server="+newServer)
			return !feedAt[i].IsZero()
		})
		poolAt[i] = logTime(t, ds[i], "reconnected to another PostgreSQL server", "server="+newServer)
	}
	for i := range n {
		if i != foQuiet {
			waitFor(t, 60*time.Second, fmt.Sprintf("appliance %d acknowledged %d writes after the promotion", i, foWrites), func() bool {
				return log.count(i, promotedAt, true) >= foWrites
			})
		}
	}
	// The quiet appliance catches up on everything the others wrote, then
	// writes again too.
	missed := log.ackedFlows(time.Now())
	birds[foQuiet].WaitRoutes(t, "ft4", 60*time.Second, fmt.Sprintf("the quiet appliance's BIRD holds the %d writes acknowledged through the others", len(missed)),
		func(m map[string]birdtest.Route) bool {
			for _, f := range missed {
				if _, ok := m[f]; !ok {
					return false
				}
			}
			return true
		})
	resumedAt := time.Now()
	quiet.Store(false)
	waitFor(t, 60*time.Second, "the quiet appliance acknowledges writes again", func() bool { return log.count(foQuiet, resumedAt, true) >= 10 })
	stopWriters()

	// Accounting: every acknowledged write is active on the new primary.
	log.mu.Lock()
	writes := log.writes
	log.mu.Unlock()
	conn, err := pgx.Connect(ctx, standby.DSN("rk"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	stored := map[int64]string{}
	rows, err := conn.Query(ctx, "SELECT id, state FROM rules")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var state string
		if err := rows.Scan(&id, &state); err != nil {
			t.Fatal(err)
		}
		stored[id] = state
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var acked, lost, refused, refused503, failed int
	var firstRefusals []string
	want := map[string]bool{}
	for _, w := range writes {
		if w.id != 0 {
			acked++
			want[w.flow] = true
			if stored[w.id] != "active" {
				lost++
				t.Errorf("write %q through appliance %d was acknowledged as rule %d; on the new primary: %q", w.text, w.appliance, w.id, stored[w.id])
			}
			continue
		}
		refused++
		if w.status == 503 {
			refused503++
		} else if w.status == 0 {
			failed++
		}
		if len(firstRefusals) < 3 {
			firstRefusals = append(firstRefusals, fmt.Sprintf("%d %s", w.status, w.err))
		}
		if w.status != 503 {
			t.Errorf("write through appliance %d answered %d %q during the failover; want 503 (retry later)", w.appliance, w.status, w.err)
		}
	}
	var active int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM rules WHERE state = 'active'").Scan(&active); err != nil {
		t.Fatal(err)
	}

	// Every appliance catches up: each BIRD holds every acknowledged rule,
	// whichever appliance took it, and exactly the active rules.
	for i, b := range birds {
		b.WaitRoutes(t, "ft4", 60*time.Second, fmt.Sprintf("BIRD %d holds every acknowledged rule", i), func(m map[string]birdtest.Route) bool {
			for f := range want {
				if _, ok := m[f]; !ok {
					return false
				}
			}
			return len(m) == active
		})
	}
	smallest := -1
	for i, s := range samplers {
		ss := s.finish()
		low, samples := minSample(ss, killedAt)
		t.Logf("BIRD %d: %d routes when the primary died (%d acknowledged), smallest table after: %d (%d samples)", i, atKill[i], floor, low.n4, samples)
		if samples == 0 {
			t.Errorf("BIRD %d: no sample after the primary died", i)
		}
		if low.n4 < floor {
			t.Errorf("BIRD %d fell to %d routes at %v (%v after the kill); %d rules were acknowledged before the primary's WAL sender was paused",
				i, low.n4, low.at.Format(time.RFC3339Nano), low.at.Sub(killedAt), floor)
		}
		if smallest < 0 || low.n4 < smallest {
			smallest = low.n4
		}
	}

	// The feeds are live on the new primary: a withdrawal through one
	// appliance of a rule written through another leaves every BIRD.
	var victim foWrite
	for _, w := range writes {
		if w.id != 0 && w.appliance == 0 && w.start.After(promotedAt) {
			victim = w
			break
		}
	}
	if _, err := clients[2].WithdrawRule(ctx, victim.id); err != nil {
		t.Fatalf("withdraw rule %d through appliance 2: %v", victim.id, err)
	}
	for i, b := range birds {
		b.WaitRoutes(t, "ft4", 30*time.Second, fmt.Sprintf("BIRD %d drops the rule withdrawn through appliance 2", i), lacks(victim.flow))
	}

	// The log names the server in use, not the DSN's first host.
	for i, d := range ds {
		if logTime(t, d, "connected to PostgreSQL", fmt.Sprintf("server=%s:%d", primary.Addr, primary.Port)).IsZero() {
			t.Errorf("appliance %d's log does not name the first server it connected to", i)
		}
		if logTime(t, d, "reconnected to another PostgreSQL server", "server="+newServer).IsZero() {
			t.Errorf("appliance %d's log does not name the server it moved to (%s)", i, newServer)
		}
	}

	t.Logf("appliance 0's log of its servers:\n%s", logLines(ds[0], "PostgreSQL", "change feed"))
	var reconnect []string
	for i := range n {
		r := fmt.Sprintf("appliance %d: pool on the new primary %v, change feed %v", i,
			poolAt[i].Sub(promotedAt).Round(time.Millisecond), feedAt[i].Sub(promotedAt).Round(time.Millisecond))
		if i != foQuiet {
			r += fmt.Sprintf(", first acknowledged write %v", log.firstAck(i, promotedAt).Sub(promotedAt).Round(time.Millisecond))
		} else {
			r += " (quiet: no writes of its own)"
		}
		reconnect = append(reconnect, r)
	}
	t.Logf("writes: %d acknowledged (%d before the WAL sender was paused), %d lost, %d refused (%d with 503, %d without an answer, %d of them committed all the same); %d active rules on the new primary",
		acked, len(durable), lost, refused, refused503, failed, active-foBase-acked, active)
	t.Logf("first refusals: %q", firstRefusals)
	t.Logf("smallest BIRD table after the kill: %d", smallest)
	t.Logf("after the promotion: %s", strings.Join(reconnect, "; "))
}

// logTime is the time stamp of the first line of d's log that contains
// every one of parts (zero: none).
func logTime(t *testing.T, d *daemon, parts ...string) time.Time {
	t.Helper()
	if ts := logTimes(t, d, parts...); len(ts) > 0 {
		return ts[0]
	}
	return time.Time{}
}

// logTimes is the time stamps of the lines of d's log that contain every
// one of parts.
func logTimes(t *testing.T, d *daemon, parts ...string) []time.Time {
	t.Helper()
	f, err := os.Open(filepath.Join(d.dir, "ribkeeper.log"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []time.Time
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		ok := true
		for _, p := range parts {
			if !strings.Contains(sc.Text(), p) {
				ok = false
				break
			}
		}
		if ok {
			stamp, _, _ := strings.Cut(sc.Text(), " ")
			at, err := time.Parse("2006-01-02T15:04:05.000Z0700", stamp)
			if err != nil {
				t.Fatalf("log line without a time stamp: %q", sc.Text())
			}
			out = append(out, at)
		}
	}
	return out
}

// logLines is the lines of d's log that contain one of words.
func logLines(d *daemon, words ...string) string {
	b, _ := os.ReadFile(filepath.Join(d.dir, "ribkeeper.log"))
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
