package filesource

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// A file rotated while the source was stopped, with lines the pointer had
// not reached: the restart finds the pointer's file by identity and
// fingerprint among the rotated siblings (Options.Rotated), or a copy of it
// by its fingerprint (copytruncate), reads it from the pointer to its end
// under the pointer's epoch, then the new file from 0 under a new epoch.
// Nothing is lost, and the run says lossless.
func TestAFileRotatedWhileStoppedIsFinishedFromItsRotatedSibling(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rotated string // the rotated name, after the input path
		opts    Options
		copy    bool // copytruncate: copy to the rotated name, truncate in place
	}{
		{"numbered", ".1", Options{}, false},
		{"dated", "-20261201", Options{}, false},
		{"configured", ".old", Options{Rotated: []string{"{path}.old"}}, false},
		{"copytruncate", ".1", Options{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := input(t, numbered("old", 0, 6))
				once(t, path, tc.opts, 6)
				before := readPointer(t, path+".ptr")
				appendFile(t, path, numbered("old", 6, 8)) // never read
				if tc.copy {
					writeFile(t, path+tc.rotated, numbered("old", 0, 8))
				} else if err := os.Rename(path, path+tc.rotated); err != nil {
					t.Fatal(err)
				}
				writeFile(t, path, numbered("new", 0, 2)) // truncates a copied file in place

				src, lg := newSource(t, path, tc.opts)
				p := &rec{}
				r := startSource(t, src, lg, setup{procs: []*rec{p}})
				st := r.settle(4, p)
				r.stop()
				got, ds := p.got()
				if want := slices.Concat(linesOf("old", 6, 8), linesOf("new", 0, 2)); !slices.Equal(got, want) {
					t.Fatalf("got %q, want %q", got, want)
				}
				if ds[0].Epoch != before.Epoch || ds[0].Position.Offset != 7*lineLen || ds[2].Epoch == before.Epoch || ds[2].Position.Offset != lineLen {
					t.Fatalf("deliveries %+v: want the old file's lines under the pointer's epoch %d, then the new file from 0", ds, before.Epoch)
				}
				if !st.Lossless || st.Feeds[0].Losses[LossUnread] != 0 {
					t.Fatalf("status %+v: want lossless", st.Feeds[0])
				}
				if !lg.Has(" to " + path + tc.rotated) {
					t.Fatalf("no warning:\n%s", lg)
				}
				fi, _ := os.Stat(path)
				if ptr := readPointer(t, path+".ptr"); ptr.Identity != identity(fi) || ptr.Offset != 2*lineLen || ptr.Epoch != ds[2].Epoch {
					t.Fatalf("pointer %+v: want the new file's end", ptr)
				}
			})
		})
	}
}

// A file rotated while the source was stopped, and not found among the
// rotated siblings (deleted, or named as no pattern says), or truncated and
// rewritten in place with no copy of it there: the restart reads the new
// content, and says which bytes of which file were never read (a warning,
// the feed's detail) and that the run is not lossless (unreadFiles): those
// bytes may have held lines, and nothing can tell any more.
func TestARotatedFileThatCannotBeFoundIsReportedUnread(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rotate func(t *testing.T, path string)
	}{
		{"deleted", func(t *testing.T, path string) { os.Remove(path) }},
		{"unmatched-name", func(t *testing.T, path string) { os.Rename(path, path+".backup") }},
		{"rewritten-in-place", func(t *testing.T, path string) {}}, // the new content truncates it
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := input(t, numbered("old", 0, 6))
				once(t, path, Options{}, 6)
				before := readPointer(t, path+".ptr")
				appendFile(t, path, numbered("old", 6, 8))
				tc.rotate(t, path)
				writeFile(t, path, numbered("new", 0, 2))

				src, lg := newSource(t, path, Options{})
				p := &rec{}
				r := startSource(t, src, lg, setup{procs: []*rec{p}})
				st := r.settle(2, p)
				r.stop()
				if got, _ := p.got(); !slices.Equal(got, linesOf("new", 0, 2)) {
					t.Fatalf("got %q", got)
				}
				fs := st.Feeds[0]
				if st.Lossless || fs.Lossless || fs.Losses[LossUnread] != 1 {
					t.Fatalf("lossless %v, unreadFiles %d: want not lossless, 1", st.Lossless, fs.Losses[LossUnread])
				}
				if fs.Detail == nil || !strings.Contains(*fs.Detail, "from offset 72 to its end were never read") {
					t.Fatalf("detail %v", fs.Detail)
				}
				if !lg.Has("epoch " + strconv.FormatInt(before.Epoch, 10) + ") was read to offset 72") {
					t.Fatalf("no warning naming the file:\n%s", lg)
				}
			})
		})
	}
}

