package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runCLI runs Run against sock and returns the exit code and outputs.
func runCLI(t *testing.T, sock string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), sock, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// --help prints the command's one usage text on stdout, and it lists every
// flag the command accepts.
func TestCLIHelp(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, cmd := range commands {
		args := append(strings.Fields(cmd.name), "--help")
		code, out, errOut := runCLI(t, sock, args...)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "usage: ribkeeper "+cmd.name+" "+cmd.synopsis+"\n") {
			t.Errorf("%s --help: exit %d, stderr %q, stdout:\n%s", cmd.name, code, errOut, out)
			continue
		}
		// Every --flag of the synopsis is described under flags.
		for _, w := range strings.FieldsFunc(cmd.synopsis, func(r rune) bool { return r == ' ' || r == '[' || r == ']' }) {
			if strings.HasPrefix(w, "--") && !strings.Contains(out, "\n  "+w) {
				t.Errorf("%s --help does not describe %s:\n%s", cmd.name, w, out)
			}
		}
		if code, out2, _ := runCLI(t, sock, append(strings.Fields(cmd.name), "-h")...); code != 0 || out2 != out {
			t.Errorf("%s -h differs from --help", cmd.name)
		}
	}
	for _, group := range []string{"rule", "route"} {
		code, out, _ := runCLI(t, sock, group, "--help")
		if code != 0 || !strings.Contains(out, "ribkeeper "+group+" add ") {
			t.Errorf("%s --help: exit %d\n%s", group, code, out)
		}
	}
	if code, out, _ := runCLI(t, sock, "--help"); code != 0 || out != "usage:\n"+Synopsis() {
		t.Errorf("--help: exit %d\n%s", code, out)
	}
}

func TestCLIUnreachable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	code, out, errOut := runCLI(t, sock, "rule", "list")
	want := "ribkeeper rule list: cannot reach the daemon at " + sock + ": is `ribkeeper serve` running? ("
	if code != 1 || out != "" || !strings.HasPrefix(errOut, want) || strings.Count(errOut, "\n") != 1 {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and %q...", code, out, errOut, want)
	}
}

func TestParseInterleaved(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		pos, ttl   string
		wantErrNil bool
	}{
		{[]string{"--ttl", "1m", "a", "b"}, "a b", "1m", true},
		{[]string{"a", "--ttl", "1m", "b"}, "a b", "1m", true},
		{[]string{"a", "b", "-ttl=1m"}, "a b", "1m", true},
		{[]string{"--", "--ttl", "1m"}, "--ttl 1m", "", true},
		{[]string{"a", "--", "b", "--ttl"}, "a b --ttl", "", true},
		{[]string{"a", "--ttl"}, "", "", false},
	} {
		fs := (&cli{}).flagSet("t")
		ttl := fs.String("ttl", "", "")
		pos, err := (&cli{stdout: io.Discard}).parse(fs, tc.args)
		if (err == nil) != tc.wantErrNil || strings.Join(pos, " ") != tc.pos || *ttl != tc.ttl {
			t.Errorf("parse(%q) = %q, ttl %q, err %v; want %q, ttl %q", tc.args, pos, *ttl, err, tc.pos, tc.ttl)
		}
	}
}

// A daemon that accepts but never answers makes the client give up with a
// clear error, not hang.
func TestClientTimeout(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "mute.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	_, err = NewClient(sock, 200*time.Millisecond).ListRules(context.Background(), "")
	var ue *UnreachableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "did not answer in time") {
		t.Errorf("ListRules against a mute daemon: %v", err)
	}
}
