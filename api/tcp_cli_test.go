package api_test

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/cli"
)

func clientMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Main(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func tokenFile(t *testing.T, secret string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// The CLI over the TCP API: with a read token it lists and cannot add;
// with a write token it adds, recorded as the token's name; the output is
// the same as over the socket.
func TestCLIOverTCP(t *testing.T) {
	t.Setenv("RIBKEEPER_URL", "")
	t.Setenv("RIBKEEPER_TOKEN", "")
	t.Setenv("RIBKEEPER_TOKEN_FILE", "")
	t.Setenv("RIBKEEPER_CACERT", "")
	cert, key := selfSigned(t, t.TempDir())
	ts := startTCP(t, api.TCPConfig{Tokens: testTokens, CertFile: cert, KeyFile: key})
	read, write := tokenFile(t, readSecret), tokenFile(t, writeSecret)

	code, out, errOut := clientMain(t, "rule", "add", "--url", ts.url, "--token-file", read, "--ca-file", cert, "--ttl", "10m", ruleDiscard)
	if code != 1 || out != "" || !strings.Contains(errOut, `token "grafana" has role read`) || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("rule add with a read token: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if ts.rules.count() != 0 {
		t.Fatal("a read token stored a rule")
	}
	code, out, errOut = clientMain(t, "rule", "add", "--url="+ts.url, "--token-file="+write, "--ca-file="+cert, "--ttl", "10m", ruleDiscard)
	if code != 0 || strings.TrimSpace(out) != "1" {
		t.Fatalf("rule add with a write token: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = clientMain(t, "rule", "list", "--url", ts.url, "--token-file", read, "--ca-file", cert)
	if code != 0 || !strings.HasPrefix(out, "ID ") || !strings.Contains(out, "203.0.113.7/32") {
		t.Fatalf("rule list with a read token: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if r, _ := ts.rules.Get(context.Background(), 1); r.Actor != "fastnetmon" {
		t.Errorf("actor %q, want the write token's name", r.Actor)
	}
	// The same output as over the socket, for the same state.
	sock := startServerOver(t, ts.rules)
	_, viaSocket, _ := runCLI(t, sock.sock, "rule", "show", "--json", "1")
	_, viaTCP, _ := clientMain(t, "rule", "show", "--json", "1", "--url", ts.url, "--token-file", read, "--ca-file", cert)
	if viaSocket == "" || viaSocket != viaTCP {
		t.Errorf("rule show differs:\nsocket %s\ntcp    %s", viaSocket, viaTCP)
	}

	// The token and URL from the environment.
	t.Setenv("RIBKEEPER_URL", ts.url)
	t.Setenv("RIBKEEPER_TOKEN", readSecret)
	if code, out, errOut := clientMain(t, "status", "--ca-file", cert); code != 0 || !strings.Contains(out, "Rules:") {
		t.Errorf("status from the environment: exit %d, %q %q", code, out, errOut)
	}
	t.Setenv("RIBKEEPER_CACERT", cert)
	if code, _, errOut := clientMain(t, "rule", "list"); code != 0 {
		t.Errorf("CA from RIBKEEPER_CACERT: exit %d, %q", code, errOut)
	}
	t.Setenv("RIBKEEPER_CACERT", "")
	// Without the CA: a one-line error saying what to do.
	if code, _, errOut := clientMain(t, "rule", "list"); code != 1 || !strings.Contains(errOut, "--ca-file") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("untrusted certificate: exit %d, %q", code, errOut)
	}
	// No token on the command line, no token in clear over a network.
	if code, _, errOut := clientMain(t, "rule", "list", "--token", readSecret); code != 2 || !strings.Contains(errOut, "--token-file") || strings.Contains(errOut, readSecret) {
		t.Errorf("--token: exit %d, %q", code, errOut)
	}
	if code, _, errOut := clientMain(t, "rule", "list", "--url", "http://192.0.2.1:8080"); code != 2 || !strings.Contains(errOut, "https") {
		t.Errorf("token over plain http: exit %d, %q", code, errOut)
	}
	if code, _, errOut := clientMain(t, "rule", "list", "--url", ts.url, "--socket", "/x"); code != 2 || !strings.Contains(errOut, "not both") {
		t.Errorf("--url and --socket: exit %d, %q", code, errOut)
	}
	t.Setenv("RIBKEEPER_TOKEN", "")
	if code, _, errOut := clientMain(t, "rule", "list", "--ca-file", cert); code != 1 || !strings.Contains(errOut, "missing bearer token") {
		t.Errorf("no token: exit %d, %q", code, errOut)
	}
}

// ribkeeper whoami says who the API sees and what it may do.
func TestCLIWhoami(t *testing.T) {
	t.Setenv("RIBKEEPER_URL", "")
	t.Setenv("RIBKEEPER_TOKEN", "")
	t.Setenv("RIBKEEPER_CACERT", "")
	scoped := api.Token{Name: "cust", Role: api.RoleWrite, Secret: custSecret,
		Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8:c::/48")},
		Actions:  []string{"discard", "rtbh"}, MaxActiveRules: 7}
	ts := startTCP(t, api.TCPConfig{Tokens: append([]api.Token{scoped}, testTokens...)})
	code, out, errOut := clientMain(t, "whoami", "--url", ts.url, "--token-file", tokenFile(t, custSecret))
	want := "name:      cust\nrole:      write\nprefixes:  192.0.2.0/24, 2001:db8:c::/48\nactions:   discard, rtbh\nquota:     7 active rules it wrote (the guardrails apply on top)\n"
	if code != 0 || out != want {
		t.Errorf("whoami with a scoped token: exit %d %q\n%s\nwant\n%s", code, errOut, out, want)
	}
	code, out, _ = clientMain(t, "whoami", "--json", "--url", ts.url, "--token-file", tokenFile(t, readSecret))
	if code != 0 || !strings.Contains(out, `"name": "grafana"`) || !strings.Contains(out, `"prefixes": []`) {
		t.Errorf("whoami --json with a read token: exit %d\n%s", code, out)
	}
	sock := startServer(t).sock
	code, out, _ = runCLI(t, sock, "whoami")
	if code != 0 || !strings.Contains(out, "name:      cli\nrole:      write\nprefixes:  every destination\nactions:   every action\n") {
		t.Errorf("whoami over the socket: exit %d\n%s", code, out)
	}
}
