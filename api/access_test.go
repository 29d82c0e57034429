package api_test

import (
	"errors"
	"net"
	"net/http"
	"reflect"
	"testing"

	"github.com/ribkeeper/ribkeeper/api"
)

// A reload's tokens take effect at once: a removed token and a rotated
// token's old secret get 401, the new secret and an added token work, an
// unchanged token goes on; SetTCPAccess reports each by name. A set the
// listener may not have changes nothing.
func TestSetTCPAccessTokens(t *testing.T) {
	const (
		nocOld = "noc-secret-old-0123456789"
		nocNew = "noc-secret-new-0123456789"
		ops    = "ops-secret-0123456789"
	)
	noc := api.Token{Name: "noc", Role: api.RoleWrite, Secret: nocOld}
	ts := startTCP(t, api.TCPConfig{Tokens: append([]api.Token{noc}, testTokens...)})
	get := func(secret string) int {
		status, _, _ := ts.do(t, secret, "GET", "/v1/rules", "")
		return status
	}
	for _, s := range []string{readSecret, writeSecret, nocOld} {
		if got := get(s); got != http.StatusOK {
			t.Fatalf("before the reload: %d", got)
		}
	}

	noc.Secret = nocNew
	ch, err := ts.srv.SetTCPAccess(api.TCPConfig{Addr: ts.addr, Tokens: []api.Token{
		testTokens[0], noc, {Name: "ops", Role: api.RoleWrite, Secret: ops},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := api.TokenChanges{Added: []string{"ops"}, Removed: []string{"fastnetmon"}, Changed: []string{"noc"}}
	if !reflect.DeepEqual(ch, want) {
		t.Errorf("changes = %+v, want %+v", ch, want)
	}
	for _, c := range []struct {
		secret string
		want   int
	}{{writeSecret, 401}, {nocOld, 401}, {nocNew, 200}, {ops, 200}, {readSecret, 200}} {
		if got := get(c.secret); got != c.want {
			t.Errorf("after the reload, secret %s: %d, want %d", c.secret, got, c.want)
		}
	}
	status, body, _ := ts.do(t, writeSecret, "POST", "/v1/rules", `{"text": "`+ruleDiscard+`"}`)
	wantError(t, status, body, 401, api.CodeUnauthorized)
	if status, body, _ = ts.do(t, ops, "POST", "/v1/rules", `{"text": "`+ruleDiscard+`"}`); status != http.StatusCreated {
		t.Fatalf("added token: %d %s", status, body)
	}

	// A role change counts as a change: the read token may no longer write.
	ch, err = ts.srv.SetTCPAccess(api.TCPConfig{Addr: ts.addr, Tokens: []api.Token{
		testTokens[0], noc, {Name: "ops", Role: api.RoleRead, Secret: ops},
	}})
	if err != nil || !reflect.DeepEqual(ch, api.TokenChanges{Changed: []string{"ops"}}) {
		t.Errorf("role change: %+v %v", ch, err)
	}
	status, body, _ = ts.do(t, ops, "POST", "/v1/rules", `{"text": "`+ruleOther+`"}`)
	wantError(t, status, body, 403, api.CodeForbidden)

	// A listener on a non-loopback address may not lose every token.
	if _, err := ts.srv.SetTCPAccess(api.TCPConfig{Addr: "0.0.0.0:8443"}); !errors.Is(err, api.ErrNoTokens) {
		t.Errorf("no tokens on 0.0.0.0: %v, want ErrNoTokens", err)
	}
	if _, err := ts.srv.SetTCPAccess(api.TCPConfig{Addr: ts.addr, Tokens: []api.Token{{Name: "x", Role: api.RoleRead, Secret: "short"}}}); err == nil {
		t.Error("a short secret was accepted")
	}
	if got := get(nocNew); got != http.StatusOK {
		t.Errorf("a refused reload changed the tokens: %d", got)
	}
}

// A loopback listener without tokens that gets some at a reload asks for
// them at once; hosts and origins reload too.
func TestSetTCPAccessTokensAndNames(t *testing.T) {
	ts := startTCP(t, api.TCPConfig{})
	if status, body, _ := ts.do(t, "", "GET", "/v1/rules", ""); status != http.StatusOK {
		t.Fatalf("no tokens: %d %s", status, body)
	}
	rk := map[string]string{"Host": "rk.example.net"}
	status, body, _ := ts.send(t, "GET", "/v1/rules", "", rk)
	wantError(t, status, body, http.StatusMisdirectedRequest, api.CodeUnknownHost)

	ch, err := ts.srv.SetTCPAccess(api.TCPConfig{Addr: ts.addr, Tokens: testTokens, Hosts: []string{"rk.example.net"}})
	if err != nil || !reflect.DeepEqual(ch.Added, []string{"grafana", "fastnetmon"}) {
		t.Fatalf("tokens added: %+v %v", ch, err)
	}
	status, body, _ = ts.do(t, "", "GET", "/v1/rules", "")
	wantError(t, status, body, 401, api.CodeUnauthorized)
	rk["Authorization"] = "Bearer " + readSecret
	if status, body, _ = ts.send(t, "GET", "/v1/rules", "", rk); status != http.StatusOK {
		t.Fatalf("a name added to hosts: %d %s", status, body)
	}
}

// A reload that comes before the listener starts is not undone by the
// start: the listener serves the reloaded tokens.
func TestSetTCPAccessBeforeServe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	const ops = "ops-secret-0123456789"
	rules := newFakeRules()
	srv := newAPI(nil, rules, newFakeRIB())
	if _, err := srv.SetTCPAccess(api.TCPConfig{Addr: addr, Tokens: []api.Token{{Name: "ops", Role: api.RoleRead, Secret: ops}}}); err != nil {
		t.Fatal(err)
	}
	ts := serveTCP(t, srv, rules, api.TCPConfig{Addr: addr, Tokens: testTokens})
	if status, body, _ := ts.do(t, readSecret, "GET", "/v1/rules", ""); status != http.StatusUnauthorized {
		t.Errorf("a token the reload removed: %d %s", status, body)
	}
	if status, body, _ := ts.do(t, ops, "GET", "/v1/rules", ""); status != http.StatusOK {
		t.Errorf("the reload's token: %d %s", status, body)
	}
}
