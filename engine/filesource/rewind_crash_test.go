package filesource

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// The move back's crash test runs a child process (this test binary,
// re-executed with -test.run=^TestMoveBackChild$ and moveBackEnv set)
// that reads in.log's eight lines for the groups fast and slow, each line
// handled appended to out-GROUP.log. In the mode "seek" it then fences
// fast, moves it back to line 3 (Engine.Seek), waits until the pointer
// file says the move back was made, prints moveBackDone and waits to be
// killed (fast stays fenced: nothing is handed again); in the mode
// "restart" it runs until settled and exits.
const (
	moveBackEnv  = "FILESOURCE_MOVEBACK_CHILD" // the working directory
	moveBackMode = "FILESOURCE_MOVEBACK_MODE"  // "seek" or "restart"
	moveBackDone = "MOVED BACK"
)

// appendLines is a processor appending each line to a file, one write per
// line (O_APPEND: a SIGKILL leaves whole lines).
type appendLines struct{ f *os.File }

func (a appendLines) OnEvent(_ *core.Cycle, ev any) error {
	_, err := a.f.WriteString(ev.(string) + "\n")
	return err
}

func TestMoveBackChild(t *testing.T) {
	dir := os.Getenv(moveBackEnv)
	if dir == "" {
		t.Skip("the child of TestASIGKILLAfterAMoveBackHandsTheGroupTheLinesAgain")
	}
	path := filepath.Join(dir, "in.log")
	src, err := New(path, Options{Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.Config{
		Feeds:        []engine.FeedConfig{{Name: "in", Source: src, QueueSize: 64, SkipCompleted: true}},
		DrainTimeout: time.Second,
		Logger:       testutil.Logger(t),
	}
	for _, g := range []string{"fast", "slow"} {
		f, err := os.OpenFile(filepath.Join(dir, "out-"+g+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cfg.Groups = append(cfg.Groups, engine.GroupConfig{Name: g, Feeds: []string{"in"},
			Processors: []engine.ProcessorConfig{{Name: g + "-p", Processor: appendLines{f}}}})
	}
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv(moveBackMode) == "restart" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := e.RunSettled(ctx); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Every line handled and committed: polled (another process's files:
	// no hook to wait on), 30s at most.
	await := func(what string, ok func() bool) { testutil.PollUntil(t, 30*time.Second, what, ok) }
	offset := func() int64 {
		p, err := ReadPointer(path + ".ptr")
		if err != nil {
			return -1
		}
		return p.Offset
	}
	await("the 8 lines committed", func() bool {
		st := e.Feed("in").Status()
		return st.Acknowledged == 8 && offset() == lineOffset(8)
	})
	if err := e.Fence("fast"); err != nil {
		t.Fatal(err)
	}
	var gen int64
	for _, s := range e.Feed("in").Status().Subscribers {
		if s.Queue == "fast/in" && !s.Removed {
			gen = s.Generation
		}
	}
	if _, err := e.Seek("in", "fast", gen, engine.SeekTarget{Seq: 3}, engine.SeekOptions{Reason: "recompute"}); err != nil {
		t.Fatal(err)
	}
	await("the move back made", func() bool { return offset() == lineOffset(3) })
	fmt.Println(moveBackDone)
	select {} // killed here
}

// TestASIGKILLAfterAMoveBackHandsTheGroupTheLinesAgain (Seek backwards,
// the file source, a real crash): a process that moved fast back to line
// 3 is SIGKILLed before fast was handed anything again; the restart
// hands fast lines 4-8 and slow nothing: each group's output holds the
// eight lines once, fast's then lines 4-8 again.
func TestASIGKILLAfterAMoveBackHandsTheGroupTheLinesAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes")
	}
	dir := crashDir(t)
	writeFile(t, filepath.Join(dir, "in.log"), numbered("line", 1, 9))
	run := func(mode string) (*exec.Cmd, *childOutput) {
		return startChild(t, "TestMoveBackChild", moveBackEnv+"="+dir, moveBackMode+"="+mode)
	}
	cmd, out := run("seek")
	awaitLine(t, out, moveBackDone, "fast moved back to line 3")
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if got := readLines(t, filepath.Join(dir, "out-fast.log")); !slices.Equal(got, lines8) {
		t.Fatalf("before the restart fast handled %q, want the 8 lines once", got)
	}
	cmd, _ = run("restart")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the restart: %v", err)
	}
	if got, want := readLines(t, filepath.Join(dir, "out-fast.log")), append(slices.Clone(lines8), lines8[3:]...); !slices.Equal(got, want) {
		t.Errorf("fast handled %q, want %q", got, want)
	}
	if got := readLines(t, filepath.Join(dir, "out-slow.log")); !slices.Equal(got, lines8) {
		t.Errorf("slow handled %q, want the 8 lines once", got)
	}
}
