package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// loopFS makes a small ext4 file system on a loop device mounted under
// the test's temp dir, for fsfreeze. It needs root and the tools; without
// them the test skips (fails under CI).
func loopFS(t *testing.T) string {
	t.Helper()
	need := func(why string) {
		if os.Getenv("CI") != "" {
			t.Fatalf("hung disk test: %s", why)
		}
		t.Skipf("hung disk test: %s", why)
	}
	if os.Geteuid() != 0 {
		need("needs root (mount, fsfreeze)")
	}
	for _, tool := range []string{"mkfs.ext4", "mount", "umount", "fsfreeze"} {
		if _, err := exec.LookPath(tool); err != nil {
			need(tool + " not found")
		}
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "disk.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) error {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run("truncate", "-s", "64M", img); err != nil {
		t.Fatal(err)
	}
	if err := run("mkfs.ext4", "-q", "-F", img); err != nil {
		t.Fatal(err)
	}
	if err := run("mount", "-o", "loop", img, mnt); err != nil {
		need("cannot mount a loop device: " + err.Error())
	}
	t.Cleanup(func() {
		run("fsfreeze", "--unfreeze", mnt)
		run("umount", "-l", mnt)
	})
	return mnt
}

// A hung disk (the store's file system frozen with fsfreeze): a write
// answers 503 by its deadline, later writes do too without waiting for
// the first, reads answer, and no write answered "nothing was stored" is
// ever stored once the disk thaws.
func TestHungDisk(t *testing.T) {
	mnt := loopFS(t)
	dir := t.TempDir()
	d := &daemon{t: t, dir: dir, conf: filepath.Join(dir, "rk.toml"), socket: filepath.Join(dir, "rk.sock")}
	if err := os.WriteFile(d.conf, []byte(fmt.Sprintf(`[bgp]
asn = 65000
router_id = "127.0.0.1"
listen_port = -1
[store]
path = %q
write_timeout = "2s"
[api]
socket = %q
`, filepath.Join(mnt, "rk.db"), d.socket)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	d.start()
	d.addRule("match destination 198.51.100.1/32 then discard")

	if out, err := exec.Command("fsfreeze", "--freeze", mnt).CombinedOutput(); err != nil {
		t.Fatalf("fsfreeze: %v: %s", err, out)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			if out, err := exec.Command("fsfreeze", "--unfreeze", mnt).CombinedOutput(); err != nil {
				t.Errorf("fsfreeze --unfreeze: %v: %s", err, out)
			}
		}
	}
	defer thaw()

	type answer struct {
		text, errOut string
		code         int
		took         time.Duration
	}
	write := func(text string) <-chan answer {
		c := make(chan answer, 1)
		go func() {
			start := time.Now()
			_, errOut, code := d.cli("rule", "add", text)
			c <- answer{text, errOut, code, time.Since(start)}
		}()
		return c
	}
	first := write("match destination 198.51.100.2/32 then discard")
	second := write("match destination 198.51.100.3/32 then discard")
	var answers []answer
	for _, c := range []<-chan answer{first, second} {
		select {
		case a := <-c:
			answers = append(answers, a)
		case <-time.After(60 * time.Second):
			thaw()
			t.Fatalf("a write to the frozen disk was not answered within 60 s; log:\n%s", d.logTail(20))
		}
	}
	for _, a := range answers {
		t.Logf("%q: exit %d after %v: %s", a.text, a.code, a.took.Round(time.Millisecond), strings.TrimSpace(a.errOut))
		if a.code == 0 || !strings.Contains(a.errOut, "write_timeout") {
			t.Errorf("%q on a frozen disk: exit %d, %q; want a 503 naming write_timeout", a.text, a.code, a.errOut)
		}
	}
	// Reads answer while the disk is frozen.
	if _, errOut, code := d.cli("rule", "list"); code != 0 {
		t.Errorf("rule list on a frozen disk: exit %d: %s", code, errOut)
	}
	thaw()
	// After the thaw, writes commit again; a write that was told
	// "nothing was stored" never shows up.
	d.addRule("match destination 198.51.100.4/32 then discard")
	out := d.mustCLI("rule", "list")
	for _, a := range answers {
		dst := strings.Fields(a.text)[2]
		if strings.Contains(a.errOut, "nothing was stored") && strings.Contains(out, dst) {
			t.Errorf("%s was answered %q and stored after the thaw", dst, strings.TrimSpace(a.errOut))
		}
		if strings.Contains(a.errOut, "may still be stored") {
			t.Logf("%s: outcome pending at its deadline, stored after the thaw: %v", dst, strings.Contains(out, dst))
		}
	}
}
