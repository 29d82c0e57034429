package api

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// held is a handler that stays open until its request's context ends, as
// an event stream does, and remembers each request's context by actor.
type held struct {
	mu   sync.Mutex
	ctxs map[string]context.Context
}

func (h *held) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.ctxs[actor(r)] = r.Context()
	h.mu.Unlock()
	w.Write([]byte("open\n"))
	http.NewResponseController(w).Flush()
	<-r.Context().Done()
}

func (h *held) ctx(name string) context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ctxs[name]
}

// open starts a request with secret and returns its body once the handler
// holds it open.
func open(t *testing.T, url, secret string) io.ReadCloser {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/v1/events", nil)
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("open with %q: %d", secret, resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	if l, err := br.ReadString('\n'); err != nil || l != "open\n" {
		t.Fatalf("open with %q: %q %v", secret, l, err)
	}
	return struct {
		io.Reader
		io.Closer
	}{br, resp.Body}
}

// ended waits for body to end (the handler returned), within the client's
// 30 s bound.
func ended(t *testing.T, what string, body io.Reader) {
	t.Helper()
	if b, err := io.ReadAll(body); err != nil || len(b) != 0 {
		t.Fatalf("%s: the open request did not end cleanly: %q %v", what, b, err)
	}
}

// Requests open under a token (event streams) end as soon as a reload
// removes the token or changes its secret, role or scope; those of a
// token that did not change go on. A listener without tokens that gets
// some ends its anonymous requests.
func TestRevokedTokenEndsOpenRequests(t *testing.T) {
	s := New(nil, nil, nil, nil)
	keep := Token{Name: "keep", Role: RoleRead, Secret: "keep-secret-0123456789"}
	gone := Token{Name: "gone", Role: RoleRead, Secret: "gone-secret-0123456789"}
	rotated := Token{Name: "rotated", Role: RoleRead, Secret: "rotated-old-0123456789"}
	scoped := Token{Name: "scoped", Role: RoleRead, Secret: "scoped-secret-0123456789"}
	if _, err := s.SetTCPAccess(TCPConfig{Addr: "127.0.0.1:1", Tokens: []Token{keep, gone, rotated, scoped}}); err != nil {
		t.Fatal(err)
	}
	h := &held{ctxs: map[string]context.Context{}}
	hs := httptest.NewServer(s.authenticate(h))
	defer hs.Close()

	bodies := map[string]io.Reader{}
	for _, tok := range []Token{keep, gone, rotated, scoped} {
		bodies[tok.Name] = open(t, hs.URL, tok.Secret)
	}
	rotated.Secret = "rotated-new-0123456789"
	scoped.Prefixes = nil
	scoped.Role = RoleWrite
	if _, err := s.SetTCPAccess(TCPConfig{Addr: "127.0.0.1:1", Tokens: []Token{keep, rotated, scoped}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gone", "rotated", "scoped"} {
		ended(t, name, bodies[name])
	}
	if err := h.ctx("keep").Err(); err != nil {
		t.Fatalf("the unchanged token's open request ended: %v", err)
	}
	// The new secret opens a request again, which the next removal ends.
	newer := open(t, hs.URL, rotated.Secret)
	if _, err := s.SetTCPAccess(TCPConfig{Addr: "127.0.0.1:1", Tokens: []Token{keep}}); err != nil {
		t.Fatal(err)
	}
	ended(t, "rotated (new secret)", newer)
	if err := h.ctx("keep").Err(); err != nil {
		t.Fatalf("the unchanged token's open request ended: %v", err)
	}
	if _, err := s.SetTCPAccess(TCPConfig{Addr: "127.0.0.1:1", Tokens: []Token{gone}}); err != nil {
		t.Fatal(err)
	}
	ended(t, "keep, removed at last", bodies["keep"])

	// Without tokens, then with: the anonymous request ends.
	if _, err := s.SetTCPAccess(TCPConfig{Addr: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	anon := open(t, hs.URL, "")
	if _, err := s.SetTCPAccess(TCPConfig{Addr: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	if err := h.ctx(tcpActor).Err(); err != nil {
		t.Fatalf("a reload without tokens, again, ended the anonymous request: %v", err)
	}
	if _, err := s.SetTCPAccess(TCPConfig{Addr: "127.0.0.1:1", Tokens: []Token{keep}}); err != nil {
		t.Fatal(err)
	}
	ended(t, "anonymous, once there are tokens", anon)
}
