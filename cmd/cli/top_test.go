package cli_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"net/http"
	"net/http/httptest"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/console"
	"github.com/blackbox-audit/blackbox/internal/consoletest"
)

// fakeTopClock is top's clock in tests: a wait returns at once, the time
// moved on by it; after stopAfter waits it cancels the command instead.
type fakeTopClock struct {
	mu        sync.Mutex
	now       time.Time
	waits     int
	stopAfter int
	cancel    context.CancelFunc
}

func (c *fakeTopClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeTopClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits++
	if c.cancel != nil && c.waits > c.stopAfter {
		c.cancel()
		return nil // never fires: the command ends on its context
	}
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

// topWindow is a fake window serving the recorded status of a run of the
// ledger app (testdata/top/status1.json, then status2.json: 1s later).
func topWindow(t *testing.T) (addr string) {
	t.Helper()
	w := consoletest.New(func() time.Time { return epoch }, nil)
	until := epoch.Add(10 * time.Minute)
	w.AddBinding(console.Binding{Feed: "input", Group: "main", Generation: 7, Position: 2300, Fenced: true, PausedUntil: &until, LossState: "LATCHED"}, 144, 2450)
	var bodies [][]byte
	for _, name := range []string{"status1.json", "status2.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "top", name))
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, b)
	}
	w.SetStatus(bodies...)
	w.SetReadiness(console.Readiness{State: "latched", Reason: "group main latched on feed input",
		Feeds: []console.FeedReadiness{{Feed: "input", State: "latched", Reason: "group main latched"}}})
	srv := newServer(t, w)
	return srv
}

// newServer serves h on loopback for the test, and returns its address.
func newServer(t *testing.T, h interface {
	ServeHTTP(http.ResponseWriter, *http.Request)
}) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// TestTopOncePlain checks top --once --plain's frame against
// testdata/top/once.golden (-update rewrites it): two readings 1s apart
// of recorded status JSON, on a fake clock, byte for byte.
func TestTopOncePlain(t *testing.T) {
	addr := topWindow(t)
	var out bytes.Buffer
	clock := &fakeTopClock{now: epoch}
	code := newCLI(&out, cli.WithTopClock(clock), cli.WithTerminals(false, true)).
		Execute(context.Background(), []string{"top", addr, "--once", "--plain"})
	if code != 0 {
		t.Fatalf("top --once --plain: exit %d\n%s", code, out.String())
	}
	got := strings.ReplaceAll(out.String(), addr, "ADDR")
	golden := filepath.Join("testdata", "top", "once.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("top --once --plain (go test ./cmd/cli -run TestTopOncePlain -update rewrites it):\ngot:\n%s\nwant:\n%s", got, want)
	}
	doc, err := os.ReadFile("../../docs/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	if shown := strings.ReplaceAll(got, "ADDR", "127.0.0.1:7070"); !strings.Contains(string(doc), shown) {
		t.Errorf("docs/CLI.md's top section does not show the frame (at 127.0.0.1:7070):\n%s", shown)
	}
}

// TestTopLive runs top until it is stopped: frames one after another as
// text when stdout is not a terminal (or --plain), each one redrawing the
// screen when it is one; the first frame's rates are "-".
func TestTopLive(t *testing.T) {
	for _, tc := range []struct {
		name     string
		terminal bool
		args     []string
		clears   int
	}{
		{name: "not a terminal", args: nil, clears: 0},
		{name: "a terminal", terminal: true, args: nil, clears: 3},
		{name: "a terminal, --plain", terminal: true, args: []string{"--plain"}, clears: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := topWindow(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			clock := &fakeTopClock{now: epoch, stopAfter: 2, cancel: cancel}
			var out bytes.Buffer
			code := newCLI(&out, cli.WithTopClock(clock), cli.WithTerminals(false, tc.terminal)).
				Execute(ctx, append([]string{"top", addr}, tc.args...))
			if code != 0 {
				t.Fatalf("top: exit %d\n%s", code, out.String())
			}
			s := out.String()
			if got := strings.Count(s, "blackbox top "); got != 3 {
				t.Errorf("%d frames, want 3:\n%s", got, s)
			}
			if got := strings.Count(s, "\033[H\033[2J"); got != tc.clears {
				t.Errorf("%d screen clears, want %d", got, tc.clears)
			}
			frames := strings.Split(s, "blackbox top ")[1:]
			for i, want := range []string{"-", "1270.0", "0.0"} { // status2 twice: nothing read
				if got := readRate(frames[i]); got != want {
					t.Errorf("frame %d: READ/s %q, want %q:\n%s", i+1, got, want, frames[i])
				}
			}
		})
	}
}

// TestTopOnceCannotReadTheWindow: --once exits 3 naming the address when
// the window cannot be read.
func TestTopOnceCannotReadTheWindow(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	noStatus := newServer(t, consoletest.New(func() time.Time { return epoch }, nil)) // 404 on /status
	for _, addr := range []string{closed, noStatus} {
		var out bytes.Buffer
		code := newCLI(&out, cli.WithTopClock(&fakeTopClock{now: epoch})).
			Execute(context.Background(), []string{"top", addr, "--once", "--plain"})
		if code != cli.ExitIncomplete || !strings.Contains(out.String(), addr) {
			t.Errorf("top --once %s: exit %d, want 3 naming the address:\n%s", addr, code, out.String())
		}
	}
}

// readRate is the READ/s column of a frame's row of the feed input.
func readRate(frame string) string {
	for _, line := range strings.Split(frame, "\n") {
		if f := strings.Fields(line); len(f) > 3 && f[0] == "input" {
			return f[3]
		}
	}
	return ""
}

// TestTopLiveKeepsTryingAWindowItCannotRead: live, a window that cannot
// be read is a frame saying so, and top goes on.
func TestTopLiveKeepsTryingAWindowItCannotRead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	code := newCLI(&out, cli.WithTopClock(&fakeTopClock{now: epoch, stopAfter: 1, cancel: cancel})).
		Execute(ctx, []string{"top", addr})
	if got := strings.Count(out.String(), "cannot read the window: "+addr+": GET /status: unreachable"); code != 0 || got != 2 {
		t.Errorf("exit %d, %d frames saying the window is unreachable, want 0 and 2:\n%s", code, got, out.String())
	}
}
