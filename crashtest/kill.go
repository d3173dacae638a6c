package crashtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"time"

	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
)

// outlivedGrace is how long a run armed at a kill point may live on once
// it has committed the whole input before crashtest says the point was not
// reached and kills it.
const outlivedGrace = time.Second

// killLoop runs the crashed runs: K followed runs, each killed (after a
// random number of output lines, or at a random reach of --kill-at) and
// restarted, then a last run to the end. It returns every run's recording
// (a killed run may have left none: KillReport.NoRecording) and the --out
// file's line count after each kill.
func (s *setup) killLoop(ctx context.Context, rep *Report, p Progress) (stores []string, bounds []int64, err error) {
	cfg := s.cfg
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6b696c6c)) // "kill"
	// The kill moments, spread over the run: K output line counts of the
	// clean run's (killing after output lines, or at a point of the
	// outbox's delivery), or K input lines whose reach of the point kills.
	span := int64(len(s.want))
	if cfg.KillAt != "" && !outPoint(cfg.KillAt) {
		span = int64(cfg.Lines)
	}
	targets := make([]int64, cfg.Kills)
	for i := range targets {
		targets[i] = 1 + rng.Int64N(max(span-1, 1))
	}
	slices.Sort(targets)
	for k := 1; k <= cfg.Kills; k++ {
		storePath := s.path(fmt.Sprintf("run-%d%s", k, s.ext))
		logPath := s.path(fmt.Sprintf("run-%d.log", k))
		stores = append(stores, storePath)
		var kr KillReport
		if cfg.KillAt == "" {
			kr, err = s.killAtLines(ctx, storePath, logPath, targets[k-1], k, p)
		} else {
			p.Printf("kill %d of %d: running %s until %s", k, cfg.Kills, storePath, cfg.KillAt)
			kr, err = s.killAtPoint(ctx, s.runArgs(storePath, true), logPath, targets[k-1])
		}
		if err != nil {
			return nil, nil, err
		}
		if !kr.Reached && !kr.Idle {
			rep.Failures = append(rep.Failures, fmt.Sprintf("kill %d: the run outlived %s at %d (it committed the whole input and was killed %s later); see %s",
				k, cfg.KillAt, kr.Target, outlivedGrace, logPath))
		}
		kr.Run, kr.Store = k, storePath
		if kr.Outputs, err = countLines(s.outFile); err != nil {
			return nil, nil, err
		}
		if ptr, err := filesource.ReadPointer(s.pointer); err == nil {
			kr.Pointer = ptr.Offset
		}
		kr.Applied, kr.Offset = -1, -1
		switch {
		case s.durable && cfg.Workers > 1:
			if sts, err := s.workerStates(s.state); err == nil {
				kr.Applied, kr.Offset = 0, 0
				for _, st := range sts {
					kr.Applied += st.Applied
					kr.Offset = max(kr.Offset, st.Position.Offset)
				}
			}
			if err := s.checkPointerPrefix(rep, k, kr.Pointer); err != nil {
				return nil, nil, err
			}
		case s.durable:
			if st, err := apps.DurableStateOf(s.app, s.state); err == nil {
				kr.Applied, kr.Offset = st.Applied, st.Position.Offset
			}
		}
		rep.Kills = append(rep.Kills, kr)
		bounds = append(bounds, kr.Outputs)
	}
	// The last restart finishes the input and ends once settled.
	last := s.path(fmt.Sprintf("run-%d%s", cfg.Kills+1, s.ext))
	logPath := s.path(fmt.Sprintf("run-%d.log", cfg.Kills+1))
	stores = append(stores, last)
	rep.Last = last
	p.Printf("the last run: %s until settled", last)
	code, err := runChild(ctx, s.exe, s.runArgs(last, false), logPath)
	if err != nil {
		return nil, nil, err
	}
	if code != 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("the last run (%s) exited %d, want 0 (see %s)", last, code, logPath))
	}
	return stores, bounds, nil
}

