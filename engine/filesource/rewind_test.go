package filesource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// backRig runs path's committed read (SkipCompleted honoured) for one
// group per name, each with its handledLines, in a synctest bubble.
type backRig struct {
	t     *testing.T
	path  string
	src   *Source
	e     *engine.Engine
	hs    map[string]*handledLines
	names []string
}

func newBackRig(t *testing.T, path string, hook func(Pointer), hs map[string]*handledLines, names ...string) *backRig {
	t.Helper()
	return newBackRigOpts(t, path, Options{}, hook, hs, names...)
}

// newBackRigOpts is newBackRig reading with opts.
func newBackRigOpts(t *testing.T, path string, opts Options, hook func(Pointer), hs map[string]*handledLines, names ...string) *backRig {
	t.Helper()
	opts.Logger = testutil.Logger(t)
	src, err := New(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	src.hookWrite = hook
	cfg := engine.Config{
		Feeds:        []engine.FeedConfig{{Name: "in", Source: src, QueueSize: 64, SkipCompleted: true}},
		DrainTimeout: time.Second,
		KillAbandon:  true,
		Logger:       testutil.Logger(t),
	}
	for _, n := range names {
		p, _ := hs[n].New()
		cfg.Groups = append(cfg.Groups, engine.GroupConfig{Name: n, Feeds: []string{"in"},
			Processors: []engine.ProcessorConfig{{Name: n + "-p", Processor: p}}})
	}
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, h := range hs {
			if h.gate != nil {
				h.gate.Open()
			}
		}
		e.Stop(context.Background())
	})
	return &backRig{t: t, path: path, src: src, e: e, hs: hs, names: names}
}

// lines returns n fresh handledLines per name.
func freshLines(names ...string) map[string]*handledLines {
	hs := map[string]*handledLines{}
	for _, n := range names {
		hs[n] = &handledLines{}
	}
	return hs
}

// generation is group's live queue's generation.
func (r *backRig) generation(group string) int64 {
	r.t.Helper()
	for _, s := range r.e.Feed("in").Status().Subscribers {
		if s.Queue == group+"/in" && !s.Removed {
			return s.Generation
		}
	}
	r.t.Fatalf("no queue of group %q", group)
	return 0
}

// seekBack fences group and seeks it back to seq: a dry run first, whose
// plan the seek must do.
func (r *backRig) seekBack(group string, seq int64) (engine.SeekPlan, error) {
	r.t.Helper()
	if err := r.e.Fence(group); err != nil {
		r.t.Fatal(err)
	}
	gen := r.generation(group)
	dry, err := r.e.Seek("in", group, gen, engine.SeekTarget{Seq: seq}, engine.SeekOptions{DryRun: true, Reason: "recompute"})
	if err != nil {
		return dry, err
	}
	p, err := r.e.Seek("in", group, gen, engine.SeekTarget{Seq: seq}, engine.SeekOptions{Reason: "recompute"})
	if err != nil {
		r.t.Fatalf("the dry run was accepted, the seek refused: %v", err)
	}
	dry.Replacement, dry.DryRun = p.Replacement, false
	if dry != p {
		r.t.Fatalf("the dry run planned %+v, the seek did %+v", dry, p)
	}
	return p, nil
}

// kill kills the run (abandoning what is held) and stops it.
func (r *backRig) kill() {
	r.t.Helper()
	if err := r.e.Kill("drill"); err != nil {
		r.t.Fatal(err)
	}
	for _, h := range r.hs {
		if h.gate != nil {
			h.gate.Open()
		}
	}
	if err := r.e.Stop(context.Background()); err != nil {
		r.t.Fatalf("Stop after Kill: %v", err)
	}
}

// restart runs path again to settled with fresh processors for names and
// returns what each handled and the feed's status.
func restart(t *testing.T, path string, names ...string) (map[string][]string, engine.FeedStatus) {
	t.Helper()
	hs := freshLines(names...)
	r := newBackRig(t, path, nil, hs, names...)
	var st engine.Status
	testutil.AdvanceUntil(t, "the restart settled", func() bool { st = r.e.Status(); return st.Settled })
	if err := r.e.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, n := range names {
		got[n] = hs[n].got()
	}
	return got, st.Feeds[0]
}

// through is the line numbers from..to of lines8, sorted as handledLines
// sorts them.
func through(from, to int) []string { return slices.Clone(lines8[from-1 : to]) }

func lineOffset(n int) int64 { return int64(n) * lineLen }

