package filesource

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// The crash test runs a child process (this test binary, re-executed with
// -test.run=^TestCrashChild$ and crashEnv set) that tails a committed file
// feed, applies each line (one unbuffered O_APPEND write per line to an
// output file) and saves (applied count, epoch, offset) atomically at the
// delivery's completion. The parent kills it with SIGKILL mid-burst,
// restarts it, and checks what the pointer, the state and the output say.
const (
	crashEnv     = "FILESOURCE_CRASH_CHILD" // the working directory
	crashGuard   = "FILESOURCE_CRASH_GUARD" // "1": skip re-deliveries already applied
	crashSettle  = "FILESOURCE_CRASH_SETTLE"
	crashReady   = "FILESOURCE_CRASH_READY" // the child's line once crashInitial lines are applied and saved
	crashInitial = 2000
	crashBurst   = 3000
	// crashLineCost is what applying a line costs the child, on top of its
	// write and its state save.
	crashLineCost = 100 * time.Microsecond
)

// crashDir is a working directory for a crash run: on /dev/shm when there
// is one (a state save per line costs ~30µs there, ~300µs on this
// machine's disk: the suite stays fast), else the test's temporary
// directory. SIGKILL leaves both the same: the page cache survives.
func crashDir(t *testing.T) string {
	if d, err := os.MkdirTemp("/dev/shm", "filesource-crash-"); err == nil {
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return t.TempDir()
}

type crashState struct {
	Applied int64 `json:"applied"`
	Epoch   int64 `json:"epoch"`
	Offset  int64 `json:"offset"`
}

func readState(path string) (crashState, error) {
	var st crashState
	b, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

// applier is the child's processor: a stateful app that saves its state
// with the source position of the last line it applied.
type applier struct {
	dir   string
	out   *os.File
	guard bool
	st    crashState
}

func (a *applier) OnEvent(c *core.Cycle, ev any) error {
	d := c.Delivery()
	if a.guard && d.AlreadyApplied(a.st.Epoch, core.Position{Offset: a.st.Offset}) {
		return nil // applied before the crash: no change, no output
	}
	for t0 := time.Now(); time.Since(t0) < crashLineCost; { // a slower app: the burst lasts a few hundred ms
	}
	if _, err := a.out.Write([]byte(ev.(string) + "\n")); err != nil {
		return err
	}
	a.st.Applied++
	c.OnComplete(a)
	return nil
}

// Complete saves the state and the delivery's position in one atomic write.
func (a *applier) Complete(d *core.Delivery) error {
	a.st.Epoch, a.st.Offset = d.Epoch, d.Position.Offset
	b, _ := json.Marshal(a.st)
	tmp := filepath.Join(a.dir, "state.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(a.dir, "state.json")); err != nil {
		return err
	}
	if a.st.Applied == crashInitial {
		fmt.Println(crashReady)
	}
	return nil
}

func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("the child of TestSIGKILLMidBurst")
	}
	a := &applier{dir: dir, guard: os.Getenv(crashGuard) == "1"}
	if st, err := readState(filepath.Join(dir, "state.json")); err == nil {
		a.st = st
	} else if !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	out, err := os.OpenFile(filepath.Join(dir, "out.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	src, err := New(filepath.Join(dir, "in.log"), Options{Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	a.out = out
	e, err := engine.New(engine.Config{
		Feeds:  []engine.FeedConfig{{Name: "in", Source: src, QueueSize: 1024}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "app", Processor: a}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if os.Getenv(crashSettle) == "" {
		time.Sleep(60 * time.Second) // until killed; a child orphaned by a dead parent ends
		t.Fatal("not killed")
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if st, err := e.WaitSettled(wctx); err != nil {
		t.Fatalf("not settled: %+v", st)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// childOutput keeps what a child process writes. A child has no channel to
// the test: it prints a line when something the test waits for happened,
// and awaitLine waits for that line.
type childOutput struct {
	mu    sync.Mutex
	b     strings.Builder
	waits map[string]chan struct{} // closed once the line is printed
}

func newChildOutput() *childOutput { return &childOutput{waits: map[string]chan struct{}{}} }

func (o *childOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.b.Write(p)
	o.check()
	return len(p), nil
}

// check closes the channel of each awaited line printed so far; o.mu is held.
func (o *childOutput) check() {
	out := o.b.String()
	for line, ch := range o.waits {
		if ch != nil && strings.Contains(out, line+"\n") {
			close(ch)
			o.waits[line] = nil
		}
	}
}

// printed is closed once the child has printed line.
func (o *childOutput) printed(line string) <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	ch := make(chan struct{})
	if old, ok := o.waits[line]; ok {
		if old != nil {
			return old
		}
		close(ch) // printed already
		return ch
	}
	o.waits[line] = ch
	o.check()
	return ch
}

func (o *childOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// awaitLine waits until the child has printed line (what it means), and
// fails the test after 30 s.
func awaitLine(t *testing.T, o *childOutput, line, what string) {
	t.Helper()
	select {
	case <-o.printed(line):
	case <-time.After(30 * time.Second):
		t.Fatalf("the child did not say %q (%s) within 30 s", line, what)
	}
}

func crashChild(t *testing.T, dir string, guard, settle bool) (*exec.Cmd, *childOutput) {
	t.Helper()
	env := []string{crashEnv + "=" + dir}
	if guard {
		env = append(env, crashGuard+"=1")
	}
	if settle {
		env = append(env, crashSettle+"=1")
	}
	return startChild(t, "TestCrashChild", env...)
}

// startChild starts this test binary running only the test named test,
// with env added to its environment, its output kept (and logged if the
// test fails); it is killed when the test ends.
func startChild(t *testing.T, test string, env ...string) (*exec.Cmd, *childOutput) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	logs := newChildOutput()
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("child (%s) output:\n%s", strings.Join(env, " "), logs.String())
		}
	})
	return cmd, logs
}

// outputLines counts each line of the output file.
func outputLines(t *testing.T, path string) (map[string]int, int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]int{}
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		seen[sc.Text()]++
		n++
	}
	return seen, n
}

// A real crash: SIGKILL mid-burst, then a restart. The pointer read after
// the kill is never ahead of the position saved with the state; after the
// restart every line is in the output. With the AlreadyApplied guard each
// line is applied exactly once (at most one output line, written before its
// state save, repeats); without it the lines of the commit lag are applied
// twice: applied = 5,000 + duplicated output lines (less one when the kill
// fell between a line's output and its state save).
func TestSIGKILLMidBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	const runs = 12
	for i := 0; i < runs; i++ {
		guard := i%2 == 0
		delay := 20*time.Millisecond + time.Duration(i)*180*time.Millisecond/(runs-1)
		t.Run(fmt.Sprintf("guard=%v/kill-after=%s", guard, delay), func(t *testing.T) {
			t.Parallel() // GOMAXPROCS runs at a time: the suite stays short
			dir := crashDir(t)
			in := filepath.Join(dir, "in.log")
			writeFile(t, in, numbered("line", 0, crashInitial))
			state := filepath.Join(dir, "state.json")
			child, out := crashChild(t, dir, guard, false)
			awaitLine(t, out, crashReady, "2,000 lines applied and saved")
			appendFile(t, in, numbered("line", crashInitial, crashInitial+crashBurst)) // one write
			// The kill lands wherever the child is after delay (the runs
			// spread it over the burst): not a wait for anything, every
			// check below holds wherever it lands.
			time.Sleep(delay)
			if err := child.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			child.Wait()

			ptr := readPointer(t, in+".ptr")
			killed, err := readState(state)
			if err != nil {
				t.Fatal(err)
			}
			_, written := outputLines(t, filepath.Join(dir, "out.log"))
			torn := int64(written) - killed.Applied // output written, state not saved
			if ptr.Epoch != killed.Epoch || ptr.Offset > killed.Offset {
				t.Fatalf("pointer %d (epoch %d) ahead of the saved position %d (epoch %d)", ptr.Offset, ptr.Epoch, killed.Offset, killed.Epoch)
			}
			if torn < 0 || torn > 1 {
				t.Fatalf("%d output lines, %d applied at the kill", written, killed.Applied)
			}

			restart, _ := crashChild(t, dir, guard, true)
			if err := restart.Wait(); err != nil {
				t.Fatalf("restarted child: %v", err)
			}
			final, err := readState(state)
			if err != nil {
				t.Fatal(err)
			}
			seen, total := outputLines(t, filepath.Join(dir, "out.log"))
			for j := 0; j < crashInitial+crashBurst; j++ {
				if seen[lineAt(j)] == 0 {
					t.Fatalf("line %d missing from the output", j)
				}
			}
			if len(seen) != crashInitial+crashBurst {
				t.Fatalf("%d distinct output lines", len(seen))
			}
			dups := int64(total - (crashInitial + crashBurst))
			if guard {
				if final.Applied != crashInitial+crashBurst || dups > 1 || dups != torn {
					t.Fatalf("guarded: applied %d, %d duplicated output lines (torn %d): want 5000 and at most the torn one", final.Applied, dups, torn)
				}
			} else if final.Applied < crashInitial+crashBurst || final.Applied != crashInitial+crashBurst+dups-torn {
				t.Fatalf("unguarded: applied %d with %d duplicated output lines (torn %d)", final.Applied, dups, torn)
			}
			if ptr := readPointer(t, in+".ptr"); ptr.Offset != (crashInitial+crashBurst)*lineLen {
				t.Fatalf("final pointer %d", ptr.Offset)
			}
			t.Logf("kill after %s: pointer at line %d, saved at line %d (lag %d), applied at kill %d, torn %d; after restart applied %d, duplicated output lines %d",
				delay, ptr.Offset/lineLen, killed.Offset/lineLen, (killed.Offset-ptr.Offset)/lineLen, killed.Applied, torn, final.Applied, dups)
		})
	}
}
