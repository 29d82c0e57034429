package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ribkeeper/ribkeeper/api"
)

// DefaultClientTimeout bounds each Client request when NewClient is given 0.
const DefaultClientTimeout = 15 * time.Second

// Client talks to the API over the control socket or over TCP.
type Client struct {
	socket  string // the socket path or base URL, for messages
	base    string // "http://ribkeeper" (socket) or the TCP base URL
	token   string // bearer token sent over TCP; "" for none
	timeout time.Duration
	hc      *http.Client
	// PageSize is the page the commands that walk a whole list ask for
	// (0: api.DefaultPage).
	PageSize int
}

// NewClient returns a client for the daemon listening at socketPath. Each
// request is bounded by timeout (0: DefaultClientTimeout).
func NewClient(socketPath string, timeout time.Duration) *Client {
	if timeout <= 0 {
		timeout = DefaultClientTimeout
	}
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socketPath)
		},
		MaxIdleConns:    2,
		IdleConnTimeout: 30 * time.Second,
	}
	return &Client{socket: socketPath, base: "http://ribkeeper", timeout: timeout, hc: &http.Client{Transport: tr, Timeout: timeout}}
}

// TCPTarget is how to reach the TCP API ([api] listen).
type TCPTarget struct {
	// URL is the base URL, "https://host:port" or "http://host:port".
	URL string
	// Token is the bearer token sent with every request ("" for none: a
	// loopback listener without tokens).
	Token string
	// CAFile is a PEM file of the certificates that may sign the
	// server's (an https URL); empty: the system's roots.
	CAFile string
}