// allHandled waits until each group handled the eight lines and the
// pointer is at their end.
func (r *backRig) allHandled() {
	r.t.Helper()
	testutil.AdvanceUntil(r.t, "every group handled the 8 lines, the pointer at their end", func() bool {
		for _, h := range r.hs {
			if len(h.got()) != 8 {
				return false
			}
		}
		return readPointer(r.t, r.path+".ptr").Offset == lineOffset(8)
	})
}

// TestABackwardsSeekReadsTheFileAgainForThatGroupOnly (Seek backwards,
// the file source as an engine.Rewinder): a seek of fast back to line 3
// reads lines 4-8 of the file again, handed to fast only once resumed;
// slow is handed nothing again (counted: alreadyCompleted 5), nothing is
// lost, and the pointer, lowered to line 3 by the move back, ends at the
// file's end again once fast completed them.
func TestABackwardsSeekReadsTheFileAgainForThatGroupOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("line", 1, 9))
		r := newBackRig(t, path, nil, freshLines("fast", "slow"), "fast", "slow")
		r.allHandled()
		p, err := r.seekBack("fast", 3)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Redelivery || p.Before != 8 || p.After != 3 || p.FirstSeq != 4 || p.LastSeq != 8 || p.Redelivered != 5 {
			t.Fatalf("plan %+v: want a re-delivery of seqs 4-8", p)
		}
		testutil.AdvanceUntil(t, "the move back applied: the pointer after line 3", func() bool {
			return readPointer(t, path+".ptr").Offset == lineOffset(3)
		})
		if got := progressOf(t, path+".ptr", "slow"); got != lineOffset(8) {
			t.Errorf("slow's progress %d after the move back, want %d (the 8 lines it completed)", got, lineOffset(8))
		}
		if got := len(r.hs["fast"].got()); got != 8 {
			t.Fatalf("fast handled %d lines before its resume, want 8", got)
		}
		if err := r.e.Resume("in", "fast", p.Replacement); err != nil {
			t.Fatal(err)
		}
		testutil.AdvanceUntil(t, "fast handled lines 4-8 again, the pointer at the end again", func() bool {
			return len(r.hs["fast"].got()) == 13 && readPointer(t, path+".ptr").Offset == lineOffset(8)
		})
		if got, want := r.hs["fast"].got(), slices.Sorted(slices.Values(append(through(1, 8), through(4, 8)...))); !slices.Equal(got, want) {
			t.Errorf("fast handled %q, want %q", got, want)
		}
		if got, want := r.hs["slow"].got(), through(1, 8); !slices.Equal(got, want) {
			t.Errorf("slow handled %q, want %q (nothing again)", got, want)
		}
		fs := r.e.Feed("in").Status()
		completed := map[string]int64{}
		for _, s := range fs.Subscribers {
			if !s.Removed {
				completed[strings.TrimSuffix(s.Queue, "/in")] = s.AlreadyCompleted
			}
		}
		if completed["slow"] != 5 || completed["fast"] != 0 || !fs.Lossless {
			t.Errorf("alreadyCompleted %v (want slow 5, fast 0), lossless %v", completed, fs.Lossless)
		}
	})
}

// TestTheMoveBackIsOneDurableWriteBeforeAnyReDelivery (Seek backwards,
// the file source): the move back is one whole-file write (a temporary
// file renamed: a kill leaves the file before it or after it) holding the
// offset after line 3, slow's progress (the 8 lines) and none of fast's;
// a restart from the file after it, before fast was handed anything
// again, hands fast lines 4-8 and slow nothing; from the file before it,
// each group nothing (the move back was not made).
func TestTheMoveBackIsOneDurableWriteBeforeAnyReDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("line", 1, 9))
		var writes []Pointer
		var before []byte
		var armed atomic.Bool
		hook := func(p Pointer) {
			if armed.Load() && before == nil { // the move back's write
				b, err := os.ReadFile(path + ".ptr")
				if err != nil {
					t.Fatal(err)
				}
				before = b
			}
			writes = append(writes, p)
		}
		r := newBackRig(t, path, hook, freshLines("fast", "slow"), "fast", "slow")
		r.allHandled()
		n := len(writes)
		armed.Store(true)
		if _, err := r.seekBack("fast", 3); err != nil {
			t.Fatal(err)
		}
		testutil.AdvanceUntil(t, "the move back applied", func() bool { return readPointer(t, path+".ptr").Offset == lineOffset(3) })
		synctest.Wait()
		if got := writes[n:]; len(got) != 1 || got[0].Offset != lineOffset(3) {
			t.Fatalf("the move back wrote %+v, want one header write at %d", got, lineOffset(3))
		}
		after, err := os.ReadFile(path + ".ptr")
		if err != nil {
			t.Fatal(err)
		}
		gs, err := ReadGroupProgress(path + ".ptr")
		if err != nil {
			t.Fatal(err)
		}
		if want := []GroupProgress{{Group: "slow", Epoch: readPointer(t, path+".ptr").Epoch, Offset: lineOffset(8)}}; !slices.Equal(gs, want) {
			t.Errorf("the pointer file holds the progress %+v, want %+v", gs, want)
		}
		r.kill()

		for _, c := range []struct {
			name       string
			file       []byte
			fast, slow []string
		}{
			{"after the write", after, through(4, 8), nil},
			{"before the write", before, nil, nil},
		} {
			if err := os.WriteFile(path+".ptr", c.file, 0o644); err != nil {
				t.Fatal(err)
			}
			got, fs := restart(t, path, "fast", "slow")
			if !slices.Equal(got["fast"], c.fast) || !slices.Equal(got["slow"], c.slow) || !fs.Lossless {
				t.Errorf("a restart from the pointer %s handed fast %q (want %q), slow %q (want %q); lossless %v",
					c.name, got["fast"], c.fast, got["slow"], c.slow, fs.Lossless)
			}
		}
	})
}

