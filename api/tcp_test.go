package api_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ribkeeper/ribkeeper/api"

	"github.com/hashicorp/go-hclog"
	"github.com/ribkeeper/ribkeeper/store"
)

const (
	readSecret  = "read-secret-0123456789"
	writeSecret = "write-secret-0123456789"
)

var testTokens = []api.Token{
	{Name: "grafana", Role: api.RoleRead, Secret: readSecret},
	{Name: "fastnetmon", Role: api.RoleWrite, Secret: writeSecret},
}

type tcpServer struct {
	url   string
	addr  string // host:port
	srv   *api.Server
	rules *fakeRules
	hc    *http.Client
}

// startTCP serves a Server over fakes on a real TCP listener on 127.0.0.1.
func startTCP(t *testing.T, c api.TCPConfig) *tcpServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.Addr = l.Addr().String()
	l.Close()
	rules := newFakeRules()
	log := hclog.New(&hclog.LoggerOptions{Output: tWriter{t}, Level: hclog.Info})
	srv := newAPI(log, rules, newFakeRIB(), api.WithMaxBodyBytes(4096))
	return serveTCP(t, srv, rules, c)
}

// serveTCP serves srv (over rules) on c.Addr until the test ends.
func serveTCP(t *testing.T, srv *api.Server, rules *fakeRules, c api.TCPConfig) *tcpServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTCP(ctx, c) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("ServeTCP: %v", err)
		}
	})
	scheme := "http"
	tr := &http.Transport{}
	if c.CertFile != "" {
		scheme = "https"
		pool := x509.NewCertPool()
		pem, err := os.ReadFile(c.CertFile)
		if err != nil {
			t.Fatal(err)
		}
		pool.AppendCertsFromPEM(pem)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	ts := &tcpServer{url: scheme + "://" + c.Addr, addr: c.Addr, srv: srv, rules: rules, hc: &http.Client{Timeout: 5 * time.Second, Transport: tr}}
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := net.Dial("tcp", c.Addr)
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("TCP listener did not come up: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return ts
}

func (ts *tcpServer) do(t *testing.T, token, method, path, body string) (int, []byte, http.Header) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := ts.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// Over TCP: no token is 401, an unknown token is 401, a read token cannot
// write (403), a write token can, and its name is the actor recorded.
func TestTCPAuth(t *testing.T) {
	ts := startTCP(t, api.TCPConfig{Tokens: testTokens})
	add := `{"text": "` + ruleDiscard + `"}`

	status, body, hdr := ts.do(t, "", "GET", "/v1/rules", "")
	wantError(t, status, body, 401, api.CodeUnauthorized)
	if !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("401 without a Bearer challenge: %v", hdr)
	}
	status, body, _ = ts.do(t, "not-a-token-at-all", "GET", "/v1/rules", "")
	wantError(t, status, body, 401, api.CodeUnauthorized)
	status, body, _ = ts.do(t, "", "POST", "/v1/rules", add)
	wantError(t, status, body, 401, api.CodeUnauthorized)

	status, body, _ = ts.do(t, readSecret, "POST", "/v1/rules", add)
	e := wantError(t, status, body, 403, api.CodeForbidden)
	if !strings.Contains(e.Message, "grafana") || !strings.Contains(e.Message, "write") {
		t.Errorf("403 message should name the token and the role needed: %q", e.Message)
	}
	if n := ts.rules.count(); n != 0 {
		t.Fatalf("a refused request stored %d rules", n)
	}
	if status, body, _ = ts.do(t, readSecret, "GET", "/v1/rules", ""); status != 200 {
		t.Fatalf("read token GET: %d %s", status, body)
	}

	status, body, _ = ts.do(t, writeSecret, "POST", "/v1/rules", add)
	if status != 201 {
		t.Fatalf("write token POST: %d %s", status, body)
	}
	r := decode[api.Rule](t, body)
	if r.Actor != "fastnetmon" {
		t.Errorf("actor = %q, want the token's name", r.Actor)
	}
	status, body, _ = ts.do(t, writeSecret, "DELETE", "/v1/rules/"+itoa(r.ID), "")
	if status != 202 {
		t.Fatalf("write token DELETE: %d %s", status, body)
	}
	evs, _ := ts.rules.History(context.Background(), r.ID)
	if len(evs) < 2 || evs[len(evs)-1].Actor != "fastnetmon" || evs[len(evs)-1].Kind != store.EventWithdrawRequested {
		t.Errorf("withdrawal not recorded as the token's name: %+v", evs)
	}
	// The write role includes read.
	if status, body, _ = ts.do(t, writeSecret, "GET", "/v1/rules/"+itoa(r.ID), ""); status != 200 {
		t.Fatalf("write token GET: %d %s", status, body)
	}
}

