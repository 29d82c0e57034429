package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// profileWhile saves a CPU profile and a runtime trace of the daemon,
// each asked for secs seconds from now, as DIR/NAME.cpu.pb.gz and
// DIR/NAME.trace when RIBKEEPER_BENCH_PROFILE=DIR is set, and its
// /metrics before and after (NAME.metrics.before, .after: reconcile
// passes per write). With RIBKEEPER_BENCH_STRACE=1 as well, strace
// counts the daemon's fsync calls meanwhile (NAME.strace: commits per
// write; it slows every system call, so the latencies of that run mean
// nothing). The returned function waits for all of it. Without the
// variable it does nothing.
func (d *benchDaemon) profileWhile(b testing.TB, name string, secs int) (wait func()) {
	dir := os.Getenv("RIBKEEPER_BENCH_PROFILE")
	if dir == "" {
		return func() {}
	}
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", d.socket)
		},
	}}
	done := make(chan struct{}, 2)
	get := func(path, file string) {
		defer func() { done <- struct{}{} }()
		resp, err := hc.Get("http://ribkeeper" + path)
		if err != nil {
			b.Logf("profile %s: %v", file, err)
			return
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Logf("profile %s: %s %v", file, resp.Status, err)
			return
		}
		os.WriteFile(filepath.Join(dir, file), data, 0o644)
	}
	get("/metrics", name+".metrics.before")
	done <- struct{}{}
	<-done
	var st *exec.Cmd
	if os.Getenv("RIBKEEPER_BENCH_STRACE") != "" {
		st = exec.Command("strace", "-f", "-c", "-e", "trace=fsync,fdatasync,pwrite64", "-o", filepath.Join(dir, name+".strace"), "-p", strconv.Itoa(d.pid()))
		if err := st.Start(); err != nil {
			b.Fatal(err)
		}
	}
	go get("/debug/pprof/profile?seconds="+strconv.Itoa(secs), name+".cpu.pb.gz")
	go get("/debug/pprof/trace?seconds="+strconv.Itoa(secs), name+".trace")
	return func() {
		<-done
		<-done
		get("/metrics", name+".metrics.after")
		if st != nil {
			st.Process.Signal(os.Interrupt)
			st.Wait()
		}
	}
}