// killAtLines runs kill k (no --kill-at): a followed run killed once the
// --out file holds target lines, and at least one more than before it
// (the outbox appends an output once its input is committed, each once:
// the file's length is the runs' progress) and the run has created its
// recording (a restart's outbox first delivers what the runs before it
// recorded, before the run creates anything: killed then, it would have
// recorded nothing). With every output of the clean run in the file, or
// the whole input committed, the run has nothing left to emit: it is
// killed once it has committed the input, an idle kill.
func (s *setup) killAtLines(ctx context.Context, storePath, logPath string, target int64, k int, p Progress) (KillReport, error) {
	lines0, err := countLines(s.outFile)
	if err != nil {
		return KillReport{}, err
	}
	target = max(target, lines0+1)
	idle, err := s.inputCommitted()
	if err != nil {
		return KillReport{}, err
	}
	if idle || lines0 >= int64(len(s.want)) {
		p.Printf("kill %d of %d: running %s until it committed the input (idle)", k, s.cfg.Kills, storePath)
		kr, err := s.killAtRun(ctx, s.runArgs(storePath, true), logPath, nil)
		kr.Idle = err == nil
		return kr, err
	}
	p.Printf("kill %d of %d: running %s until %d output lines", k, s.cfg.Kills, storePath, target)
	kr, err := s.killRun(ctx, s.runArgs(storePath, true), logPath, storePath, target)
	kr.Target, kr.Reached = target, true
	return kr, err
}

// outPoint reports whether a kill point is one of the outbox's delivery
// (its value the --out file's line count).
func outPoint(point string) bool {
	return point == killpoint.OutMarked || point == killpoint.OutWrite
}

// inputCommitted reports whether the crashed runs' pointer is at the end
// of the input: a restart has nothing left to read.
func (s *setup) inputCommitted() (bool, error) {
	ptr, err := filesource.ReadPointer(s.pointer)
	if err != nil {
		return false, nil // no pointer (yet): nothing committed
	}
	return ptr.Offset >= s.inputSize, nil
}

// killAtPoint runs one followed run armed to die at the reach of --kill-at
// that lands at input line target (or the next line the run has not
// committed yet), or, for a point of the outbox's delivery, at the batch
// that brings the --out file to target lines (or to one more than it
// holds). Points with a value are armed POINT@V: the store write
// and the rows written, reached once per batch of rows, die at the batch
// that holds that input (V: the input's sequence in the run); the
// pointer, which commits a varying number of lines per write, dies at its
// first write at or past the byte offset after that line; the state save,
// reached once per line or once per batch (--state-every), dies at the
// first save holding that line or a later one (V: the offset after it, at
// most that of the last line the state lacks, which a run saves at the
// latest); out-marked and out-write, reached once per batch the outbox
// delivers (its recovery's included: killed there, the run has not
// created its recording yet), die at the first batch after which the
// --out file holds V lines or more.
//
// A run with nothing left to reach its point with (idleRun: the pointer
// at the end of the input; for state-saved, the state holding every
// line; for the outbox's points, every output of the clean run in the
// --out file) is started unarmed and killed once it has committed the
// input: an idle kill, no failure.
func (s *setup) killAtPoint(ctx context.Context, args []string, logPath string, target int64) (KillReport, error) {
	before, err := s.committedLines()
	if err != nil {
		return KillReport{}, err
	}
	lines := max(target-before, 1)
	var arm string
	idle, err := s.inputCommitted()
	if err != nil {
		return KillReport{}, err
	}
	switch s.cfg.KillAt {
	case killpoint.OutMarked, killpoint.OutWrite:
		lines0, err := countLines(s.outFile)
		if err != nil {
			return KillReport{}, err
		}
		lines = max(target, lines0+1)
		idle = lines0 >= int64(len(s.want))
		arm = killpoint.ValueAt(s.cfg.KillAt, lines)
	case killpoint.StoreWrite, killpoint.RowsWritten:
		// Reached once per batch of rows, with the batch's highest input
		// sequence: the run's inputs are numbered from 1 at the pointer.
		arm = killpoint.ValueAt(s.cfg.KillAt, lines)
	case killpoint.PointerWritten:
		off, err := s.lineEnd(before + lines)
		if err != nil {
			return KillReport{}, err
		}
		arm = killpoint.ValueAt(s.cfg.KillAt, off)
	case killpoint.StateSaved:
		off, err := s.lineEnd(before + lines)
		if err != nil {
			return KillReport{}, err
		}
		last, err := s.lastUnapplied()
		if err != nil {
			return KillReport{}, err
		}
		idle = last == 0
		arm = killpoint.ValueAt(s.cfg.KillAt, min(off, last))
	}
	if idle {
		kr, err := s.killAtRun(ctx, args, logPath, nil)
		kr.Idle = err == nil
		return kr, err
	}
	kr, err := s.killAtRun(ctx, args, logPath, []string{killpoint.Env + "=" + arm})
	kr.Target = lines
	return kr, err
}

