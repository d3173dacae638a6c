package console_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/blackbox-audit/blackbox/console"
)

// answerTransport answers every request with its status and body, with
// no network.
type answerTransport struct {
	code int
	body []byte
}

func (a answerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: a.code, Body: io.NopCloser(bytes.NewReader(a.body)), Header: http.Header{}, Request: r}, nil
}

// FuzzAnswers: a window's answers are untrusted bytes. The client never
// panics; it returns an answer only for a 200 whose body is an Answer of
// the action asked, and a status of the contract is an *HTTPError of that
// status.
func FuzzAnswers(f *testing.F) {
	f.Add(200, []byte(`{"action":"kill","applied":true,"at":"2030-01-01T00:00:00Z"}`))
	f.Add(200, []byte(`{"action":"pause"}`))
	f.Add(409, []byte(`{"action":"seek","error":"stale"}`))
	f.Add(503, []byte(`{"ready":false,"state":"draining","feeds":[]}`))
	f.Add(422, []byte(`not json`))
	f.Add(200, []byte(`[{"feed":"f","group":"g","generation":1}]`))
	f.Add(307, []byte{})
	f.Fuzz(func(t *testing.T, code int, body []byte) {
		if code < 100 || code > 999 {
			return
		}
		c, err := console.NewClient("127.0.0.1:1", console.ClientOptions{Transport: answerTransport{code, body}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		a, err := c.Control(ctx, console.ActionKill, console.Request{Reason: "r"})
		var he *console.HTTPError
		switch {
		case err == nil:
			if code != http.StatusOK || a.Action != console.ActionKill {
				t.Fatalf("HTTP %d %q: answer %+v", code, body, a)
			}
		case code != http.StatusOK:
			if !errors.As(err, &he) || he.Code != code {
				t.Fatalf("HTTP %d %q: %v is not its HTTPError", code, body, err)
			}
		case !errors.Is(err, console.ErrUnexpected):
			t.Fatalf("HTTP 200 %q: %v, want ErrUnexpected", body, err)
		}
		_, _ = c.Status(ctx)
		_, _ = c.Bindings(ctx)
		if _, err := c.Readiness(ctx); err == nil && code != http.StatusOK && code != http.StatusServiceUnavailable {
			t.Fatalf("HTTP %d %q: a readiness", code, body)
		}
	})
}