// The rotation kill test: a child process tails a committed file with two
// groups; one (out1) is blocked on line old-28 so that old-28..old-39 stay
// queued, the other (out2) processes everything. The file is rotated
// (app.log -> app.log.1, a new app.log with 2 lines); once the new lines
// were published (out2 has them), the child is killed with SIGKILL. The
// pointer still describes the old file (its identity, the blocked group's
// position): the restart finishes app.log.1 from there, then reads app.log,
// and no line is lost for either group. The child says what its groups
// wrote on its output, and the test waits for those lines.
func TestARotatedFilesQueuedLinesSurviveASIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	dir := crashDir(t)
	in := filepath.Join(dir, "app.log")
	writeFile(t, in, numbered("old", 0, 40))
	block := linesOf("old", 28, 29)[0]
	child, said := rotationChild(t, dir, block)
	out1, out2 := filepath.Join(dir, "out1.log"), filepath.Join(dir, "out2.log")
	awaitLine(t, said, "out1.log blocked", "group 1 at the blocked line")
	awaitLine(t, said, "out2.log 40", "every old line through group 2")
	if n1, n2 := countLines(out1), countLines(out2); n1 != 28 || n2 != 40 {
		t.Fatalf("before the rotation: %d lines through group 1, %d through group 2, want 28 and 40", n1, n2)
	}
	if err := os.Rename(in, in+".1"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, in, numbered("new", 0, 2))
	awaitLine(t, said, "reading it from 0 under a new epoch", "the new file opened")
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	child.Wait()

	old, err := os.Stat(in + ".1")
	if err != nil {
		t.Fatal(err)
	}
	if ptr := readPointer(t, in+".ptr"); ptr.Identity != identity(old) || ptr.Offset != 28*lineLen {
		t.Fatalf("pointer %+v at the kill: want the old file (identity %x) at the blocked line (%d)", ptr, identity(old), 28*lineLen)
	}
	if n := countLines(out2); n != 40 {
		t.Fatalf("%d lines through group 2 at the kill: want 40 (the new file's held until the old file's lines are committed)", n)
	}
	restart, _ := rotationChild(t, dir, "")
	if err := restart.Wait(); err != nil {
		t.Fatalf("restarted child: %v", err)
	}
	for _, out := range []string{out1, out2} {
		seen, _ := outputLines(t, out)
		for _, want := range slices.Concat(linesOf("old", 0, 40), linesOf("new", 0, 2)) {
			if seen[want] == 0 {
				t.Fatalf("%s: %q never delivered", filepath.Base(out), want)
			}
		}
	}
}

func countLines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

const (
	rotationEnv   = "FILESOURCE_ROTATION_CHILD" // the working directory
	rotationBlock = "FILESOURCE_ROTATION_BLOCK" // the line group 1 blocks on; empty: run to settled
)

func rotationChild(t *testing.T, dir, block string) (*exec.Cmd, *childOutput) {
	t.Helper()
	return startChild(t, "TestRotationChild", rotationEnv+"="+dir, rotationBlock+"="+block)
}

// appender writes each line it is given to its file (one O_APPEND write per
// line), then prints "NAME N" (N lines written so far); block, if set, is a
// line it never gets past: it prints "NAME blocked" there.
type appender struct {
	name  string
	out   *os.File
	block string
	n     int
}

func (a *appender) OnEvent(_ *core.Cycle, ev any) error {
	if ev.(string) == a.block {
		fmt.Printf("%s blocked\n", a.name)
		select {} // until killed
	}
	if _, err := a.out.Write([]byte(ev.(string) + "\n")); err != nil {
		return err
	}
	a.n++
	fmt.Printf("%s %d\n", a.name, a.n)
	return nil
}

// messages is a slog.Handler printing each record's message on a line of
// its own (the parent awaits them).
type messages struct{ w io.Writer }

func (m messages) Enabled(context.Context, slog.Level) bool { return true }
func (m messages) WithAttrs([]slog.Attr) slog.Handler       { return m }
func (m messages) WithGroup(string) slog.Handler            { return m }
func (m messages) Handle(_ context.Context, r slog.Record) error {
	_, err := fmt.Fprintln(m.w, r.Message)
	return err
}