// NewTCPClient returns a client for the TCP API at t. A token is only
// sent over https or to a loopback address, never in clear over a
// network.
func NewTCPClient(t TCPTarget, timeout time.Duration) (*Client, error) {
	if timeout <= 0 {
		timeout = DefaultClientTimeout
	}
	u, err := url.Parse(strings.TrimRight(t.URL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("URL %q is not a base URL such as https://rk.example.net:8443", t.URL)
	}
	if u.Scheme == "http" && t.Token != "" && !api.IsLoopback(u.Hostname()) {
		return nil, fmt.Errorf("refusing to send the token in clear to %s: use an https URL ([api] tls_cert on the daemon)", u.Host)
	}
	if u.Scheme == "http" && t.CAFile != "" {
		return nil, fmt.Errorf("a CA file needs an https URL, not %s", t.URL)
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		TLSHandshakeTimeout: 5 * time.Second,
		MaxIdleConns:        2,
		IdleConnTimeout:     30 * time.Second,
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", t.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	base := u.Scheme + "://" + u.Host
	return &Client{socket: base, base: base, token: t.Token, timeout: timeout, hc: &http.Client{Transport: tr, Timeout: timeout}}, nil
}

// UnreachableError means the daemon could not be reached at all (no socket,
// nobody listening, no permission) or did not answer in time.
type UnreachableError struct {
	Socket string // the socket path or base URL
	Err    error
}

func (e *UnreachableError) Error() string {
	if errors.Is(e.Err, context.DeadlineExceeded) {
		return fmt.Sprintf("the daemon at %s did not answer in time (%v)", e.Socket, e.Err)
	}
	return fmt.Sprintf("cannot reach the daemon at %s: is `ribkeeper serve` running? (%v)", e.Socket, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// AddRule adds or updates a rule; created reports which.
func (c *Client) AddRule(ctx context.Context, req api.AddRuleRequest) (r api.Rule, created bool, err error) {
	status, err := c.do(ctx, http.MethodPost, "/v1/rules", req, &r)
	return r, status == http.StatusCreated, err
}

// AddRules adds or updates several rules in one transaction, all or none,
// and returns them in request order.
func (c *Client) AddRules(ctx context.Context, reqs []api.AddRuleRequest) ([]api.Rule, error) {
	var out api.RuleList
	_, err := c.do(ctx, http.MethodPost, "/v1/rules/batch", api.AddRulesRequest{Rules: reqs}, &out)
	return out.Rules, err
}

// StoreRules is AddRules answered with the ids only (Prefer:
// return=minimal), in request order: for loading many rules whose
// stored form the caller does not need.
func (c *Client) StoreRules(ctx context.Context, reqs []api.AddRuleRequest) ([]int64, error) {
	b, err := json.Marshal(api.AddRulesRequest{Rules: reqs})
	if err != nil {
		return nil, err
	}
	var out api.StoredIDs
	_, err = c.doRawHeader(ctx, http.MethodPost, "/v1/rules/batch", b, &out, "Prefer", "return=minimal")
	if err == nil && len(out.IDs) != len(reqs) {
		err = fmt.Errorf("the daemon answered %d ids for %d rules: is it an older version that ignores \"Prefer: return=minimal\"? Upgrade it, or use rule add without a file", len(out.IDs), len(reqs))
	}
	return out.IDs, err
}

// WithdrawMatches withdraws the active rule of each request's match (the
// action ignored) in one transaction, all or none, and returns the rules
// withdrawn.
func (c *Client) WithdrawMatches(ctx context.Context, reqs []api.WithdrawMatchRequest) ([]api.Rule, error) {
	var out api.RuleList
	_, err := c.do(ctx, http.MethodPost, "/v1/rules/withdraw/batch", api.WithdrawMatchesRequest{Rules: reqs}, &out)
	return out.Rules, err
}

// History returns a rule's audit trail, oldest first.
func (c *Client) History(ctx context.Context, id int64) ([]api.Event, error) {
	var out api.EventList
	_, err := c.do(ctx, http.MethodGet, "/v1/rules/"+strconv.FormatInt(id, 10)+"/history", nil, &out)
	return out.Events, err
}

// ListRules lists rules in state (every state when "").
func (c *Client) ListRules(ctx context.Context, state string) ([]api.Rule, error) {
	return c.ListRulesOrdered(ctx, state, "")
}

// ListRulesOrdered lists rules in the given order: "" or "id" (newest
// first), or "precedence" (the order routers apply them, with ShadowedBy
// set on rules that can never apply).
func (c *Client) ListRulesOrdered(ctx context.Context, state, order string) ([]api.Rule, error) {
	q := url.Values{}
	if state != "" {
		q.Set("state", state)
	}
	if order != "" {
		q.Set("order", order)
	}
	path := "/v1/rules"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out api.RuleList
	_, err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out.Rules, err
}

// ListRulesPage returns one page of the rules in state (every state when
// "") newest first, after the id cursor after (0: from the newest), and
// the cursor of the next page (0 after the last page).
func (c *Client) ListRulesPage(ctx context.Context, state string, after int64, limit int) (rules []api.Rule, next int64, err error) {
	q := url.Values{}
	if state != "" {
		q.Set("state", state)
	}
	q.Set("limit", strconv.Itoa(limit))
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	var out api.RuleList
	_, err = c.do(ctx, http.MethodGet, "/v1/rules?"+q.Encode(), nil, &out)
	return out.Rules, out.Next, err
}

// ListAllRules walks every page of the rules in state, newest first, page
// rules per request: each rule that existed when it started comes once.
func (c *Client) ListAllRules(ctx context.Context, state string, page int) ([]api.Rule, error) {
	var all []api.Rule
	var after int64
	for {
		rules, next, err := c.ListRulesPage(ctx, state, after, page)
		if err != nil {
			return nil, err
		}
		all = append(all, rules...)
		if next == 0 {
			return all, nil
		}
		after = next
	}
}

// GetRule returns one rule.
func (c *Client) GetRule(ctx context.Context, id int64) (api.Rule, error) {
	var r api.Rule
	_, err := c.do(ctx, http.MethodGet, "/v1/rules/"+strconv.FormatInt(id, 10), nil, &r)
	return r, err
}

// WithdrawRule asks for a rule to be withdrawn and returns it.
func (c *Client) WithdrawRule(ctx context.Context, id int64) (api.Rule, error) {
	var r api.Rule
	_, err := c.do(ctx, http.MethodDelete, "/v1/rules/"+strconv.FormatInt(id, 10), nil, &r)
	return r, err
}

// RIB returns the paths in the daemon's RIB mirror.
func (c *Client) RIB(ctx context.Context) ([]api.Path, error) {
	var out api.PathList
	_, err := c.do(ctx, http.MethodGet, "/v1/rib", nil, &out)
	return out.Paths, err
}

// Peers returns the BGP neighbors.
func (c *Client) Peers(ctx context.Context) ([]api.Peer, error) {
	var out api.PeerList
	_, err := c.do(ctx, http.MethodGet, "/v1/peers", nil, &out)
	return out.Peers, err
}

// Whoami returns who the daemon sees making the request and its scope.
func (c *Client) Whoami(ctx context.Context) (api.Whoami, error) {
	var out api.Whoami
	_, err := c.do(ctx, http.MethodGet, "/v1/whoami", nil, &out)
	return out, err
}

// Status returns the daemon's status: peers, rule counts, last pass.
func (c *Client) Status(ctx context.Context) (api.Status, error) {
	var out api.Status
	_, err := c.do(ctx, http.MethodGet, "/v1/status", nil, &out)
	return out, err
}

// do sends one request and decodes a 2xx body into out. Errors are
// *UnreachableError, *Error (the daemon's answer), or others for a
// malformed answer.
func (c *Client) do(ctx context.Context, method, path string, in, out any) (int, error) {
	var b []byte
	if in != nil {
		var err error
		if b, err = json.Marshal(in); err != nil {
			return 0, err
		}
	}
	return c.doRaw(ctx, method, path, b, out)
}

// doRaw is do with the body already encoded (nil: none).
func (c *Client) doRaw(ctx context.Context, method, path string, in []byte, out any) (int, error) {
	return c.doRawHeader(ctx, method, path, in, out)
}

// doRawHeader is doRaw with extra request headers, given as name, value
// pairs.
func (c *Client) doRawHeader(ctx context.Context, method, path string, in []byte, out any, header ...string) (int, error) {
	var body io.Reader
	if in != nil {
		body = bytes.NewReader(in)
	}
	// Over the socket the host is ignored: the transport dials the socket.
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, c.transportError(ctx, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, c.transportError(ctx, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var eb api.ErrorBody
		if json.Unmarshal(data, &eb) != nil || eb.Error == nil || eb.Error.Message == "" {
			return resp.StatusCode, &api.Error{Status: resp.StatusCode, Code: api.CodeInternal,
				Message: fmt.Sprintf("unexpected answer from the daemon: %s", resp.Status)}
		}
		eb.Error.Status = resp.StatusCode
		return resp.StatusCode, eb.Error
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decoding the daemon's answer to %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

func (c *Client) transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ctx.Err()
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return &UnreachableError{Socket: c.socket, Err: op.Err}
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return &UnreachableError{Socket: c.socket, Err: fmt.Errorf("%w after %s", context.DeadlineExceeded, c.timeout)}
	}
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	if errors.As(err, &ua) || errors.As(err, &hn) {
		return fmt.Errorf("the daemon at %s has a certificate this host does not trust (%v): give the CA that signed it with --ca-file FILE", c.socket, err)
	}
	return fmt.Errorf("talking to the daemon at %s: %w", c.socket, err)
}

// setTimeout bounds a set's apply or deletion: a million rules take
// longer than one request's usual bound.
const setTimeout = 30 * time.Minute

// ApplySet makes the rules of set name exactly body's ({"rules": [...]},
// as api.AddRulesRequest encodes it) and says what changed.
func (c *Client) ApplySet(ctx context.Context, name string, body []byte) (api.SetResult, error) {
	var out api.SetResult
	_, err := c.long().doRaw(ctx, http.MethodPut, "/v1/sets/"+url.PathEscape(name), body, &out)
	return out, err
}

// DeleteSet withdraws every rule of set name.
func (c *Client) DeleteSet(ctx context.Context, name string) (api.SetResult, error) {
	var out api.SetResult
	_, err := c.long().do(ctx, http.MethodDelete, "/v1/sets/"+url.PathEscape(name), nil, &out)
	return out, err
}

// Sets lists the sets with their counts.
func (c *Client) Sets(ctx context.Context) ([]api.SetSummary, error) {
	var out api.SetList
	_, err := c.do(ctx, http.MethodGet, "/v1/sets", nil, &out)
	return out.Sets, err
}

// SetRules returns every active rule of set name, newest first, page
// rules per request.
func (c *Client) SetRules(ctx context.Context, name string, page int) ([]api.Rule, error) {
	var all []api.Rule
	var after int64
	for {
		q := url.Values{"limit": {strconv.Itoa(page)}}
		if after > 0 {
			q.Set("after", strconv.FormatInt(after, 10))
		}
		var out api.RuleList
		if _, err := c.do(ctx, http.MethodGet, "/v1/sets/"+url.PathEscape(name)+"?"+q.Encode(), nil, &out); err != nil {
			return nil, err
		}
		all = append(all, out.Rules...)
		if out.Next == 0 {
			return all, nil
		}
		after = out.Next
	}
}

// long is c with the bound of a set's request.
func (c *Client) long() *Client {
	l := *c
	hc := *c.hc
	hc.Timeout = setTimeout
	l.hc = &hc
	return &l
}
