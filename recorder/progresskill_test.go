package recorder_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// The child of TestSIGKILLedRestartsNeverSkipAnItemItsGroupDidNotComplete
// is this test binary run with these variables: the directory (its input
// in.txt, its recording run-RUN.csv), the run's number, the line slow
// blocks at forever (0: none) and, for the last run, settle (stop cleanly
// once both groups have every line).
const (
	gpDir    = "BLACKBOX_TEST_GP_DIR"
	gpRun    = "BLACKBOX_TEST_GP_RUN"
	gpBlock  = "BLACKBOX_TEST_GP_BLOCK"
	gpSettle = "BLACKBOX_TEST_GP_SETTLE"
	gpLines  = 200
	gpLen    = int64(len("line-000\n"))
)

// gpProc handles a line: fast prints it ("fast line-007"), slow blocks
// forever at its block line (until the process is killed).
type gpProc struct {
	name  string
	block string
	out   io.Writer
	mu    *sync.Mutex
}

func (p gpProc) OnEvent(c *core.Cycle, ev any) error {
	line := fmt.Sprint(ev)
	if line == p.block {
		select {} // until SIGKILL
	}
	if p.out != nil {
		p.mu.Lock()
		fmt.Fprintf(p.out, "%s %s\n", p.name, line)
		p.mu.Unlock()
	}
	return nil
}

func TestGroupProgressKillChild(t *testing.T) {
	dir := os.Getenv(gpDir)
	if dir == "" {
		t.Skip("the child of TestSIGKILLedRestartsNeverSkipAnItemItsGroupDidNotComplete")
	}
	w, err := csvstore.Create(filepath.Join(dir, "run-"+os.Getenv(gpRun)+".csv"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := recorder.New(w, recorder.Options{Apps: map[string]string{"fast-p": "lines", "slow-p": "lines"},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	src, err := filesource.New(filepath.Join(dir, "in.txt"), filesource.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	block := ""
	if n, _ := strconv.Atoi(os.Getenv(gpBlock)); n > 0 {
		block = fmt.Sprintf("line-%03d", n)
	}
	var mu sync.Mutex
	e, err := engine.New(engine.Config{
		Feeds: []engine.FeedConfig{{Name: "in", Source: src, QueueSize: 64, SkipCompleted: true}},
		Groups: []engine.GroupConfig{
			{Name: "fast", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "fast-p", Processor: gpProc{name: "fast", out: os.Stdout, mu: &mu}}}},
			{Name: "slow", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "slow-p", Processor: gpProc{name: "slow", block: block}}}},
		},
		Observer:     rec.Observer(),
		DrainTimeout: 10 * time.Second,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if os.Getenv(gpSettle) == "" {
		time.Sleep(60 * time.Second) // until killed; a child orphaned by a dead parent ends
		t.Fatal("not killed")
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if _, err := e.WaitSettled(wctx); err != nil {
		t.Fatalf("not settled: %+v", e.Status().Feeds[0])
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(rec.Close(), w.Close()); err != nil {
		t.Fatal(err)
	}
}

// gpChild runs the child for run number run; env is added to its
// environment. It returns the child and its stdout's lines, one by one.
func gpChild(t *testing.T, dir string, run int, env ...string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestGroupProgressKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), gpDir+"="+dir, gpRun+"="+strconv.Itoa(run))
	cmd.Env = append(cmd.Env, env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return cmd, lines
}

// killed reports whether the child ended by SIGKILL.
func killed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// TestSIGKILLedRestartsNeverSkipAnItemItsGroupDidNotComplete (per-group
// progress, crash safety): runs of two groups over 200 lines, slow blocked
// at a line, are SIGKILLed: twice right after the file source stored
// fast's progress 30 lines past slow's block (the group-progress-written
// kill point, before the flush), once by the test at a moment fast printed
// (the pointer wherever the run had it); each restart records with
// SkipCompleted, the last runs to the end. Then every item a COMPLETED row
// says a restart did not hand fast was an input of fast in an earlier run
// (never skipped past what it completed), every line was an input of each
// group in some run, the last run (after a kill point) has a COMPLETED row
// of fast (a skip happened; a killed run's may be lost with the batch it
// was staged in), and the last run's recording verifies complete.
func TestSIGKILLedRestartsNeverSkipAnItemItsGroupDidNotComplete(t *testing.T) {
	if testing.Short() {
		t.Skip("SIGKILLs child processes")
	}
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "in.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= gpLines; i++ {
		fmt.Fprintf(f, "line-%03d\n", i)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	type kill struct {
		block int // the line slow blocks at
		point bool
		after int // the test kills once fast printed this line
	}
	kills := []kill{{block: 20, point: true}, {block: 90, after: 110}, {block: 150, point: true}}
	for i, k := range kills {
		env := []string{gpBlock + "=" + strconv.Itoa(k.block)}
		if k.point {
			env = append(env, killpoint.Env+"="+killpoint.GroupProgressWritten+"@"+strconv.FormatInt(int64(k.block+30)*gpLen, 10))
		}
		cmd, lines := gpChild(t, dir, i+1, env...)
		if !k.point {
			want := fmt.Sprintf("fast line-%03d", k.after)
			for l := range lines {
				if l == want {
					break
				}
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
		for range lines {
		}
		if err := cmd.Wait(); !killed(err) {
			t.Fatalf("run %d: %v, want killed by SIGKILL", i+1, err)
		}
	}
	last := len(kills) + 1
	cmd, lines := gpChild(t, dir, last, gpSettle+"=1")
	for l := range lines {
		if !strings.HasPrefix(l, "fast line-") {
			t.Log(l)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the last run: %v", err)
	}

	type place struct{ epoch, offset int64 }
	inputs := map[string]map[place]bool{"fast-p": {}, "slow-p": {}} // the positions of each processor's inputs so far
	lastSkipped := false                                            // the last run has a COMPLETED row of fast
	for run := 1; run <= last; run++ {
		r, err := store.Open(filepath.Join(dir, fmt.Sprintf("run-%d.csv", run)))
		if err != nil {
			t.Fatal(err)
		}
		if ps := r.Problems(); run == last && len(ps) != 0 {
			t.Errorf("the last run's recording has problems: %v", ps)
		}
		seen := map[string]map[place]bool{"fast-p": {}, "slow-p": {}}
		for e, err := range r.Rows() {
			if err != nil { // a killed run's torn last line
				if run == last {
					t.Fatal(err)
				}
				continue
			}
			switch e.Kind {
			case store.KindDelivery:
				seen[e.Processor][place{e.Epoch, e.Offset}] = true
			case store.KindCompleted:
				if run == last && e.Processor == "fast-p" {
					lastSkipped = true
				}
				c, err := store.CompletedOf(e)
				if err != nil {
					t.Fatal(err)
				}
				var had int64
				for p := range inputs[e.Processor] {
					if p.epoch == c.Epoch && p.offset >= c.From && p.offset <= c.Last {
						had++
					}
				}
				if had != c.Items {
					t.Errorf("run %d: %s skips %s: %d of them were inputs of an earlier run", run, e.Processor, c, had)
				}
			}
		}
		r.Close()
		for proc, ps := range seen {
			for p := range ps {
				inputs[proc][p] = true
			}
		}
	}
	if !lastSkipped {
		t.Errorf("the last run has no COMPLETED row of fast, which the kill point before it saved 30 lines past slow's block")
	}
	for proc, ps := range inputs {
		if len(ps) != gpLines {
			t.Errorf("%s had %d distinct lines as inputs over the runs, want %d", proc, len(ps), gpLines)
		}
	}
}