// TestRotationChild is the child of TestARotatedFilesQueuedLinesSurviveASIGKILL:
// a process tailing a real file on the wall clock, as in production, until
// it is killed (with a blocked line) or settled.
func TestRotationChild(t *testing.T) {
	dir := os.Getenv(rotationEnv)
	if dir == "" {
		t.Skip("the child of TestARotatedFilesQueuedLinesSurviveASIGKILL")
	}
	block := os.Getenv(rotationBlock)
	var groups []engine.GroupConfig
	for i, name := range []string{"out1.log", "out2.log"} {
		out, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		a := &appender{name: name, out: out}
		if i == 0 {
			a.block = block
		}
		groups = append(groups, engine.GroupConfig{Name: name, Feeds: []string{"in"},
			Processors: []engine.ProcessorConfig{{Name: "app" + name, Processor: a}}})
	}
	src, err := New(filepath.Join(dir, "app.log"), Options{Logger: slog.New(messages{os.Stdout})})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{
		Feeds:  []engine.FeedConfig{{Name: "in", Source: src, QueueSize: 1024}},
		Groups: groups,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if block != "" {
		select {} // until killed
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

// Several rotations while the source was stopped: the pointer's file was
// rotated (with lines the pointer had not reached), then the file after
// it, and so on. The restart finds the pointer's file by identity and
// fingerprint, reads it from the pointer to its end, then every file
// rotated after it in rotation order (the natural order of their names:
// in.log-9 before in.log-10; never their times: here the times say the
// opposite), then the current file. A sibling rotated before the pointer's
// file (read by an earlier run) is not read again. Nothing is lost, and
// the run says lossless.
func TestARestartReadsEveryFileRotatedAfterThePointersInRotationOrder(t *testing.T) {
	for _, tc := range []struct {
		name     string
		older    string   // the name of a sibling rotated before the pointer's file
		rotated  []string // the names the pointer's file and those after it were rotated to, in order
		opts     Options
		backdate bool // give each rotated file an older time than the one before it
	}{
		{"sequenced", "-0000", []string{"-0001", "-0002"}, Options{}, false},
		{"unpadded numbers", "-8", []string{"-9", "-10", "-11"}, Options{}, false},
		{"dated", "-20261130", []string{"-20261201", "-20261202"}, Options{}, false},
		{"times reversed", "-0000", []string{"-0001", "-0002", "-0003"}, Options{}, true},
		{"configured", ".old0", []string{".old1", ".old2"}, Options{Rotated: []string{"{path}.old*"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := input(t, numbered("f0", 0, 6))
				writeFile(t, path+tc.older, numbered("zz", 0, 3)) // read before the pointer's file
				once(t, path, tc.opts, 6)
				appendFile(t, path, numbered("f0", 6, 8)) // never read
				var want []string
				want = append(want, linesOf("f0", 6, 8)...)
				for i, suffix := range tc.rotated {
					if err := os.Rename(path, path+suffix); err != nil {
						t.Fatal(err)
					}
					name := fmt.Sprintf("f%d", i+1)
					writeFile(t, path, numbered(name, 0, 3))
					want = append(want, linesOf(name, 0, 3)...)
					if tc.backdate {
						at := time.Now().Add(-time.Duration(i+1) * time.Hour)
						if err := os.Chtimes(path+suffix, at, at); err != nil {
							t.Fatal(err)
						}
					}
				}

				src, lg := newSource(t, path, tc.opts)
				p := &rec{}
				r := startSource(t, src, lg, setup{procs: []*rec{p}})
				st := r.settle(len(want), p)
				r.stop()
				if got, _ := p.got(); !slices.Equal(got, want) {
					t.Fatalf("got %q\nwant %q", got, want)
				}
				if fs := st.Feeds[0]; !st.Lossless || fs.Losses[LossUnread] != 0 {
					t.Fatalf("status %+v: want lossless", fs)
				}
				fi, _ := os.Stat(path)
				if ptr := readPointer(t, path+".ptr"); ptr.Identity != identity(fi) || ptr.Offset != 3*lineLen {
					t.Fatalf("pointer %+v: want the current file's end", ptr)
				}
			})
		})
	}
}

// Quick rotations while the source follows the file: a hundred files
// rotated away (by a new name each, or by renumbering every rotated file
// as logrotate's numbered scheme does), all while the source sleeps or
// interleaved with its reads. Every rotated file is read to its end, in
// rotation order, before the file after it: no line is lost or repeated,
// and the run says lossless.
func TestQuickRotationsWhileFollowingLoseNoLine(t *testing.T) {
	for _, tc := range []struct {
		name     string
		n        int  // rotations
		every    int  // let the source run after every this many rotations; 0: never
		renumber bool // PATH.1 is the newest rotated file: every rotation renames the others up
		opts     Options
	}{
		{"all at once", 100, 0, false, Options{}},
		{"while the source reads", 100, 7, false, Options{}},
		{"renumbered, all at once", 25, 0, true, Options{Rotated: []string{"{path}.[0-9]*"}}},
		{"renumbered, while the source reads", 25, 4, true, Options{Rotated: []string{"{path}.[0-9]*"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := input(t, numbered("r0", 0, 1))
				src, lg := newSource(t, path, tc.opts)
				p := &rec{}
				r := startSource(t, src, lg, setup{procs: []*rec{p}})
				testutil.AdvanceUntil(t, "the first line", func() bool { return p.count() == 1 && r.feed().State == engine.StateCaughtUp })
				want := linesOf("r0", 0, 1)
				for i := 1; i <= tc.n; i++ {
					if tc.renumber {
						for k := i - 1; k >= 1; k-- {
							if err := os.Rename(fmt.Sprintf("%s.%d", path, k), fmt.Sprintf("%s.%d", path, k+1)); err != nil {
								t.Fatal(err)
							}
						}
						if err := os.Rename(path, path+".1"); err != nil {
							t.Fatal(err)
						}
					} else if err := os.Rename(path, fmt.Sprintf("%s-%04d", path, i)); err != nil {
						t.Fatal(err)
					}
					name := fmt.Sprintf("r%d", i)
					writeFile(t, path, numbered(name, 0, 2))
					want = append(want, linesOf(name, 0, 2)...)
					if tc.every > 0 && i%tc.every == 0 {
						testutil.Advance(time.Millisecond)
					}
				}
				st := r.settle(len(want), p)
				if got, _ := p.got(); !slices.Equal(got, want) {
					t.Fatalf("got %d lines %q\nwant %d lines %q", len(got), got, len(want), want)
				}
				if fs := st.Feeds[0]; !st.Lossless || fs.Losses[LossUnread] != 0 {
					t.Fatalf("status %+v: want lossless", fs)
				}
			})
		})
	}
}

// A file rotated after the one being read and deleted before the source
// could read it (retention outrunning the reader) is not passed over in
// silence: its bytes were never read, so the run counts it (unreadFiles),
// warns with its name and identity, and says it is not lossless. The
// files before and after it are read in full.
func TestARotatedFileDeletedBeforeItIsReadIsReportedUnread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("r0", 0, 1))
		src, lg := newSource(t, path, Options{})
		gone := path + "-0002"
		src.hookRotate = func(name string) {
			if name == gone {
				os.Remove(name)
			}
		}
		p := &rec{}
		r := startSource(t, src, lg, setup{procs: []*rec{p}})
		testutil.AdvanceUntil(t, "the first line", func() bool { return p.count() == 1 && r.feed().State == engine.StateCaughtUp })
		for i := 1; i <= 3; i++ {
			if err := os.Rename(path, fmt.Sprintf("%s-%04d", path, i)); err != nil {
				t.Fatal(err)
			}
			writeFile(t, path, numbered(fmt.Sprintf("r%d", i), 0, 2))
		}
		want := slices.Concat(linesOf("r0", 0, 1), linesOf("r2", 0, 2), linesOf("r3", 0, 2)) // r1 was rotated to -0002
		var st engine.Status
		testutil.AdvanceUntil(t, "the lines of every file but the deleted one", func() bool {
			st = r.e.Status()
			return p.count() == len(want) && st.Feeds[0].State == engine.StateCaughtUp
		})
		if got, _ := p.got(); !slices.Equal(got, want) {
			t.Fatalf("got %q\nwant %q", got, want)
		}
		if fs := st.Feeds[0]; st.Lossless || fs.Losses[LossUnread] != 1 {
			t.Fatalf("status %+v: want the deleted file counted unread, not lossless", fs)
		}
		if !lg.Has(gone) {
			t.Fatalf("no warning naming %s:\n%s", gone, lg)
		}
	})
}

