package filesource

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// The workers crash test: a child (this test binary, re-executed with
// -test.run=^TestWorkersCrashChild$) tails a committed file of two lines
// with two unordered workers. Line "slow" blocks its worker; line "fast",
// after it, completes first. Once the group reports the fast line
// completed beyond the pending slow one, the child says so and the parent
// kills it with SIGKILL; a restarted child (slow no longer blocks) must
// get the slow line again: the pointer never passed it.
const (
	workersCrashEnv    = "FILESOURCE_WORKERS_CRASH_CHILD" // the working directory
	workersCrashSettle = "FILESOURCE_WORKERS_CRASH_SETTLE"
	workersCrashGap    = "FILESOURCE_WORKERS_GAP" // the child's line once fast completed beyond slow
)

func TestWorkersCrashChild(t *testing.T) {
	dir := os.Getenv(workersCrashEnv)
	if dir == "" {
		t.Skip("the child of TestTheLastItemFinishingFirstThenSIGKILLDeliversTheEarlierAgain")
	}
	settle := os.Getenv(workersCrashSettle) != ""
	seen, err := os.OpenFile(filepath.Join(dir, "seen.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	newP := func() (core.Processor, error) {
		return core.ProcessorFunc(func(c *core.Cycle, ev any) error {
			if _, err := fmt.Fprintln(seen, ev); err != nil {
				return err
			}
			if ev == "slow" && !settle {
				<-c.Context().Done() // held until the kill
				return c.Context().Err()
			}
			return nil
		}), nil
	}
	src, err := New(filepath.Join(dir, "in.log"), Options{Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	var cycles atomic.Int64 // the source's duty cycles that reached the end of the file (each polls first)
	src.hookEOF = func() { cycles.Add(1) }
	e, err := engine.New(engine.Config{
		Feeds: []engine.FeedConfig{{Name: "in", Source: src, QueueSize: 16}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Workers: 2, Order: engine.OrderNone,
			Processors: []engine.ProcessorConfig{{Name: "app", New: newP}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if settle {
		if st, err := e.WaitSettled(wctx); err != nil {
			t.Fatalf("not settled: %+v", st)
		}
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		return
	}
	// Wait for the fast line's completion beyond the pending slow one,
	// then a duty cycle of the source after it (the source commits what
	// is acknowledged on each), then say so and wait to be killed.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		if gs := e.Status().Groups[0]; gs.Gap == 1 && gs.OldestPending == 1 {
			break
		}
		select {
		case <-tick.C:
		case <-wctx.Done():
			t.Fatalf("the fast line never completed beyond the slow one: %+v", e.Status().Groups[0])
		}
	}
	done := cycles.Load()
	for cycles.Load() < done+2 {
		select {
		case <-tick.C:
		case <-wctx.Done():
			t.Fatal("the source stopped polling")
		}
	}
	fmt.Println(workersCrashGap)
	<-wctx.Done() // until killed; a child orphaned by a dead parent ends
	t.Fatal("not killed")
}

// The last item finishing first, then a SIGKILL: the earlier item is
// delivered again after the restart, because the pointer commits only the
// contiguous completed prefix (here: nothing).
func TestTheLastItemFinishingFirstThenSIGKILLDeliversTheEarlierAgain(t *testing.T) {
	dir := crashDir(t)
	writeFile(t, filepath.Join(dir, "in.log"), "slow\nfast\n")
	cmd := exec.Command(os.Args[0], "-test.run=^TestWorkersCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), workersCrashEnv+"="+dir)
	out := &lineWaiter{want: workersCrashGap, ready: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	select {
	case <-out.ready:
	case <-time.After(60 * time.Second): // a bound on a broken child, never reached by a working one
		t.Fatalf("the child never reported the gap:\n%s", out.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if p := readPointer(t, filepath.Join(dir, "in.log.ptr")); p.Offset != 0 {
		t.Fatalf("after the kill the pointer is at %d: it passed the pending slow line (want 0)", p.Offset)
	}
	if got := readLines(t, filepath.Join(dir, "seen.log")); !slices.Equal(sortedStrings(got), []string{"fast", "slow"}) {
		t.Fatalf("run 1 saw %q, want slow and fast", got)
	}
	// The restart delivers both again: slow was pending, fast lay beyond it.
	if err := os.Remove(filepath.Join(dir, "seen.log")); err != nil {
		t.Fatal(err)
	}
	run := exec.Command(os.Args[0], "-test.run=^TestWorkersCrashChild$", "-test.count=1")
	run.Env = append(os.Environ(), workersCrashEnv+"="+dir, workersCrashSettle+"=1")
	if b, err := run.CombinedOutput(); err != nil {
		t.Fatalf("the restart: %v\n%s", err, b)
	}
	if got := readLines(t, filepath.Join(dir, "seen.log")); !slices.Equal(sortedStrings(got), []string{"fast", "slow"}) {
		t.Fatalf("the restart saw %q, want slow again (and fast, never committed past slow)", got)
	}
	if p := readPointer(t, filepath.Join(dir, "in.log.ptr")); p.Offset != int64(len("slow\nfast\n")) {
		t.Fatalf("after the restart the pointer is at %d, want the end", p.Offset)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

func sortedStrings(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// lineWaiter keeps what a child writes and closes ready once it wrote the
// line want.
type lineWaiter struct {
	mu    sync.Mutex
	b     strings.Builder
	want  string
	ready chan struct{}
	once  sync.Once
}

func (o *lineWaiter) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.b.Write(p)
	if strings.Contains(o.b.String(), o.want+"\n") {
		o.once.Do(func() { close(o.ready) })
	}
	return len(p), nil
}

func (o *lineWaiter) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
