package console

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
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/engine"
)

// DefaultClientTimeout bounds each request of a Client whose
// ClientOptions.Timeout is 0: connecting, sending, and reading the whole
// answer.
const DefaultClientTimeout = 10 * time.Second

// maxAnswer bounds the body a Client reads: a status of many feeds and
// partitions is far below it; a window answering more is not one.
const maxAnswer = 64 << 20

// The errors of a Client, for errors.Is. An answer with an HTTP status
// other than 200 is an *HTTPError, which unwraps to the sentinel of its
// status (ErrUnexpected for a status the contract does not name); a request
// without an answer is a *TransportError, which unwraps to ErrUnreachable
// or ErrNoAnswer and to its cause.
var (
	// ErrBadRequest: 400, the window could not read the request.
	ErrBadRequest = errors.New("console: bad request")
	// ErrUnauthorized: 401, no token or an unknown one.
	ErrUnauthorized = errors.New("console: no or unknown token")
	// ErrNotFound: 404, an unknown feed, group, action or path.
	ErrNotFound = errors.New("console: not found")
	// ErrConflict: 409, a stale generation or plan: nothing was done.
	ErrConflict = errors.New("console: stale generation or plan")
	// ErrRefused: 422, the engine refused the action (HTTPError.Message
	// says why): nothing was done.
	ErrRefused = errors.New("console: refused by the engine")
	// ErrStopping: 503, the run is stopping (or, from /readyz, an answer
	// that is not a Readiness).
	ErrStopping = errors.New("console: the run is stopping")
	// ErrUnexpected: an answer the contract does not describe (another
	// HTTP status, a body that is not the JSON it names). For a control
	// action, whether it was done is unknown.
	ErrUnexpected = errors.New("console: unexpected answer")
	// ErrUnreachable: no connection to the window (refused, no route, an
	// unknown host): nothing was sent.
	ErrUnreachable = errors.New("console: window unreachable")
	// ErrNoAnswer: the request may have reached the window but no answer
	// came (a timeout, a connection cut): for a control action, whether
	// it was done is unknown.
	ErrNoAnswer = errors.New("console: no answer")
)

// HTTPError is an answer of the window with an HTTP status other than 200
// (or 503 from /readyz with a Readiness). Unwrap gives the sentinel of its
// status.
type HTTPError struct {
	Addr   string // the window's address, as given to NewClient
	Method string
	Path   string
	Code   int
	// Message is the answer's Error (a control answer), else the start of
	// its body.
	Message string
	// Answer is the control answer, when the body was one.
	Answer *Answer
}