// Rotation order among names is their natural order: runs of digits
// compare as numbers (leading zeros aside), the rest byte by byte.
func TestRotationOrderIsTheNaturalOrderOfTheNames(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int // the sign of compareNatural(a, b)
	}{
		{"in.log-9", "in.log-10", -1},
		{"in.log-0009", "in.log-0010", -1},
		{"in.log-20261130", "in.log-20261201", -1},
		{"in.log-2026-11-30", "in.log-2026-12-01", -1},
		{"in.log.2", "in.log.10", -1},
		{"in.log-009", "in.log-9", -1}, // equal numbers: the names decide, once and for all
		{"in.log-a", "in.log-b", -1},
		{"in.log-1", "in.log-1.gz", -1},
		{"in.log-7", "in.log-7", 0},
	} {
		got, back := compareNatural(tc.a, tc.b), compareNatural(tc.b, tc.a)
		if sign(got) != tc.want || sign(back) != -tc.want {
			t.Errorf("compareNatural(%q, %q) = %d and back %d, want sign %d", tc.a, tc.b, got, back, tc.want)
		}
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// A first run (no pointer) lists the rotated siblings, then opens the
// path: a rotation between the two moves the file that was at the path
// aside and opens the one after it. The file moved aside was rotated
// before the file opened, as those listed were: it is not read after it
// (out of rotation order, which moved the pointer past lines never read:
// torture seed 1796281376933206065). The run reads the file it opened,
// then, once that one is rotated, the next.
func TestARotationBetweenTheListingAndTheOpenKeepsTheRotationOrder(t *testing.T) {
	for _, strategy := range []Strategy{Committed, Earliest} {
		t.Run(strategy.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := input(t, numbered("a", 0, 3))
				src, lg := newSource(t, path, Options{Read: strategy})
				var once atomic.Bool
				src.hookListed = func() {
					if once.CompareAndSwap(false, true) {
						if err := os.Rename(path, path+"-0001"); err != nil {
							t.Fatal(err)
						}
						writeFile(t, path, numbered("b", 0, 2))
					}
				}
				p := &rec{}
				r := startSource(t, src, lg, setup{procs: []*rec{p}})
				testutil.AdvanceUntil(t, "the opened file's lines", func() bool { return p.count() == 2 && r.feed().State == engine.StateCaughtUp })
				if err := os.Rename(path, path+"-0002"); err != nil {
					t.Fatal(err)
				}
				writeFile(t, path, numbered("c", 0, 2))
				want := slices.Concat(linesOf("b", 0, 2), linesOf("c", 0, 2))
				testutil.AdvanceUntil(t, "the next file's lines", func() bool {
					return p.count() >= len(want) && r.feed().State == engine.StateCaughtUp
				})
				if got, _ := p.got(); !slices.Equal(got, want) {
					t.Fatalf("got %q\nwant %q (the file rotated before the one opened is not read after it)", got, want)
				}
			})
		})
	}
}

