package api_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/ribkeeper/ribkeeper/api"
)

// send makes one request to ts with the headers given ("Host" sets the
// Host header), without a token unless "Authorization" is among them.
func (ts *tcpServer) send(t *testing.T, method, path, body string, headers map[string]string) (int, []byte, http.Header) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := ts.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

func (ts *tcpServer) port(t *testing.T) string {
	t.Helper()
	_, port, err := net.SplitHostPort(ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

const jsonType = "application/json"

// A write must declare a JSON body: text/plain (what a page may send to
// any origin without a preflight), a form, or nothing is 415 naming the
// header to send, and nothing is stored. Parameters are fine; a DELETE
// without a body needs no type.
func TestWriteNeedsJSON(t *testing.T) {
	ts := startTCP(t, api.TCPConfig{}) // the example's loopback listener without tokens
	add := `{"text": "` + ruleDiscard + `"}`
	for _, ct := range []string{"", "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=x", "application/jsonp", "application/json-seq", "json", ";"} {
		status, body, hdr := ts.send(t, "POST", "/v1/rules", add, map[string]string{"Content-Type": ct})
		e := wantError(t, status, body, http.StatusUnsupportedMediaType, api.CodeUnsupportedMediaType)
		if !strings.Contains(e.Message, `"Content-Type: application/json"`) || e.Field != "Content-Type" {
			t.Errorf("415 for %q does not say what to send: %+v", ct, e)
		}
		if hdr.Get("Accept-Post") != jsonType {
			t.Errorf("415 for %q: Accept-Post %q", ct, hdr.Get("Accept-Post"))
		}
	}
	for _, path := range []string{"/v1/rules/batch", "/v1/rules/withdraw", "/v1/validate"} {
		status, body, _ := ts.send(t, "POST", path, `{}`, map[string]string{"Content-Type": "text/plain"})
		wantError(t, status, body, http.StatusUnsupportedMediaType, api.CodeUnsupportedMediaType)
	}
	if n := ts.rules.count(); n != 0 {
		t.Fatalf("writes without a JSON type stored %d rules", n)
	}

	status, body, _ := ts.send(t, "POST", "/v1/rules", add, map[string]string{"Content-Type": "Application/JSON; charset=utf-8"})
	if status != http.StatusCreated {
		t.Fatalf("JSON with a charset: %d %s", status, body)
	}
	id := itoa(decode[api.Rule](t, body).ID)
	status, body, _ = ts.send(t, "DELETE", "/v1/rules/"+id, `{}`, map[string]string{"Content-Type": "text/plain"})
	wantError(t, status, body, http.StatusUnsupportedMediaType, api.CodeUnsupportedMediaType)
	if status, body, _ = ts.send(t, "DELETE", "/v1/rules/"+id, "", nil); status != http.StatusAccepted {
		t.Fatalf("DELETE without a body: %d %s", status, body)
	}
	// Reads need no type.
	if status, body, _ = ts.send(t, "GET", "/v1/rules", "", map[string]string{"Content-Type": "text/plain"}); status != http.StatusOK {
		t.Fatalf("GET: %d %s", status, body)
	}
}

// With tokens the type is checked as well, whoever asks.
func TestWriteNeedsJSONWithTokens(t *testing.T) {
	ts := startTCP(t, api.TCPConfig{Tokens: testTokens})
	status, body, _ := ts.send(t, "POST", "/v1/rules", `{"text": "`+ruleDiscard+`"}`,
		map[string]string{"Authorization": "Bearer " + writeSecret, "Content-Type": "text/plain"})
	wantError(t, status, body, http.StatusUnsupportedMediaType, api.CodeUnsupportedMediaType)
	if n := ts.rules.count(); n != 0 {
		t.Fatalf("stored %d rules", n)
	}
}

// The Host header must name the listener: its address, with its port or
// none, localhost on loopback, or a name of [api] hosts (any port, any
// case). Anything else is 421 naming the setting, for every request: a
// page whose DNS name was rebound to the listener sends its own name.
func TestHostMustNameTheListener(t *testing.T) {
	ts := startTCP(t, api.TCPConfig{Hosts: []string{"rk.example.net", "[::1]", "192.0.2.1"}})
	port := ts.port(t)
	add := `{"text": "` + ruleDiscard + `"}`
	for _, host := range []string{"attacker.example", "attacker.example:" + port, "127.0.0.1:1", "localhost:1",
		"127.0.0.2:" + port, "rk.example.net.attacker.example", "example.net", "[::2]:" + port, "0.0.0.0:" + port, ":" + port} {
		for _, req := range []struct{ method, path, body string }{
			{"GET", "/v1/rules", ""}, {"POST", "/v1/rules", add}, {"GET", "/metrics", ""}, {"GET", "/ui/", ""}, {"DELETE", "/v1/rules/1", ""},
		} {
			status, body, _ := ts.send(t, req.method, req.path, req.body, map[string]string{"Host": host, "Content-Type": jsonType})
			e := wantError(t, status, body, http.StatusMisdirectedRequest, api.CodeUnknownHost)
			if !strings.Contains(e.Message, "[api] hosts") {
				t.Errorf("421 for Host %q does not name [api] hosts: %q", host, e.Message)
			}
		}
	}
	if n := ts.rules.count(); n != 0 {
		t.Fatalf("requests with a foreign Host stored %d rules", n)
	}
	for _, host := range []string{"127.0.0.1:" + port, "127.0.0.1", "localhost:" + port, "LocalHost:" + port, "localhost.:" + port,
		"rk.example.net", "RK.Example.NET.:8443", "[::1]:1", "192.0.2.1"} {
		status, body, _ := ts.send(t, "GET", "/v1/rules", "", map[string]string{"Host": host})
		if status != http.StatusOK {
			t.Errorf("Host %q: %d %s", host, status, body)
		}
	}
	status, body, _ := ts.send(t, "POST", "/v1/rules", add, map[string]string{"Host": "rk.example.net", "Content-Type": jsonType})
	if status != http.StatusCreated {
		t.Fatalf("a write by an [api] hosts name: %d %s", status, body)
	}
}

// A write from a web page of another origin is 403 naming [api] origins,
// and nothing is stored: a foreign or "null" Origin, or, without Origin,
// Sec-Fetch-Site cross-site or same-site (another port of the same host
// is same-site). The listener's own origin, an [api] origins entry, and
// clients that send neither header (curl, the CLI) may write. Reads are
// not refused for their origin, and no answer grants CORS.
func TestWriteFromAnotherOrigin(t *testing.T) {
	ts := startTCP(t, api.TCPConfig{Origins: []string{"https://noc.example.net", "http://[::1]:8080"}})
	port := ts.port(t)
	add := `{"text": "` + ruleDiscard + `"}`
	for _, h := range []map[string]string{
		{"Origin": "http://127.0.0.2:" + port},
		{"Origin": "http://127.0.0.1:1"},
		{"Origin": "http://localhost:" + port}, // Host is 127.0.0.1: another origin
		{"Origin": "https://127.0.0.1:" + port},
		{"Origin": "http://attacker.example"},
		{"Origin": "null"},
		{"Origin": "https://noc.example.net.attacker.example"},
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site"},
		{"Origin": "http://127.0.0.2:" + port, "Sec-Fetch-Site": "same-origin"},
	} {
		h["Content-Type"] = jsonType
		for _, req := range []struct{ method, path, body string }{
			{"POST", "/v1/rules", add}, {"POST", "/v1/rules/withdraw", add}, {"DELETE", "/v1/rules/1", ""},
		} {
			status, body, _ := ts.send(t, req.method, req.path, req.body, h)
			e := wantError(t, status, body, http.StatusForbidden, api.CodeForeignOrigin)
			if h["Origin"] != "" && !strings.Contains(e.Message, "[api] origins") {
				t.Errorf("403 for %v does not name [api] origins: %q", h, e.Message)
			}
		}
	}
	if n := ts.rules.count(); n != 0 {
		t.Fatalf("writes from other origins stored %d rules", n)
	}

	for i, h := range []map[string]string{
		{},
		{"Sec-Fetch-Site": "none"},
		{"Origin": "http://127.0.0.1:" + port, "Sec-Fetch-Site": "same-origin"},
		{"Origin": "HTTP://127.0.0.1:" + port},
		{"Origin": "http://localhost:" + port, "Host": "localhost:" + port},
		{"Origin": "https://noc.example.net:443", "Sec-Fetch-Site": "cross-site"},
		{"Origin": "http://[::1]:8080", "Sec-Fetch-Site": "cross-site"},
	} {
		h["Content-Type"] = jsonType
		text := strings.Replace(ruleDiscard, "203.0.113.7", "203.0.113."+itoa(int64(10+i)), 1)
		status, body, _ := ts.send(t, "POST", "/v1/rules", `{"text": "`+text+`"}`, h)
		if status != http.StatusCreated {
			t.Errorf("write with %v: %d %s", h, status, body)
		}
	}
	status, body, hdr := ts.send(t, "GET", "/v1/rules", "", map[string]string{"Origin": "http://127.0.0.2:" + port, "Sec-Fetch-Site": "cross-site"})
	if status != http.StatusOK {
		t.Errorf("a read with a foreign Origin: %d %s", status, body)
	}
	for _, k := range []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Headers", "Access-Control-Allow-Methods"} {
		if v := hdr.Get(k); v != "" {
			t.Errorf("the answer grants CORS: %s: %s", k, v)
		}
	}
	// A preflight is not granted either: a JSON fetch from another origin
	// is never sent.
	_, _, hdr = ts.send(t, "OPTIONS", "/v1/rules", "", map[string]string{"Origin": "http://127.0.0.2:" + port,
		"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
	if v := hdr.Get("Access-Control-Allow-Origin"); v != "" {
		t.Errorf("the preflight is granted: %s", v)
	}
}

// Over HTTPS the own origin is https://; http:// of the same host is
// another origin.
func TestWriteOriginOverTLS(t *testing.T) {
	cert, key := selfSigned(t, t.TempDir())
	ts := startTCP(t, api.TCPConfig{Tokens: testTokens, CertFile: cert, KeyFile: key})
	port := ts.port(t)
	h := map[string]string{"Authorization": "Bearer " + writeSecret, "Content-Type": jsonType, "Origin": "http://127.0.0.1:" + port}
	status, body, _ := ts.send(t, "POST", "/v1/rules", `{"text": "`+ruleDiscard+`"}`, h)
	wantError(t, status, body, http.StatusForbidden, api.CodeForeignOrigin)
	h["Origin"] = "https://127.0.0.1:" + port
	if status, body, _ = ts.send(t, "POST", "/v1/rules", `{"text": "`+ruleDiscard+`"}`, h); status != http.StatusCreated {
		t.Fatalf("own https origin: %d %s", status, body)
	}
}

// Hosts and origins that are not names or origins are refused up front.
func TestTCPNamesValidation(t *testing.T) {
	for _, c := range []api.TCPConfig{
		{Addr: "127.0.0.1:1", Hosts: []string{"rk.example.net:8443"}},
		{Addr: "127.0.0.1:1", Hosts: []string{"https://rk.example.net"}},
		{Addr: "127.0.0.1:1", Hosts: []string{""}},
		{Addr: "127.0.0.1:1", Origins: []string{"null"}},
		{Addr: "127.0.0.1:1", Origins: []string{"https://noc.example.net/console"}},
		{Addr: "127.0.0.1:1", Origins: []string{"noc.example.net"}},
	} {
		if err := api.CheckTCP(c); err == nil {
			t.Errorf("CheckTCP(%+v) = nil, want an error", c)
		}
	}
}
