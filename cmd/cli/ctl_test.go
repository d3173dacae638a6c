package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"net/http"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/console"
	"github.com/blackbox-audit/blackbox/internal/consoletest"
)

// ctlWindow is a fake window knowing the token of alice: main/input at
// generation 7, position 10, fenced, LATCHED, its queue holding 5 items
// (seqs 11-15), on a feed at 20.
func ctlWindow(t *testing.T) (*consoletest.Window, string) {
	t.Helper()
	w := consoletest.New(func() time.Time { return epoch }, map[string]string{"tok-a": "alice", "tok-b": "bob"})
	w.AddBinding(console.Binding{Feed: "input", Group: "main", Generation: 7, Position: 10, Fenced: true, LossState: "LATCHED"}, 5, 20)
	return w, newServer(t, w)
}

// tokenFile writes a token file and returns its path: the window's tokens
// (alice's and bob's), and carol's, which the window does not know.
func tokenFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte("# operators\nalice tok-a\n\nbob tok-b\ncarol tok-c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// ctl runs blackbox ctl ADDR args... and returns its exit code and output.
func ctl(t *testing.T, addr string, args []string, opts ...cli.Option) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := newCLI(&out, opts...).Execute(context.Background(), append([]string{"ctl", addr}, args...))
	return code, out.String()
}

func applied(w *consoletest.Window) []consoletest.Received {
	var out []consoletest.Received
	for _, r := range w.Received() {
		if r.Applied() {
			out = append(out, r)
		}
	}
	return out
}

// TestCtlRefusesBeforeSending: a command line ctl cannot honour is exit
// 2 and sends nothing.
func TestCtlRefusesBeforeSending(t *testing.T) {
	tokens := tokenFile(t)
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"unknown action", []string{"reboot", "--reason", "r"}},
		{"no reason", []string{"kill"}},
		{"pause without a deadline", []string{"pause", "--group", "main", "--reason", "r"}},
		{"pause with both", []string{"pause", "--group", "main", "--until", "1m", "--indefinite", "--reason", "r"}},
		{"pause until a past time", []string{"pause", "--group", "main", "--until", "2029-12-31T00:00:00Z", "--reason", "r"}},
		{"pause until nonsense", []string{"pause", "--group", "main", "--until", "soon", "--reason", "r"}},
		{"pause without a group", []string{"pause", "--until", "1m", "--reason", "r"}},
		{"seek without a target", []string{"seek", "--feed", "input", "--group", "main", "--reason", "r"}},
		{"seek with both targets", []string{"seek", "--feed", "input", "--group", "main", "--to", "15", "--latest", "--reason", "r"}},
		{"seek to 0", []string{"seek", "--feed", "input", "--group", "main", "--to", "0", "--reason", "r"}},
		{"a flag of another action", []string{"pause", "--group", "main", "--until", "1m", "--to", "3", "--reason", "r"}},
		{"kill with a group", []string{"kill", "--group", "main", "--reason", "r"}},
		{"clear without a feed", []string{"clear", "--group", "main", "--reason", "r"}},
		{"resume --generation without --feed", []string{"resume", "--group", "main", "--generation", "7", "--reason", "r"}},
		{"no token file", []string{"kill", "--reason", "r", "--token-file", ""}},
		{"a missing token file", []string{"kill", "--reason", "r", "--token-file", filepath.Join(t.TempDir(), "none")}},
		{"a malformed token file", []string{"kill", "--reason", "r", "--token-file", bad}},
		{"an unknown token name", []string{"kill", "--reason", "r", "--token-name", "dave"}},
		{"a bad address", []string{"kill", "--reason", "r", "--addr-placeholder"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, addr := ctlWindow(t)
			args := tc.args
			if args[len(args)-1] == "--addr-placeholder" {
				addr, args = "ftp://"+addr, args[:len(args)-1]
			}
			if !containsFlag(args, "--token-file") {
				args = append(args, "--token-file", tokens)
			}
			code, out := ctl(t, addr, append(args, "--yes"))
			if code != cli.ExitFailure {
				t.Errorf("exit %d, want 2:\n%s", code, out)
			}
			if r := w.Received(); len(r) != 0 {
				t.Errorf("the window received %+v", r)
			}
		})
	}
}

func containsFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag {
			return true
		}
	}
	return false
}