// lastUnapplied is the end offset of the last input line the crashed
// runs' state does not hold (0: it holds every line): a restart saves its
// state at that offset at the latest, and not at all when there is none
// (the lines it delivers again are skipped as applied: nothing to save).
// With workers, a line is held when its worker's state is at or past it.
func (s *setup) lastUnapplied() (int64, error) {
	if s.cfg.Workers > 1 {
		sts, err := s.workerStates(s.state)
		if err != nil {
			return 0, err
		}
		for i := len(s.lineEnds) - 1; i >= 0; i-- {
			if sts[s.lineWorker[i]].Position.Offset < s.lineEnds[i] {
				return s.lineEnds[i], nil
			}
		}
		return 0, nil
	}
	st, err := apps.DurableStateOf(s.app, s.state)
	if err != nil {
		return 0, err
	}
	if st.Position.Offset < s.inputSize {
		return s.inputSize, nil
	}
	return 0, nil
}

// lineEnd is the byte offset just after input line n (from 1), or the
// input's size when it has fewer lines.
func (s *setup) lineEnd(n int64) (int64, error) {
	b, err := os.ReadFile(s.input)
	if err != nil {
		return 0, fileErr(s.input, err)
	}
	off := 0
	for ; n > 0; n-- {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			return int64(len(b)), nil
		}
		off += i + 1
	}
	return int64(off), nil
}

// committedLines counts the input lines below the crashed runs' pointer
// (0 before the first run).
func (s *setup) committedLines() (int64, error) {
	ptr, err := filesource.ReadPointer(s.pointer)
	if err != nil {
		return 0, nil // no pointer (yet): from line 0
	}
	f, err := os.Open(s.input)
	if err != nil {
		return 0, fileErr(s.input, err)
	}
	defer f.Close()
	b := make([]byte, min(ptr.Offset, s.inputSize))
	if _, err := io.ReadFull(f, b); err != nil {
		return 0, &FileError{Path: s.input, Err: err}
	}
	return int64(bytes.Count(b, []byte{'\n'})), nil
}

// killAtRun starts a followed run armed (env: killpoint.Env and its
// value; nil for an idle run) to die at the kill point, and waits for it
// to die by SIGKILL. A run that commits the whole input and lives on
// outlivedGrace more outlived the point: it is killed and the report says
// the point was not reached (for out-marked, idle instead when --out then
// holds every output: what was left was the batch the kill before it
// interrupted, which recovery finishes without a new mark).
func (s *setup) killAtRun(ctx context.Context, args []string, logPath string, env []string) (KillReport, error) {
	var kr KillReport
	ch, err := startChild(s.exe, args, env, logPath)
	if err != nil {
		return kr, err
	}
	defer ch.close()
	start, exited, kill, deadline, tick := ch.start, ch.exited, ch.kill, ch.deadline, ch.tick
	var outlived <-chan time.Time // armed once the whole input is committed
	for {
		select {
		case err := <-exited:
			kr.AfterMs = time.Since(start).Milliseconds()
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
					kr.Reached = true
					return kr, nil
				}
			}
			b, _ := os.ReadFile(logPath)
			return kr, fmt.Errorf("crashtest: the run exited (%v) before it reached %s; %s: %s", err, s.cfg.KillAt, logPath, bytes.TrimSpace(b))
		case <-ctx.Done():
			kill()
			return kr, ctx.Err()
		case <-deadline.C:
			kill()
			return kr, fmt.Errorf("crashtest: the run neither reached %s nor committed the input in 2 minutes; see %s", s.cfg.KillAt, logPath)
		case <-outlived:
			kill()
			kr.AfterMs = time.Since(start).Milliseconds()
			if s.cfg.KillAt == killpoint.OutMarked && env != nil {
				// out-marked is reached once a batch is marked: a restart
				// whose outbox only finished the batch the kill before
				// interrupted (marked then, delivered now, no new mark)
				// and found nothing past it had nothing left to reach
				// the point with: idle, once --out holds every output.
				n, err := countLines(s.outFile)
				if err != nil {
					return kr, err
				}
				kr.Idle = n >= int64(len(s.want))
			}
			return kr, nil
		case <-tick.C:
			if outlived == nil {
				if ptr, err := filesource.ReadPointer(s.pointer); err == nil && ptr.Offset >= s.inputSize {
					outlived = time.After(outlivedGrace)
				}
			}
		}
	}
}