// Body limits, JSON errors and batch atomicity hold over TCP as on the
// socket.
func TestTCPLimitsAndBatch(t *testing.T) {
	ts := startTCP(t, api.TCPConfig{Tokens: testTokens})
	big := `{"text": "` + strings.Repeat("x", 5000) + `"}`
	status, body, _ := ts.do(t, writeSecret, "POST", "/v1/rules", big)
	wantError(t, status, body, 413, api.CodeBodyTooLarge)

	// An unauthenticated big body is refused as unauthenticated, unread.
	status, body, _ = ts.do(t, "", "POST", "/v1/rules", big)
	wantError(t, status, body, 401, api.CodeUnauthorized)

	batch := `{"rules": [{"text": "` + ruleDiscard + `"}, {"text": "match destination 10.0.0.0/8 then bogus"}]}`
	status, body, _ = ts.do(t, writeSecret, "POST", "/v1/rules/batch", batch)
	e := wantError(t, status, body, 400, api.CodeInvalidRule)
	if e.Field != "rules[1].text" {
		t.Errorf("field = %q, want rules[1].text", e.Field)
	}
	if n := ts.rules.count(); n != 0 {
		t.Fatalf("a refused batch stored %d rules", n)
	}
	status, body, _ = ts.do(t, writeSecret, "POST", "/v1/rules/batch", `{"rules": [{"text": "`+ruleDiscard+`"}, {"text": "`+ruleOther+`"}]}`)
	if status != 200 || ts.rules.count() != 2 {
		t.Fatalf("batch: %d %s; %d rules stored", status, body, ts.rules.count())
	}
	for _, r := range decode[api.RuleList](t, body).Rules {
		if r.Actor != "fastnetmon" {
			t.Errorf("batch rule actor = %q", r.Actor)
		}
	}
}

