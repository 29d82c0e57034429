package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// DefaultClientTimeout bounds each Client request when NewClient is given 0.
const DefaultClientTimeout = 15 * time.Second

// Client talks to the API over the control socket.
type Client struct {
	socket  string
	timeout time.Duration
	hc      *http.Client
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
	return &Client{socket: socketPath, timeout: timeout, hc: &http.Client{Transport: tr, Timeout: timeout}}
}

// UnreachableError means the daemon could not be reached at all (no socket,
// nobody listening, no permission) or did not answer in time.
type UnreachableError struct {
	Socket string
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
func (c *Client) AddRule(ctx context.Context, req AddRuleRequest) (r Rule, created bool, err error) {
	status, err := c.do(ctx, http.MethodPost, "/v1/rules", req, &r)
	return r, status == http.StatusCreated, err
}

// AddRules adds or updates several rules in one transaction, all or none,
// and returns them in request order.
func (c *Client) AddRules(ctx context.Context, reqs []AddRuleRequest) ([]Rule, error) {
	var out ruleList
	_, err := c.do(ctx, http.MethodPost, "/v1/rules/batch", AddRulesRequest{Rules: reqs}, &out)
	return out.Rules, err
}

// History returns a rule's audit trail, oldest first.
func (c *Client) History(ctx context.Context, id int64) ([]Event, error) {
	var out eventList
	_, err := c.do(ctx, http.MethodGet, "/v1/rules/"+strconv.FormatInt(id, 10)+"/history", nil, &out)
	return out.Events, err
}

// ListRules lists rules in state (every state when "").
func (c *Client) ListRules(ctx context.Context, state string) ([]Rule, error) {
	return c.ListRulesOrdered(ctx, state, "")
}

// ListRulesOrdered lists rules in the given order: "" or "id" (newest
// first), or "precedence" (the order routers apply them, with ShadowedBy
// set on rules that can never apply).
func (c *Client) ListRulesOrdered(ctx context.Context, state, order string) ([]Rule, error) {
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
	var out ruleList
	_, err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out.Rules, err
}

// GetRule returns one rule.
func (c *Client) GetRule(ctx context.Context, id int64) (Rule, error) {
	var r Rule
	_, err := c.do(ctx, http.MethodGet, "/v1/rules/"+strconv.FormatInt(id, 10), nil, &r)
	return r, err
}

// WithdrawRule asks for a rule to be withdrawn and returns it.
func (c *Client) WithdrawRule(ctx context.Context, id int64) (Rule, error) {
	var r Rule
	_, err := c.do(ctx, http.MethodDelete, "/v1/rules/"+strconv.FormatInt(id, 10), nil, &r)
	return r, err
}

// RIB returns the paths in the daemon's RIB mirror.
func (c *Client) RIB(ctx context.Context) ([]Path, error) {
	var out pathList
	_, err := c.do(ctx, http.MethodGet, "/v1/rib", nil, &out)
	return out.Paths, err
}

// Peers returns the BGP neighbors.
func (c *Client) Peers(ctx context.Context) ([]Peer, error) {
	var out peerList
	_, err := c.do(ctx, http.MethodGet, "/v1/peers", nil, &out)
	return out.Peers, err
}

// Status returns the daemon's status: peers, rule counts, last pass.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var out Status
	_, err := c.do(ctx, http.MethodGet, "/v1/status", nil, &out)
	return out, err
}

// do sends one request and decodes a 2xx body into out. Errors are
// *UnreachableError, *Error (the daemon's answer), or others for a
// malformed answer.
func (c *Client) do(ctx context.Context, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	// The host is ignored: the transport always dials the socket.
	req, err := http.NewRequestWithContext(ctx, method, "http://ribkeeper"+path, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
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
		var eb errorBody
		if json.Unmarshal(data, &eb) != nil || eb.Error == nil || eb.Error.Message == "" {
			return resp.StatusCode, &Error{Status: resp.StatusCode, Code: CodeInternal,
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
	return fmt.Errorf("talking to the daemon at %s: %w", c.socket, err)
}
