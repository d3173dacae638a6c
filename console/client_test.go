package console_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/console"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/consoletest"
)

const token = "s3cret"

// newWindow starts a fake window with one binding main/input at 10,
// fenced, holding 5 items, on a feed at 20; group side on feed input,
// not fenced, holding 2.
func newWindow(t *testing.T) (*consoletest.Window, *httptest.Server) {
	t.Helper()
	w := consoletest.New(func() time.Time { return t0 }, map[string]string{token: "alice"})
	w.AddBinding(console.Binding{Feed: "input", Group: "main", Generation: 7, Position: 10, Fenced: true, LossState: "LATCHED"}, 5, 20)
	w.AddBinding(console.Binding{Feed: "input", Group: "side", Generation: 8, Position: 12}, 2, 20)
	srv := httptest.NewServer(w)
	t.Cleanup(srv.Close)
	return w, srv
}

func newClient(t *testing.T, addr, tok string) *console.Client {
	t.Helper()
	c, err := console.NewClient(addr, console.ClientOptions{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestControlAnswersAndTheirErrors(t *testing.T) {
	until := t0.Add(time.Hour)
	seekMain := console.Request{Feed: "input", Group: "main", Reason: "r", Generation: 7, Latest: true}
	planMain := console.Plan{Feed: "input", Group: "main", Generation: 7, Before: 10, After: 15, Loss: true, Unprocessed: 5, FirstSeq: 11, LastSeq: 15}
	withHash := seekMain
	withHash.PlanHash = consoletest.Hash(planMain)
	staleHash := seekMain
	staleHash.PlanHash = "0000"
	for _, tc := range []struct {
		name     string
		token    string
		stopping bool
		action   console.Action
		req      console.Request
		want     console.Answer // when wantErr is nil
		wantErr  error
		wantCode int // the *HTTPError's, when wantErr is an HTTP status's
	}{
		{name: "pause", token: token, action: console.ActionPause, req: console.Request{Group: "side", Feed: "input", Reason: "r", Until: &until},
			want: console.Answer{Action: console.ActionPause, Applied: true, Who: "alice", At: t0, Before: 12, After: 12}},
		{name: "seek dry run", token: token, action: console.ActionSeek, req: seekMain,
			want: console.Answer{Action: console.ActionSeek, Who: "alice", At: t0, Before: 10, After: 15, Plan: &planMain, PlanHash: withHash.PlanHash}},
		{name: "seek applied", token: token, action: console.ActionSeek, req: withHash,
			want: console.Answer{Action: console.ActionSeek, Applied: true, Who: "alice", At: t0, Before: 10, After: 15, Plan: &planMain, PlanHash: withHash.PlanHash}},
		{name: "no token", action: console.ActionPause, req: console.Request{Group: "main", Reason: "r", Indefinite: true},
			wantErr: console.ErrUnauthorized, wantCode: 401},
		{name: "unknown token", token: "guess", action: console.ActionKill, req: console.Request{Reason: "r"},
			wantErr: console.ErrUnauthorized, wantCode: 401},
		{name: "no reason", token: token, action: console.ActionKill, req: console.Request{},
			wantErr: console.ErrBadRequest, wantCode: 400},
		{name: "pause without a deadline", token: token, action: console.ActionPause, req: console.Request{Group: "main", Reason: "r"},
			wantErr: console.ErrBadRequest, wantCode: 400},
		{name: "unknown action", token: token, action: "reboot", req: console.Request{Reason: "r"},
			wantErr: console.ErrNotFound, wantCode: 404},
		{name: "unknown group", token: token, action: console.ActionClear, req: console.Request{Feed: "input", Group: "nope", Reason: "r"},
			wantErr: console.ErrNotFound, wantCode: 404},
		{name: "stale generation", token: token, action: console.ActionRelease, req: console.Request{Feed: "input", Group: "main", Reason: "r", Generation: 6},
			wantErr: console.ErrConflict, wantCode: 409},
		{name: "stale plan", token: token, action: console.ActionSeek, req: staleHash,
			wantErr: console.ErrConflict, wantCode: 409},
		{name: "seek of a group not fenced", token: token, action: console.ActionSeek, req: console.Request{Feed: "input", Group: "side", Reason: "r", Generation: 8, Latest: true},
			wantErr: console.ErrRefused, wantCode: 422},
		{name: "stopping", token: token, stopping: true, action: console.ActionResume, req: console.Request{Group: "main", Reason: "r"},
			wantErr: console.ErrStopping, wantCode: 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, srv := newWindow(t)
			if tc.stopping {
				w.SetStopping()
			}
			c := newClient(t, srv.Listener.Addr().String(), tc.token)
			got, err := c.Control(context.Background(), tc.action, tc.req)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Control: %v", err)
				}
				if d := cmp.Diff(tc.want, got); d != "" {
					t.Errorf("answer (-want +got):\n%s", d)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Control: got %v, want %v", err, tc.wantErr)
			}
			var he *console.HTTPError
			if !errors.As(err, &he) {
				t.Fatalf("Control: %v is not an *HTTPError", err)
			}
			if he.Code != tc.wantCode || he.Addr != c.Addr() || he.Method != http.MethodPost || he.Path != "/control/"+string(tc.action) {
				t.Errorf("HTTPError: got %d %s %s %s, want %d %s POST /control/%s", he.Code, he.Addr, he.Method, he.Path, tc.wantCode, c.Addr(), tc.action)
			}
			if he.Answer == nil || he.Answer.Error == "" || he.Message != he.Answer.Error || he.Answer.Applied {
				t.Errorf("HTTPError: the window's answer %+v, message %q: want its Error, not applied", he.Answer, he.Message)
			}
			for _, r := range w.Received() {
				if r.Applied() {
					t.Errorf("the window applied %+v on a refusal", r)
				}
			}
		})
	}
}

// TestAnswersOutsideTheContract: statuses, bodies and failures the
// contract does not describe are errors saying so, never an answer.
func TestAnswersOutsideTheContract(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    []error
		code    int // of the *HTTPError, 0 for none
		sent    bool
	}{
		{name: "500", handler: func(rw http.ResponseWriter, _ *http.Request) { http.Error(rw, "boom", 500) },
			want: []error{console.ErrUnexpected}, code: 500},
		{name: "a redirect is not followed", handler: func(rw http.ResponseWriter, r *http.Request) {
			http.Redirect(rw, r, "http://example.invalid/", http.StatusTemporaryRedirect)
		}, want: []error{console.ErrUnexpected}, code: 307},
		{name: "200 not JSON", handler: func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("<html>")) },
			want: []error{console.ErrUnexpected}},
		{name: "200 of another action", handler: func(rw http.ResponseWriter, _ *http.Request) {
			_, _ = rw.Write([]byte(`{"action":"resume","applied":true}`))
		}, want: []error{console.ErrUnexpected}},
		{name: "connection cut", handler: func(rw http.ResponseWriter, _ *http.Request) {
			conn, _, err := rw.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}, want: []error{console.ErrNoAnswer}, sent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			c := newClient(t, srv.URL, token)
			_, err := c.Control(context.Background(), console.ActionKill, console.Request{Reason: "r"})
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("got %v, want %v", err, w)
				}
			}
			var he *console.HTTPError
			if got := errors.As(err, &he); got != (tc.code != 0) || (got && he.Code != tc.code) {
				t.Errorf("got %#v, want an HTTPError of %d", err, tc.code)
			}
			var te *console.TransportError
			if errors.As(err, &te) && te.Sent != tc.sent {
				t.Errorf("TransportError.Sent = %v, want %v", te.Sent, tc.sent)
			}
		})
	}
}

func TestUnreachableAndTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	_, err = newClient(t, addr, token).Control(context.Background(), console.ActionKill, console.Request{Reason: "r"})
	var te *console.TransportError
	if !errors.Is(err, console.ErrUnreachable) || !errors.As(err, &te) || te.Sent || te.Addr != addr {
		t.Errorf("a closed port: got %v, want ErrUnreachable, not sent, naming %s", err, addr)
	}

	hold := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select { // answer nothing until the client gives up
		case <-r.Context().Done():
		case <-hold:
		}
	}))
	defer srv.Close()
	defer close(hold)
	c, err := console.NewClient(srv.URL, console.ClientOptions{Token: token, Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Control(context.Background(), console.ActionKill, console.Request{Reason: "r"})
	if !errors.Is(err, console.ErrNoAnswer) || !errors.As(err, &te) || !te.Sent {
		t.Errorf("a window that does not answer: got %v, want ErrNoAnswer, sent", err)
	}
}

func TestReadsStatusBindingsAndReadiness(t *testing.T) {
	w, srv := newWindow(t)
	w.SetStatus([]byte(`{"settled":false,"lossless":true,"feeds":[{"feed":"input","state":"BEHIND","sequence":20}],"groups":[{"group":"main","workers":2,"gap":3,"maxGap":64}]}`))
	// Behind a proxy, under a prefix.
	mux := http.NewServeMux()
	mux.Handle("/win/", http.StripPrefix("/win", w))
	proxied := httptest.NewServer(mux)
	defer proxied.Close()
	for _, addr := range []string{srv.Listener.Addr().String(), srv.URL, proxied.URL + "/win/"} {
		c := newClient(t, addr, "")
		st, err := c.Status(context.Background())
		if err != nil {
			t.Fatalf("%s: Status: %v", addr, err)
		}
		want := engine.Status{Feeds: []engine.FeedStatus{{Feed: "input", State: engine.StateBehind, Sequence: 20}}, Lossless: true,
			Groups: []engine.GroupStatus{{Group: "main", Workers: 2, Gap: 3, MaxGap: 64}}}
		if d := cmp.Diff(want, st); d != "" {
			t.Errorf("%s: status (-want +got):\n%s", addr, d)
		}
		bs, err := c.Bindings(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(w.Bindings(), bs); d != "" {
			t.Errorf("%s: bindings (-want +got):\n%s", addr, d)
		}
	}

	c := newClient(t, srv.URL, "")
	for _, want := range []console.Readiness{
		{Ready: true, State: "running", Feeds: []console.FeedReadiness{{Feed: "input", Ready: true, State: "running"}}},
		{State: "latched", Reason: "main latched", Feeds: []console.FeedReadiness{{Feed: "input", State: "latched", Reason: "main latched"}}},
	} {
		w.SetReadiness(want)
		got, err := c.Readiness(context.Background())
		if err != nil {
			t.Fatalf("Readiness (ready %v): %v", want.Ready, err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("readiness (-want +got):\n%s", d)
		}
	}

	notReady := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		http.Error(rw, "starting", http.StatusServiceUnavailable)
	}))
	defer notReady.Close()
	_, err := newClient(t, notReady.URL, "").Readiness(context.Background())
	var he *console.HTTPError
	if !errors.As(err, &he) || he.Code != 503 || !errors.Is(err, console.ErrStopping) {
		t.Errorf("a 503 that is not a Readiness: got %v, want an HTTPError 503", err)
	}
}

func TestNewClientAddresses(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:8080", true},
		{"localhost:8080", true},
		{"http://127.0.0.1:8080", true},
		{"https://ops.example:443/run-7", true},
		{"ftp://127.0.0.1:21", false},
		{"http://", false},
		{"http://127.0.0.1:8080/?x=1", false},
		{"http://u:p@127.0.0.1:8080", false},
		{"http://[::1", false},
	} {
		_, err := console.NewClient(tc.addr, console.ClientOptions{})
		if (err == nil) != tc.ok {
			t.Errorf("NewClient(%q): got %v, want ok %v", tc.addr, err, tc.ok)
		}
	}
}
