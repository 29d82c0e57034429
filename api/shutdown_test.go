package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/ribkeeper/ribkeeper/admit"
	"github.com/ribkeeper/ribkeeper/api"
	"github.com/ribkeeper/ribkeeper/cli"

	"github.com/ribkeeper/ribkeeper/bgp"
	"github.com/ribkeeper/ribkeeper/flowspec"
)

type fakeShutdowner struct {
	calls    int
	withdraw bool
	err      error
}

func (f *fakeShutdowner) Shutdown(_ context.Context, withdraw bool) error {
	f.calls++
	f.withdraw = withdraw
	return f.err
}

// A rule the speaker can never carry is refused before it is stored, with
// the speaker's reason: never 201 and then left unannounced.
func TestUnsendableRuleRefused(t *testing.T) {
	rules := newFakeRules()
	ts := startServerGate(t, rules, newGate(rules, admit.Config{Sendable: bgp.Sendable}))
	// 80 destination ports of two octets: 2 + 240 bytes of NLRI.
	var ports []string
	for i := range 80 {
		ports = append(ports, "=="+itoa(int64(1000+i)))
	}
	long := "match destination 203.0.113.7/32 destination-port '" + strings.Join(ports, " ") + "' then discard"
	if _, err := flowspec.Parse(long); err != nil {
		t.Fatalf("the test rule does not parse: %v", err)
	}
	status, body := ts.do(t, "POST", "/v1/rules", `{"text":`+strconv.Quote(long)+`}`)
	e := wantError(t, status, body, http.StatusUnprocessableEntity, api.CodeUnsendable)
	if e.Field != "text" || !strings.Contains(e.Message, "split it into smaller rules") {
		t.Errorf("error = %+v", e)
	}
	if n := rules.count(); n != 0 {
		t.Errorf("%d rules stored", n)
	}
	// An ordinary rule still goes through.
	status, body = ts.do(t, "POST", "/v1/rules", `{"text":"`+ruleDiscard+`"}`)
	if status != http.StatusCreated {
		t.Fatalf("ordinary rule: %d %s", status, body)
	}
}

// POST /v1/shutdown reaches the daemon's Shutdowner with the operator's
// choice, on the control socket; a failure is reported, not swallowed.
func TestShutdownRoute(t *testing.T) {
	sd := &fakeShutdowner{}
	ts := startServerOver(t, newFakeRules(), api.WithShutdown(sd))
	c := cli.NewClient(ts.sock, 0)
	res, err := c.Shutdown(context.Background(), true, cli.DefaultClientTimeout)
	if err != nil || !res.Withdrawn || sd.calls != 1 || !sd.withdraw {
		t.Fatalf("shutdown --withdraw: %+v %v; shutdowner %+v", res, err, sd)
	}
	sd.err = errors.New("3 paths still in the peers' Adj-RIB-Out")
	_, err = c.Shutdown(context.Background(), false, cli.DefaultClientTimeout)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeUnavailable || !strings.Contains(ae.Message, "Adj-RIB-Out") || sd.withdraw {
		t.Fatalf("failed shutdown: %v; shutdowner %+v", err, sd)
	}
	// The handler served on other listeners (TCP) has no such route.
	h := newAPI(nil, newFakeRules(), newFakeRIB(), api.WithShutdown(sd)).Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/shutdown", strings.NewReader(`{}`)))
	if rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed || sd.calls != 2 {
		t.Errorf("shutdown reachable outside the control socket: %d, %d calls", rec.Code, sd.calls)
	}
}
