package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/e2e/birdtest"
	"github.com/ribkeeper/ribkeeper/store/disktest"
)

// A write the store refuses never reaches a router: with ribkeeper's
// database on a full 2 MB tmpfs, 20 single-rule writes are each refused
// with an answer that names the full disk, and BIRD receives not one
// UPDATE for them (early announcement is off while the disk has no room
// for a commit). BIRD's table is sampled throughout, and its per-session
// "Import updates/withdraws" counters, which count every route an UPDATE
// carried, prove that no announce-then-withdraw flap hid between samples.
// Once space is freed, writes are acknowledged and announced ahead of
// their commit again.
func TestFullDiskWriteNeverReachesBIRD(t *testing.T) {
	birdtest.Binary(t)
	dir := t.TempDir()
	disk := disktest.Mount(t, "2m") // unmounted after the daemon stopped (cleanups run last first)
	d, bird := startPair(t, pair{
		rkAddr: "127.0.9.1", birdAddr: "127.0.9.2", site: "disk", dir: dir,
		store: fmt.Sprintf("[store]\npath = %q\n", filepath.Join(disk, "rk.db")),
	})

	// A baseline rule, announced and its status recorded, so that nothing
	// is left for the reconciler to write once the disk is full.
	const baseNet = "flow4 { dst 198.51.100.1/32; }"
	id := d.addRule("match destination 198.51.100.1/32 then discard")
	bird.WaitRoutes(t, "ft4", 30*time.Second, "the baseline rule", hasRoute(baseNet))
	waitFor(t, 30*time.Second, "the baseline rule's status says announced", func() bool { return d.show(id)["announced"] == true })

	filler := disktest.Fill(t, disk, "filler")
	updates0, withdraws0, err := bird.ImportStats(0, "flow4")
	if err != nil {
		t.Fatal(err)
	}

	// Sample BIRD's flowspec table on one control connection as fast as
	// it answers, until the refused writes are done.
	ctl, err := bird.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	var (
		mu               sync.Mutex
		samples, maxSeen int
		sampleErr        error
	)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, err := ctl.Count("ft4")
			mu.Lock()
			samples++
			maxSeen = max(maxSeen, n)
			if err != nil && sampleErr == nil {
				sampleErr = err
			}
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()

	var refused []string
	for i := range 20 {
		text := fmt.Sprintf("match destination 203.0.113.%d/32 then discard", i+1)
		out, errOut, code := d.cli("rule", "add", text)
		if code == 0 {
			t.Errorf("write %d on a full disk acknowledged: %s", i, out)
			continue
		}
		if !strings.Contains(errOut, "disk is full") || !strings.Contains(errOut, "free space") {
			t.Errorf("write %d refused without naming the full disk and what to do: %s", i, errOut)
		}
		refused = append(refused, fmt.Sprintf("flow4 { dst 203.0.113.%d/32; }", i+1))
	}
	close(stop)
	<-sampled
	mu.Lock()
	t.Logf("%d samples of BIRD's table during %d refused writes; most routes seen: %d", samples, len(refused), maxSeen)
	if sampleErr != nil {
		t.Fatalf("sampling BIRD: %v", sampleErr)
	}
	if maxSeen != 1 {
		t.Errorf("BIRD held %d flowspec routes while the writes were refused, want only the baseline rule", maxSeen)
	}
	mu.Unlock()
	if !strings.Contains(d.logTail(400), "early announcement is off") {
		t.Errorf("the log does not say why early announcement is off; log:\n%s", d.logTail(40))
	}

	// Free the space: writes commit again, and once one has, writes are
	// announced ahead of their commit again. (The first commits first: the
	// last one failed. A commit that a loaded machine keeps running for
	// longer than a commit should take holds a write back too, so the
	// test writes until one is announced early, at most 10.)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	var after []string
	early := false
	for i := 1; i <= 10 && !early; i++ {
		text := fmt.Sprintf("match destination 198.51.100.%d/32 then discard", 100+i)
		d.addRule(text)
		net := fmt.Sprintf("flow4 { dst 198.51.100.%d/32; }", 100+i)
		after = append(after, net)
		bird.WaitRoutes(t, "ft4", 30*time.Second, "a rule written after space was freed", hasRoute(net))
		early = strings.Contains(d.logTail(400), `announcing ahead of the commit: text="`+text+`"`)
	}
	if !early || !strings.Contains(d.logTail(400), "early announcement is back on") {
		t.Errorf("none of %d writes after the disk had room again was announced ahead of its commit; log:\n%s", len(after), d.logTail(40))
	}
	routes, err := bird.Routes("ft4")
	if err != nil {
		t.Fatal(err)
	}
	for _, net := range refused {
		if _, ok := routes[net]; ok {
			t.Errorf("BIRD holds the refused rule %s", net)
		}
	}

	// The counters cover the whole time since the disk filled: the rules
	// written after space was freed, and nothing else, ever reached BIRD.
	updates, withdraws, err := bird.ImportStats(0, "flow4")
	if err != nil {
		t.Fatal(err)
	}
	if updates-updates0 != len(after) || withdraws != withdraws0 {
		t.Errorf("BIRD received %d route updates and %d withdrawals since the disk filled; want %d (the rules written after space was freed) and 0",
			updates-updates0, withdraws-withdraws0, len(after))
	}
}