// TestCtlSeekPlansThenApplies: seek reads the generation, asks for a dry
// run, prints the plan, and applies it with its hash.
func TestCtlSeekPlansThenApplies(t *testing.T) {
	w, addr := ctlWindow(t)
	code, out := ctl(t, addr, []string{"seek", "--feed", "input", "--group", "main", "--latest", "--reason", "poison",
		"--token-file", tokenFile(t), "--token-name", "bob", "--yes"})
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	plan := console.Plan{Feed: "input", Group: "main", Generation: 7, Before: 10, After: 15, Loss: true, Unprocessed: 5, FirstSeq: 11, LastSeq: 15}
	hash := consoletest.Hash(plan)
	want := strings.ReplaceAll(`window    ADDR
action    seek: move group main's position on feed input to the latest (past everything its queue holds)
binding   main/input generation 7, position 10, fenced, loss state LATCHED
plan      position 10 -> 15: skips seqs 11-15 (5 unprocessed, 0 processed): a loss, recorded; no redelivery
hash      HASH
reason    poison
applied   2030-01-01T00:00:00Z by bob: position 10 -> 15
`, "HASH", hash)
	if got := strings.ReplaceAll(out, addr, "ADDR"); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
	dry := console.Request{Feed: "input", Group: "main", Reason: "poison", Generation: 7, Latest: true}
	apply := dry
	apply.PlanHash = hash
	wantReceived := []consoletest.Received{
		{Action: console.ActionSeek, Request: dry, Who: "bob", Code: 200},
		{Action: console.ActionSeek, Request: apply, Who: "bob", Code: 200},
	}
	if d := cmp.Diff(wantReceived, w.Received()); d != "" {
		t.Errorf("requests (-want +got):\n%s", d)
	}
	if b := w.Bindings()[0]; b.Position != 15 || b.Generation == 7 {
		t.Errorf("binding after the seek: %+v, want position 15 and a new generation", b)
	}
}

// TestCtlWithoutYesAppliesNothing: not a terminal and no --yes, ctl
// prints the plan and exits 1; the window got the dry run (seek) or
// nothing, never an apply.
func TestCtlWithoutYesAppliesNothing(t *testing.T) {
	tokens := tokenFile(t)
	for _, tc := range []struct {
		args     []string
		requests int // dry runs
	}{
		{[]string{"seek", "--feed", "input", "--group", "main", "--to", "15"}, 1},
		{[]string{"release", "--feed", "input", "--group", "main"}, 0},
		{[]string{"pause", "--group", "main", "--until", "10m"}, 0},
		{[]string{"resume", "--group", "main"}, 0},
		{[]string{"clear", "--feed", "input", "--group", "main"}, 0},
		{[]string{"kill", "--abandon"}, 0},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			w, addr := ctlWindow(t)
			code, out := ctl(t, addr, append(tc.args, "--reason", "r", "--token-file", tokens))
			if code != cli.ExitDifferent {
				t.Errorf("exit %d, want 1:\n%s", code, out)
			}
			if !strings.Contains(out, "not applied: give --yes") || !strings.Contains(out, "action    "+tc.args[0]+": ") {
				t.Errorf("no plan, or no word of --yes:\n%s", out)
			}
			if got := len(w.Received()); got != tc.requests || len(applied(w)) != 0 {
				t.Errorf("the window received %+v, want %d dry runs and no apply", w.Received(), tc.requests)
			}
		})
	}
}

// TestCtlAsksOnATerminal: with standard input a terminal, ctl applies
// after a "y" and not after anything else.
func TestCtlAsksOnATerminal(t *testing.T) {
	for _, tc := range []struct {
		answer string
		code   int
	}{{"y\n", 0}, {"YES\n", 0}, {"n\n", 1}, {"", 1}, {"yes please\n", 1}} {
		w, addr := ctlWindow(t)
		code, out := ctl(t, addr, []string{"release", "--feed", "input", "--group", "main", "--reason", "r", "--token-file", tokenFile(t)},
			cli.WithStdin(strings.NewReader(tc.answer)), cli.WithTerminals(true, false))
		if code != tc.code || !strings.Contains(out, "apply this to "+addr+"? [y/N]") {
			t.Errorf("answer %q: exit %d, want %d, after a prompt:\n%s", tc.answer, code, tc.code, out)
		}
		if got := len(applied(w)); got != 1-tc.code {
			t.Errorf("answer %q: %d applied, want %d", tc.answer, got, 1-tc.code)
		}
	}
}