// A file the source leaves is known by the bytes it read of it, not only
// by those it had when opened: a file opened empty, then written and
// rotated, was known by its identity alone, and once it was removed a
// later rotated file given its inode was taken for it and passed over
// (torture seed 1796284617677858357: two lines never read, every run
// lossless). Inode reuse is up to the file system, so the test checks
// what the source keeps of the file it left.
func TestAFileLeftIsKnownByTheBytesReadOfIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, "")
		writeFile(t, path, "")
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		src, lg := newSource(t, path, Options{Read: Earliest})
		p := &rec{}
		r := startSource(t, src, lg, setup{procs: []*rec{p}})
		synctest.Wait()
		appendFile(t, path, numbered("a", 0, 2))
		testutil.AdvanceUntil(t, "the first file's lines", func() bool { return p.count() == 2 })
		if err := os.Rename(path, path+"-0001"); err != nil {
			t.Fatal(err)
		}
		writeFile(t, path, numbered("b", 0, 1))
		testutil.AdvanceUntil(t, "the next file's line", func() bool { return p.count() == 3 && r.feed().State == engine.StateCaughtUp })
		k, ok := src.known[identity(fi)]
		if want := int64(len(numbered("a", 0, 2))); !ok || k.n != want {
			t.Fatalf("the file left is known by %d bytes (known %v), want the %d read of it", k.n, ok, want)
		}
	})
}