func (e *HTTPError) Error() string {
	s := fmt.Sprintf("%s: %s %s: HTTP %d %s", e.Addr, e.Method, e.Path, e.Code, http.StatusText(e.Code))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Unwrap returns the sentinel of the status: ErrBadRequest,
// ErrUnauthorized, ErrNotFound, ErrConflict, ErrRefused, ErrStopping, or
// ErrUnexpected.
func (e *HTTPError) Unwrap() error {
	switch e.Code {
	case http.StatusBadRequest:
		return ErrBadRequest
	case http.StatusUnauthorized:
		return ErrUnauthorized
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusConflict:
		return ErrConflict
	case http.StatusUnprocessableEntity:
		return ErrRefused
	case http.StatusServiceUnavailable:
		return ErrStopping
	}
	return ErrUnexpected
}

// TransportError is a request that got no answer. Sent is false when it
// certainly never reached the window (no connection could be made).
type TransportError struct {
	Addr   string
	Method string
	Path   string
	Sent   bool
	Err    error
}

func (e *TransportError) Error() string {
	what := "no answer"
	if !e.Sent {
		what = "unreachable"
	}
	return fmt.Sprintf("%s: %s %s: %s: %v", e.Addr, e.Method, e.Path, what, e.Err)
}

// Unwrap returns ErrUnreachable (not sent) or ErrNoAnswer, and the cause.
func (e *TransportError) Unwrap() []error {
	if e.Sent {
		return []error{ErrNoAnswer, e.Err}
	}
	return []error{ErrUnreachable, e.Err}
}

// ClientOptions configure a Client.
type ClientOptions struct {
	// Token is sent as "Authorization: Bearer TOKEN" with every request;
	// the control endpoints need one.
	Token string
	// Timeout bounds each request (connect, send, read the answer); 0 is
	// DefaultClientTimeout.
	Timeout time.Duration
	// Transport carries the requests; nil is http.DefaultTransport.
	Transport http.RoundTripper
}

// Client is a client of a run's operator window (run --listen): the
// requests of blackbox ctl and blackbox top. It follows no redirect (a
// token goes to the window named, nowhere else). Safe for concurrent use.
type Client struct {
	addr  string
	base  *url.URL
	token string
	hc    *http.Client
}

// NewClient returns a client of the window at addr: HOST:PORT, or a URL
// http://HOST:PORT (https too, and a path prefix, for a window behind a
// proxy). An address it cannot use is an error; nothing is sent.
func NewClient(addr string, opts ClientOptions) (*Client, error) {
	raw := addr
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("console: window address %q: %w", addr, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("console: window address %q: scheme %q, want http or https", addr, u.Scheme)
	case u.Host == "":
		return nil, fmt.Errorf("console: window address %q: no host", addr)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("console: window address %q: want [http://]HOST:PORT[/PREFIX], no user, query or fragment", addr)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultClientTimeout
	}
	hc := &http.Client{
		Transport:     opts.Transport,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Client{addr: addr, base: u, token: opts.Token, hc: hc}, nil
}

// Addr is the window's address as given to NewClient.
func (c *Client) Addr() string { return c.addr }

// Status returns the engine's status (GET /status).
func (c *Client) Status(ctx context.Context) (engine.Status, error) {
	var s engine.Status
	err := c.get(ctx, PathStatus, &s, nil)
	return s, err
}

// Bindings returns the bindings an operator can act on (GET /bindings).
func (c *Client) Bindings(ctx context.Context) ([]Binding, error) {
	var b []Binding
	if err := c.get(ctx, PathBindings, &b, nil); err != nil {
		return nil, err
	}
	if b == nil {
		return nil, c.unexpected(http.MethodGet, PathBindings, errors.New("null, want a list of bindings"))
	}
	return b, nil
}

// Readiness returns /readyz's answer: both 200 (ready) and 503 (not
// ready) carry a Readiness, and neither is an error.
func (c *Client) Readiness(ctx context.Context) (Readiness, error) {
	var r Readiness
	err := c.get(ctx, PathReadyz, &r, []int{http.StatusServiceUnavailable})
	return r, err
}

// Control posts a control action (POST /control/ACTION) and returns its
// answer: 200 only (done, or planned for a seek's dry run); any other
// status is an *HTTPError whose Answer is the window's, when it sent one.
func (c *Client) Control(ctx context.Context, action Action, req Request) (Answer, error) {
	path := PathControl + string(action)
	body, err := json.Marshal(req)
	if err != nil {
		return Answer{}, fmt.Errorf("console: %s: %w", path, err)
	}
	resp, err := c.do(ctx, http.MethodPost, path, body)
	if err != nil {
		return Answer{}, err
	}
	b, err := c.read(resp, http.MethodPost, path)
	if err != nil {
		return Answer{}, err
	}
	var a Answer
	jerr := json.Unmarshal(b, &a)
	if resp.StatusCode != http.StatusOK {
		he := &HTTPError{Addr: c.addr, Method: http.MethodPost, Path: path, Code: resp.StatusCode, Message: excerpt(b)}
		if jerr == nil {
			he.Answer, he.Message = &a, a.Error
		}
		return Answer{}, he
	}
	if jerr != nil {
		return Answer{}, c.unexpected(http.MethodPost, path, jerr)
	}
	if a.Action != action {
		return Answer{}, c.unexpected(http.MethodPost, path, fmt.Errorf("an answer to action %q", a.Action))
	}
	return a, nil
}

// get reads path's JSON into v: 200, or a status of also (whose body must
// be v's JSON as well).
func (c *Client) get(ctx context.Context, path string, v any, also []int) error {
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	b, err := c.read(resp, http.MethodGet, path)
	if err != nil {
		return err
	}
	ok := resp.StatusCode == http.StatusOK
	for _, code := range also {
		ok = ok || resp.StatusCode == code
	}
	if !ok {
		he := &HTTPError{Addr: c.addr, Method: http.MethodGet, Path: path, Code: resp.StatusCode, Message: excerpt(b)}
		var a Answer
		if json.Unmarshal(b, &a) == nil && a.Error != "" {
			he.Message = a.Error
		}
		return he
	}
	if err := json.Unmarshal(b, v); err != nil {
		if resp.StatusCode != http.StatusOK {
			return &HTTPError{Addr: c.addr, Method: http.MethodGet, Path: path, Code: resp.StatusCode, Message: excerpt(b)}
		}
		return c.unexpected(http.MethodGet, path, err)
	}
	return nil
}

// do sends one request; an error is a *TransportError.
func (c *Client) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	u := *c.base
	u.Path += path
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), r)
	if err != nil {
		return nil, &TransportError{Addr: c.addr, Method: method, Path: path, Err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *url.Error // says the method and URL again: Addr, Method and Path say them
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &TransportError{Addr: c.addr, Method: method, Path: path, Sent: !notSent(err), Err: err}
	}
	return resp, nil
}

// notSent reports whether err certainly came before the request reached
// the window: no connection (a dial error, an unknown host).
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// read reads and closes resp's body: a *TransportError when it is cut,
// ErrUnexpected when it is over maxAnswer bytes.
func (c *Client) read(resp *http.Response, method, path string) ([]byte, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, &TransportError{Addr: c.addr, Method: method, Path: path, Sent: true, Err: err}
	}
	if len(b) > maxAnswer {
		return nil, c.unexpected(method, path, fmt.Errorf("HTTP %d: an answer over %d bytes", resp.StatusCode, maxAnswer))
	}
	return b, nil
}

func (c *Client) unexpected(method, path string, err error) error {
	return fmt.Errorf("%w: %s: %s %s: %w", ErrUnexpected, c.addr, method, path, err)
}

// excerpt is the start of a body, on one line, for an error.
func excerpt(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