// TestCtlRefusals: the window's refusals are exit 2 (nothing was done),
// naming the address and the HTTP status.
func TestCtlRefusals(t *testing.T) {
	tokens := tokenFile(t)
	for _, tc := range []struct {
		name   string
		args   []string
		before func(*consoletest.Window)
		status string
	}{
		// The binding moved between the dry run and the apply: the plan's
		// hash is stale.
		{"a changed plan", []string{"seek", "--feed", "input", "--group", "main", "--latest"}, func(w *consoletest.Window) {
			w.AfterControl(func(r consoletest.Received) {
				if r.Request.PlanHash == "" {
					w.Move("input", "main", 1)
				}
			})
		}, "HTTP 409"},
		{"a stale generation", []string{"release", "--feed", "input", "--group", "main", "--generation", "6"}, nil, "HTTP 409"},
		{"an unknown group", []string{"clear", "--feed", "input", "--group", "nope"}, nil, "HTTP 404"},
		{"an unknown binding", []string{"release", "--feed", "input", "--group", "nope"}, nil, "no binding of group"},
		{"an unknown token", []string{"kill", "--token-name", "carol"}, nil, "HTTP 401"},
		{"refused by the engine", []string{"seek", "--feed", "input", "--group", "main", "--to", "12"}, nil, "HTTP 422"},
		{"the run is stopping", []string{"pause", "--group", "main", "--indefinite"}, func(w *consoletest.Window) { w.SetStopping() }, "HTTP 503"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, addr := ctlWindow(t)
			if tc.before != nil {
				tc.before(w)
			}
			code, out := ctl(t, addr, append(tc.args, "--reason", "r", "--token-file", tokens, "--yes"))
			if code != cli.ExitFailure || !strings.Contains(out, addr) || !strings.Contains(out, tc.status) {
				t.Errorf("exit %d, want 2 naming %s and %q:\n%s", code, addr, tc.status, out)
			}
			if a := applied(w); len(a) != 0 {
				t.Errorf("applied %+v", a)
			}
		})
	}
}

// TestCtlUnknownOutcome: an unreachable window is exit 3, nothing sent;
// an apply without an answer is exit 3, its outcome unknown.
func TestCtlUnknownOutcome(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	code, out := ctl(t, closed, []string{"kill", "--reason", "r", "--token-file", tokenFile(t), "--yes"})
	if code != cli.ExitIncomplete || !strings.Contains(out, closed) || !strings.Contains(out, "nothing was sent") {
		t.Errorf("unreachable: exit %d, want 3 naming %s:\n%s", code, closed, out)
	}

	// The apply's connection is cut: the window may have applied it.
	w, _ := ctlWindow(t)
	cut := newServer(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if conn, _, err := rw.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		w.ServeHTTP(rw, r)
	}))
	code, out = ctl(t, cut, []string{"release", "--feed", "input", "--group", "main", "--reason", "r", "--token-file", tokenFile(t), "--yes"})
	if code != cli.ExitIncomplete || !strings.Contains(out, "whether it was applied is unknown") {
		t.Errorf("no answer to the apply: exit %d, want 3, unknown:\n%s", code, out)
	}
}

// TestCtlJSON: --json prints one document: the request, the binding, the
// plan and the answer.
func TestCtlJSON(t *testing.T) {
	_, addr := ctlWindow(t)
	code, out := ctl(t, addr, []string{"seek", "--feed", "input", "--group", "main", "--to", "18", "--reason", "r",
		"--token-file", tokenFile(t), "--yes", "--json"})
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	var rep struct {
		Window  string
		Action  console.Action
		Request console.Request
		Binding *console.Binding
		Plan    *console.Answer
		Answer  *console.Answer
		Applied bool
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not one JSON document: %v\n%s", err, out)
	}
	if rep.Window != addr || rep.Action != console.ActionSeek || !rep.Applied || rep.Binding == nil || rep.Binding.Generation != 7 ||
		rep.Plan == nil || rep.Plan.Plan.After != 18 || rep.Answer == nil || !rep.Answer.Applied || rep.Request.PlanHash != rep.Plan.PlanHash {
		t.Errorf("report: %+v", rep)
	}
}

// TestCtlInterruptedAtThePrompt: an interrupt (the command's context
// ended) while ctl waits for an answer is a no: exit 1, nothing sent.
func TestCtlInterruptedAtThePrompt(t *testing.T) {
	w, addr := ctlWindow(t)
	stdin, never := io.Pipe() // a terminal nobody types on
	defer never.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	code := newCLI(&out, cli.WithStdin(stdin), cli.WithTerminals(true, false)).Execute(ctx,
		[]string{"ctl", addr, "kill", "--reason", "r", "--token-file", tokenFile(t)})
	if code != cli.ExitDifferent || !strings.Contains(out.String(), "not applied: declined") {
		t.Errorf("exit %d, want 1, declined:\n%s", code, out.String())
	}
	if r := w.Received(); len(r) != 0 {
		t.Errorf("the window received %+v", r)
	}
}