// TestABackwardsSeekKeepsASlowerGroupsLines (Seek backwards, the file
// source): with slow holding the commit at line 3 (its line 4 held), a
// seek of fast back to line 6 keeps the pointer at line 3 (lower) and
// sets fast's progress at line 6; a kill, then a restart, hands fast
// lines 7-8 and slow lines 4-8: nothing slow did not complete is passed.
func TestABackwardsSeekKeepsASlowerGroupsLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("line", 1, 9))
		hs := freshLines("fast")
		hs["slow"] = &handledLines{blocked: lines8[3], gate: testutil.NewGate(t)}
		r := newBackRig(t, path, nil, hs, "fast", "slow")
		testutil.AdvanceUntil(t, "fast handled 8 lines, slow 3, the pointer after line 3", func() bool {
			return len(hs["fast"].got()) == 8 && len(hs["slow"].got()) == 3 && readPointer(t, path+".ptr").Offset == lineOffset(3)
		})
		if _, err := r.seekBack("fast", 6); err != nil {
			t.Fatal(err)
		}
		testutil.AdvanceUntil(t, "fast's progress at line 6", func() bool { return progressOf(t, path+".ptr", "fast") == lineOffset(6) })
		if p := readPointer(t, path+".ptr"); p.Offset != lineOffset(3) {
			t.Errorf("the pointer at %d after the move back, want %d (slow's, lower)", p.Offset, lineOffset(3))
		}
		r.kill()
		got, _ := restart(t, path, "fast", "slow")
		if !slices.Equal(got["fast"], through(7, 8)) || !slices.Equal(got["slow"], through(4, 8)) {
			t.Errorf("the restart handed fast %q (want %q), slow %q (want %q)", got["fast"], through(7, 8), got["slow"], through(4, 8))
		}
	})
}