// killRun starts a followed run, waits until the --out file holds target
// lines and the run's recording (storePath) exists, kills it with SIGKILL
// and waits for it to be gone.
func (s *setup) killRun(ctx context.Context, args []string, logPath, storePath string, target int64) (KillReport, error) {
	var kr KillReport
	outFile := s.outFile
	ch, err := startChild(s.exe, args, nil, logPath)
	if err != nil {
		return kr, err
	}
	defer ch.close()
	start, exited, kill, deadline, tick := ch.start, ch.exited, ch.kill, ch.deadline, ch.tick
	lc := &lineCounter{path: outFile}
	for {
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logPath)
			return kr, fmt.Errorf("crashtest: the run exited (%v) before it was killed; %s: %s", err, logPath, bytes.TrimSpace(b))
		case <-ctx.Done():
			kill()
			return kr, ctx.Err()
		case <-deadline.C:
			kill()
			n, _ := countLines(outFile)
			return kr, fmt.Errorf("crashtest: the run did not reach %d output lines in 2 minutes (%d; its recording created: %v); see %s",
				target, n, recorded(storePath), logPath)
		case <-tick.C:
		}
		n, err := lc.count()
		if err != nil {
			kill()
			return kr, err
		}
		if n >= target && recorded(storePath) {
			kill()
			kr.AfterMs = time.Since(start).Milliseconds()
			return kr, nil
		}
	}
}

// child is a running child process of crashtest, its output going to a
// log file. It is owned by the goroutine that started it.
type child struct {
	cmd      *exec.Cmd
	log      *os.File
	start    time.Time
	exited   chan error   // the result of Wait, once
	deadline *time.Timer  // fires when the child has run for 2 minutes: a kill loop gives up
	tick     *time.Ticker // every millisecond: a kill loop looks at the child's files
}

// startChild starts exe with args, env added to this process's
// environment, standard output and error to logPath.
func startChild(exe string, args, env []string, logPath string) (*child, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fileErr(logPath, err)
	}
	cmd := exec.Command(exe, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("crashtest: starting %s: %w", exe, err)
	}
	ch := &child{cmd: cmd, log: logf, start: time.Now(), exited: make(chan error, 1),
		deadline: time.NewTimer(2 * time.Minute), tick: time.NewTicker(time.Millisecond)}
	go func() { ch.exited <- cmd.Wait() }()
	return ch, nil
}

// kill kills the child with SIGKILL and waits for it to be gone.
func (ch *child) kill() {
	_ = ch.cmd.Process.Kill()
	<-ch.exited
}

func (ch *child) close() {
	ch.deadline.Stop()
	ch.tick.Stop()
	ch.log.Close()
}

// runChild runs the binary to its end and returns its exit code.
func runChild(ctx context.Context, exe string, args []string, logPath string) (int, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return 0, fileErr(logPath, err)
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("crashtest: running %s: %w", exe, err)
	}
	return 0, nil
}