// Without tokens a loopback listener serves everyone as actor "tcp"; a
// non-loopback one refuses to start.
func TestTCPNoTokens(t *testing.T) {
	ts := startTCP(t, api.TCPConfig{})
	status, body, _ := ts.do(t, "", "POST", "/v1/rules", `{"text": "`+ruleDiscard+`"}`)
	if status != 201 || decode[api.Rule](t, body).Actor != "tcp" {
		t.Fatalf("loopback without tokens: %d %s", status, body)
	}

	for _, addr := range []string{"0.0.0.0:8080", ":8080", "[::]:8080", "192.0.2.1:8080", "example.com:80"} {
		err := api.CheckTCP(api.TCPConfig{Addr: addr})
		if !errors.Is(err, api.ErrNoTokens) {
			t.Errorf("CheckTCP(%s) without tokens = %v, want ErrNoTokens", addr, err)
		}
		srv := newAPI(nil, newFakeRules(), newFakeRIB())
		if err := srv.ServeTCP(context.Background(), api.TCPConfig{Addr: addr}); !errors.Is(err, api.ErrNoTokens) {
			t.Errorf("ServeTCP(%s) without tokens = %v, want ErrNoTokens", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:8080", "[::1]:8080", "localhost:8080", "127.0.0.53:1"} {
		if err := api.CheckTCP(api.TCPConfig{Addr: addr}); err != nil {
			t.Errorf("CheckTCP(%s) = %v, want nil", addr, err)
		}
	}
	if err := api.CheckTCP(api.TCPConfig{Addr: "0.0.0.0:8080", Tokens: testTokens}); err != nil {
		t.Errorf("non-loopback with tokens: %v", err)
	}
}

func TestTokenValidation(t *testing.T) {
	for _, c := range []struct {
		tokens []api.Token
		want   string
	}{
		{[]api.Token{{Role: api.RoleRead, Secret: readSecret}}, "no name"},
		{[]api.Token{{Name: "a", Role: "admin", Secret: readSecret}}, "role"},
		{[]api.Token{{Name: "a", Role: api.RoleRead, Secret: "short"}}, "shorter"},
		{[]api.Token{{Name: "a", Role: api.RoleRead, Secret: readSecret}, {Name: "a", Role: api.RoleWrite, Secret: writeSecret}}, "twice"},
	} {
		err := api.CheckTCP(api.TCPConfig{Addr: "127.0.0.1:1", Tokens: c.tokens})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("tokens %+v: error %v, want one containing %q", c.tokens, err, c.want)
		}
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key into dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "ribkeeper test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IP(netip.MustParseAddr("127.0.0.1").AsSlice())},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// With a certificate the listener speaks HTTPS only, and auth still holds.
func TestTCPTLS(t *testing.T) {
	cert, key := selfSigned(t, t.TempDir())
	ts := startTCP(t, api.TCPConfig{Tokens: testTokens, CertFile: cert, KeyFile: key})
	status, body, _ := ts.do(t, "", "GET", "/v1/rules", "")
	wantError(t, status, body, 401, api.CodeUnauthorized)
	if status, body, _ = ts.do(t, readSecret, "GET", "/v1/rules", ""); status != 200 {
		t.Fatalf("HTTPS GET: %d %s", status, body)
	}
	// Plain HTTP to the TLS port gets no API answer.
	plain := &http.Client{Timeout: 2 * time.Second}
	resp, err := plain.Get("http://" + strings.TrimPrefix(ts.url, "https://") + "/v1/rules")
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatalf("plain HTTP answered 200 on the TLS listener: %s", b)
		}
	}
	if err := api.CheckTCP(api.TCPConfig{Addr: "127.0.0.1:1", CertFile: cert}); err == nil {
		t.Error("a certificate without a key was accepted")
	}
	if err := api.CheckTCP(api.TCPConfig{Addr: "127.0.0.1:1", CertFile: key, KeyFile: cert}); err == nil {
		t.Error("swapped certificate and key were accepted")
	}
}

// POST /v1/rules/withdraw withdraws by match, whatever the action in the
// text, and is idempotent.
func TestWithdrawByMatch(t *testing.T) {
	ts := startTCP(t, api.TCPConfig{Tokens: testTokens})
	status, body, _ := ts.do(t, writeSecret, "POST", "/v1/rules", `{"text": "`+ruleDiscard+`", "ttl": "10m"}`)
	if status != 201 {
		t.Fatalf("add: %d %s", status, body)
	}
	id := decode[api.Rule](t, body).ID
	status, body, _ = ts.do(t, readSecret, "POST", "/v1/rules/withdraw", `{"text": "`+ruleLimit+`"}`)
	wantError(t, status, body, 403, api.CodeForbidden)
	for i := range 2 {
		status, body, _ = ts.do(t, writeSecret, "POST", "/v1/rules/withdraw", `{"text": "`+ruleLimit+`"}`)
		if status != 200 {
			t.Fatalf("withdraw %d: %d %s", i, status, body)
		}
		got := decode[api.RuleList](t, body).Rules
		if i == 0 && (len(got) != 1 || got[0].ID != id || got[0].State != api.StateWithdrawing) {
			t.Errorf("first withdraw = %+v", got)
		}
		if i == 1 && len(got) != 0 {
			t.Errorf("second withdraw = %+v, want nothing", got)
		}
	}
	status, body, _ = ts.do(t, writeSecret, "POST", "/v1/rules/withdraw", `{"text": "match destinaton 1.2.3.4/32 then discard"}`)
	wantError(t, status, body, 400, api.CodeInvalidRule)
}