// TestABackwardsSeekTheFileSourceCannotApplyIsRefusedAndChangesNothing
// (Seek backwards, the file source, engine.RewindChecker): a group whose
// progress the pointer file cannot keep (a name over GroupNameMax bytes,
// more groups than GroupSlots) is refused through Engine.Seek with
// ErrSeekUnsupported wrapping ErrRewind, the pointer file and the group's
// generation unchanged; the check itself refuses a target of another
// epoch or of a keyed position, and one while the source reads a file
// rotated after the pointer's (its lines held).
func TestABackwardsSeekTheFileSourceCannotApplyIsRefusedAndChangesNothing(t *testing.T) {
	long := strings.Repeat("g", GroupNameMax+1)
	var many []string
	for i := range GroupSlots + 1 {
		many = append(many, fmt.Sprintf("g%02d", i))
	}
	for _, c := range []struct {
		name   string
		groups []string
	}{
		{"another group's name is too long", []string{"fast", long}},
		{"the sought group's name is too long", []string{long, "slow"}},
		{"more groups than slots", many},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := input(t, numbered("line", 1, 9))
				r := newBackRig(t, path, nil, freshLines(c.groups...), c.groups...)
				r.allHandled()
				synctest.Wait()
				ptr, err := os.ReadFile(path + ".ptr")
				if err != nil {
					t.Fatal(err)
				}
				gen := r.generation(c.groups[0])
				if _, err := r.seekBack(c.groups[0], 3); !errors.Is(err, engine.ErrSeekUnsupported) || !errors.Is(err, ErrRewind) {
					t.Fatalf("seek: %v, want ErrSeekUnsupported wrapping ErrRewind", err)
				}
				time.Sleep(10 * time.Millisecond) // polls
				synctest.Wait()
				now, err := os.ReadFile(path + ".ptr")
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(now, ptr) || r.generation(c.groups[0]) != gen {
					t.Errorf("the refused seek changed the pointer file or the generation (%d, was %d)", r.generation(c.groups[0]), gen)
				}
			})
		})
	}

	t.Run("the check", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			path := input(t, numbered("line", 1, 9))
			hs := freshLines("fast")
			hs["slow"] = &handledLines{blocked: lines8[7], gate: testutil.NewGate(t)}
			r := newBackRig(t, path, nil, hs, "fast", "slow")
			testutil.AdvanceUntil(t, "the pointer after line 7", func() bool { return readPointer(t, path+".ptr").Offset == lineOffset(7) })
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
			epoch := readPointer(t, path+".ptr").Epoch
			at := func(off int64) engine.Rewind {
				return engine.Rewind{Group: "fast", To: engine.Commit{Seq: 3, Epoch: epoch, Position: core.Position{Offset: off}}, Others: []string{"slow"}}
			}
			other := at(lineOffset(3))
			other.To.Epoch++
			keyed := at(lineOffset(3))
			keyed.To.Position.Key = "k"
			for _, c := range []struct {
				name string
				r    engine.Rewind
				ok   bool
			}{
				{"a line of the file read", at(lineOffset(3)), true},
				{"the last line published", at(lineOffset(8)), true},
				// Past the last line published: one an earlier move back
				// has not read again yet (Rewind would refuse it).
				{"ahead of where the file is read", at(lineOffset(8) + 1), false},
				{"another epoch", other, false},
				{"a keyed position", keyed, false},
			} {
				if err := r.src.com.CheckRewind(c.r); (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrRewind)) {
					t.Errorf("%s: CheckRewind %v, want accepted %v", c.name, err, c.ok)
				}
			}
			// The file rotated, and a new one at the path: read once every
			// line of the pointer's file is committed (held meanwhile).
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
			writeFile(t, path, numbered("next", 1, 3))
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
			if err := r.src.com.CheckRewind(at(lineOffset(3))); !errors.Is(err, ErrRewind) {
				t.Errorf("a line of the rotated file, the source holding the next: CheckRewind %v, want ErrRewind", err)
			}
		})
	})
}

// TestAnOversizedLineReadAgainIsReportedLostOnce (Seek backwards, the
// file source): a move back over a line longer than MaxLine reads it
// again, skipped as before, and the feed counts the loss once.
func TestAnOversizedLineReadAgainIsReportedLostOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := input(t, numbered("line", 1, 3)+strings.Repeat("x", 40)+"\n"+numbered("line", 4, 6))
		hs := freshLines("g")
		r := newBackRigOpts(t, path, Options{MaxLine: 20}, nil, hs, "g")
		testutil.AdvanceUntil(t, "the 4 lines handled", func() bool { return len(hs["g"].got()) == 4 })
		p, err := r.seekBack("g", 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.e.Resume("in", "g", p.Replacement); err != nil {
			t.Fatal(err)
		}
		testutil.AdvanceUntil(t, "lines 2-5 handled again", func() bool { return len(hs["g"].got()) == 7 })
		time.Sleep(10 * time.Millisecond) // polls
		synctest.Wait()
		if got := r.e.Feed("in").Status().Losses[LossOversized]; got != 1 {
			t.Errorf("the feed counts %d oversized lines, want 1 (the line read again is the same loss)", got)
		}
	})
}

// TestAnAcceptedMoveBackPinsTheFileUntilThePollThatAppliesIt (Seek
// backwards, the file source): once CheckRewind accepted a move back, the
// run leaves not the file it reads (a rotation, a rewrite handled: leaving
// says no, and the file stays one a move back can read again) until a poll
// after it; then it may, and the file is no longer one to move back in.
func TestAnAcceptedMoveBackPinsTheFileUntilThePollThatAppliesIt(t *testing.T) {
	s := &Source{reading: runState{ok: true, epoch: 7}}
	s.checks.Add(1) // CheckRewind accepted one
	if s.leaving() || !s.reading.ok {
		t.Fatalf("pinned: leaving, or the file no longer readable again (%+v)", s.reading)
	}
	s.seen = s.checks.Load() // the poll that applies it
	if !s.leaving() || s.reading.ok {
		t.Fatalf("after the poll: not leaving, or the file still readable again (%+v)", s.reading)
	}
}
