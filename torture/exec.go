package torture

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// runTimeout bounds a run that should end by itself: past it the run is
// killed and the scenario fails (a hang).
const runTimeout = 60 * time.Second

// outcome is what one `blackbox run` of a scenario did. A plain value.
type outcome struct {
	index   int // 1-based
	run     runSpec
	args    []string
	store   string // the recording's file name ("" when refused before creating it)
	exit    int    // -1: killed by a signal
	signal  syscall.Signal
	output  string
	status  *runStatus // the --status file, when the run wrote it
	workers int        // the run's worker count
	refused bool       // exit 2: refused before any work
	// refusedChanged lists the files a refused run changed (none may be).
	refusedChanged []string
	faulted        bool     // a fault hit it (disk full, state directory)
	member         *outcome // Kafka: the second member that ran beside it
	took           time.Duration
	ctl            *ctlRun // what the harness did to its window (run.Control)
}

// killed reports whether a signal ended the run (SIGKILL, or a SIGTERM
// that came before the run could handle it).
func (o *outcome) killed() bool { return o.exit < 0 }

// runStatus is the part of `run --status` the oracle reads.
type runStatus struct {
	Settled  bool `json:"settled"`
	Lossless bool `json:"lossless"`
	Feeds    []struct {
		Failures           int64 `json:"failures"`
		CompletionFailures int64 `json:"completionFailures"`
	} `json:"feeds"`
	// Outbox is --out's: Undelivered counts the outputs recorded and
	// committed that it could not deliver (the run stopped delivering:
	// exit 3 whatever the engine says).
	Outbox *struct {
		Undelivered int64 `json:"undelivered"`
	} `json:"outbox"`
}

// failed reports whether the run's app failed an item or a completion.
func (st *runStatus) failed() bool {
	for _, f := range st.Feeds {
		if f.Failures > 0 || f.CompletionFailures > 0 {
			return true
		}
	}
	return false
}

// scenarioRun executes one scenario in dir. Not safe for concurrent use.
type scenarioRun struct {
	s      scenarioSpec
	cfg    Config
	dir    string
	r      *rand.Rand
	gen    *lineGen
	file   *fileInput
	kafka  *kafkaInput
	runs   []*outcome
	ran    bool     // a run was not refused: the input is the runs' own
	events []string // what happened, for the failure report
}

func (sr *scenarioRun) logf(format string, args ...any) {
	sr.events = append(sr.events, fmt.Sprintf(format, args...))
}

// keyOf is the app's key of a line (its first field; a ledger transfer's
// debited account), as the apps key their workers.
func keyOf(text string) string {
	fs := strings.Split(text, ",")
	if fs[0] == "transfer" && len(fs) > 1 {
		return fs[1]
	}
	return fs[0]
}

func (sr *scenarioRun) setup(ctx context.Context) error {
	sr.gen = newLineGen(&sr.s)
	sr.r = rand.New(rand.NewPCG(sr.s.Seed, 0xe8ec))
	if sr.s.Source == "kafka" {
		k, err := newKafkaInput(sr.dir, sr.s.Partitions, sr.gen, keyOf)
		if err != nil {
			return err
		}
		sr.kafka = k
		return k.produce(ctx, sr.gen.gen(sr.s.Lines))
	}
	sr.file = &fileInput{dir: sr.dir, path: filepath.Join(sr.dir, "in.txt"), gen: sr.gen}
	return sr.file.appendLines(sr.gen.gen(sr.s.Lines))
}

func (sr *scenarioRun) close() {
	if sr.kafka != nil {
		sr.kafka.close()
	}
}

// apply does op to the input.
func (sr *scenarioRun) apply(ctx context.Context, op inputOp) error {
	if sr.kafka != nil {
		return sr.kafka.apply(ctx, op, sr.committedUpTo(ctx))
	}
	return sr.file.apply(op)
}

// committedUpTo reads the group's committed offsets once, for an
// operation that needs them: a partition's, or -1 when the group
// committed none for it.
func (sr *scenarioRun) committedUpTo(ctx context.Context) func(int32) int64 {
	var offs map[int32]int64
	return func(p int32) int64 {
		if offs == nil {
			var err error
			if offs, err = sr.kafka.committed(ctx); err != nil {
				offs = map[int32]int64{}
			}
		}
		if o, ok := offs[p]; ok {
			return o
		}
		return -1
	}
}

const (
	stateFile = "st.json"
	outFile   = "out.jsonl"
)

// args is the command line of run i (1-based).
func (sr *scenarioRun) args(i int, run runSpec, member bool) (args []string, store string) {
	s := sr.s
	ext := ".csv"
	if run.Format == "sqlite" {
		ext = ".db"
	}
	name := fmt.Sprintf("run-%d", i)
	out := outFile
	if member {
		name += "-m2"
		out = fmt.Sprintf("out-m2-%d.jsonl", i)
	}
	store = name + ext
	app := s.App
	args = []string{"run", "--app", app, "--store", store, "--out", out, "--status", name + ".status.json"}
	if s.OutFormat != "" {
		args = append(args, "--out-format", s.OutFormat)
	}
	if sr.kafka != nil {
		// A killed member's partitions move within its session: a short
		// one keeps a scenario's restarts quick.
		args = append(args, "--kafka", sr.kafka.addr(), "--topic", sr.kafka.topic, "--group", sr.kafka.group,
			"--session-timeout", kafkaSession.String())
	} else {
		args = append(args, "--input", "in.txt")
	}
	if s.State {
		args = append(args, "--state", stateFile)
		if run.StateEvery > 0 {
			args = append(args, "--state-every", strconv.Itoa(run.StateEvery))
		}
		if run.StateInterval > 0 {
			args = append(args, "--state-interval", run.StateInterval.String())
		}
	}
	if run.Workers > 1 {
		args = append(args, "--workers", strconv.Itoa(run.Workers))
		if run.Order != "" {
			args = append(args, "--order", run.Order)
		}
		if run.MaxGap > 0 {
			args = append(args, "--max-gap", strconv.Itoa(run.MaxGap))
		}
	}
	if run.Journal {
		args = append(args, "--journal")
	}
	if run.Follow || member {
		args = append(args, "--follow")
	}
	if run.Delay > 0 {
		args = append(args, "--delay", run.Delay.String())
	}
	if run.Queue > 0 {
		args = append(args, "--queue", strconv.Itoa(run.Queue))
	}
	if run.Policy == "drop" {
		args = append(args, "--policy", "drop", "--spin", "0s")
	}
	if s.Oversize {
		args = append(args, "--max-line", strconv.Itoa(maxLineBytes))
	}
	if len(run.Control) > 0 && !member {
		args = append(args, "--listen", "127.0.0.1:0", "--control-token-file", ctlTokenFile)
	}
	switch run.Alias {
	case "pointer":
		args = append(args, "--pointer", stateFile+"#w1")
	case "status":
		args = append(args, "--status", stateFile+"#w0")
	}
	return args, store
}

// child is a started `blackbox run`.
type child struct {
	cmd  *exec.Cmd
	out  syncBuffer // its stdout and stderr
	done chan struct{}
	err  error
}

// syncBuffer is a buffer a child writes while the harness reads it. Safe
// for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func (sr *scenarioRun) start(args []string, env []string, fsize int64) (*child, error) {
	bin := sr.cfg.Binary
	if fsize > 0 {
		pl, err := exec.LookPath("prlimit")
		if err != nil {
			return nil, fmt.Errorf("torture: the disk-full fault needs prlimit (util-linux): %w", err)
		}
		args = append([]string{"--fsize=" + strconv.FormatInt(fsize, 10), "--", bin}, args...)
		bin = pl
	}
	c := &child{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	c.cmd.Dir = sr.dir
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// atWork waits until the run's recording exists (the run passed its
// checks and locks and is at work) and reports true, or until the run
// ended and reports false.
func (sr *scenarioRun) atWork(c *child, store string) bool {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		if _, err := os.Stat(store); err == nil {
			return true
		}
		select {
		case <-c.done:
			_, err := os.Stat(store)
			return err == nil
		case <-t.C:
		}
	}
}

// exit reads how the child ended: its code, or -1 and the signal.
func (c *child) exit() (int, syscall.Signal) {
	var ee *exec.ExitError
	if errors.As(c.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1, ws.Signal()
		}
		return ee.ExitCode(), 0
	}
	if c.err != nil {
		return -2, 0
	}
	return 0, 0
}

func (c *child) signal(sig syscall.Signal) {
	select {
	case <-c.done:
	default:
		c.cmd.Process.Signal(sig)
	}
}

// wait waits for the child up to d; false if it is still running.
func (c *child) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
		return false
	}
}

// doRun runs run i of the scenario: the operations while stopped, the
// fault, the child, the operations while it runs, its end.
func (sr *scenarioRun) doRun(ctx context.Context, i int, run runSpec) (*outcome, error) {
	if err := sr.applyBefore(ctx, i, run); err != nil {
		return nil, err
	}
	args, store := sr.args(i, run, false)
	o := &outcome{index: i, run: run, args: args, store: store, workers: max(run.Workers, 1)}
	var env []string
	if run.End.Kind == endKillAt {
		env = append(env, fmt.Sprintf("BLACKBOX_KILL_AT=%s:%d", run.End.Point, run.End.N))
	}
	if len(run.Control) > 0 {
		if err := sr.writeTokens(); err != nil {
			return nil, err
		}
	}
	release, err := sr.prepareFault(run)
	if err != nil {
		return nil, err
	}
	defer release()
	before, err := hashFiles(sr.dir, "in.txt.ptr", stateFile, outFile, "run-")
	if err != nil {
		return nil, err
	}
	sr.logf("run %d: blackbox %s%s", i, strings.Join(args, " "), envNote(env, run.Fault))
	c, err := sr.start(args, env, run.Fault.Bytes)
	if err != nil {
		return nil, err
	}
	began := time.Now()
	restore := func() {}
	if run.Fault.Kind == faultStateDir {
		restore = sr.stateDirFault(c, run)
	}
	member, err := sr.startMember(i, run, o, c)
	if err != nil {
		return nil, err
	}
	if sr.file != nil {
		// A run is a first one when no pointer names a file: no run
		// before it wrote one (it may have been killed before it did,
		// torture seed 1796281376933206065), so lines rotated away before
		// it opened the path are not its to know.
		sr.file.running, sr.file.fresh = true, !sr.ran || !sr.file.pointerNamesFile()
		defer func() { sr.file.running, sr.file.fresh = false, false }()
	}
	if err := sr.applyDuring(ctx, i, run, c, store); err != nil {
		return nil, err
	}
	if len(run.Control) > 0 {
		o.ctl = sr.control(ctx, i, run, c)
	}
	if member != nil {
		sr.stopMember(i, member, o)
	}
	if o.ctl == nil || !o.ctl.killed { // a run killed by its operator ends by itself
		endRun(run, c)
	}
	if !sr.waitRun(ctx, c) {
		c.signal(syscall.SIGKILL)
		<-c.done
		restore()
		if sr.kafka != nil && sr.kafka.ghosts(ctx) > 0 {
			return nil, &ghostError{run: i}
		}
		return nil, &hangError{run: i, args: args, out: c.out.String()}
	}
	restore()
	o.took = time.Since(began)
	if err := sr.collect(o, c, before); err != nil {
		return nil, err
	}
	sr.logf("run %d: exit %s after %s", i, o.exitText(), o.took.Round(time.Millisecond))
	return o, nil
}

// applyBefore applies the operations of run i while no run runs; those
// that are not appends wait until a run has read the input (before, it is
// not yet the runs' to lose).
func (sr *scenarioRun) applyBefore(ctx context.Context, i int, run runSpec) error {
	for _, op := range run.Before {
		if op.Kind != opAppend && !sr.ran {
			// No run has read the input yet: it is not yet theirs to lose.
			sr.logf("run %d: before: %s %d skipped: no run has read the input yet", i, op.Kind, op.N)
			continue
		}
		sr.logf("run %d: before: %s %d", i, op.Kind, op.N)
		if err := sr.apply(ctx, op); err != nil {
			return fmt.Errorf("run %d: %s: %w", i, op.Kind, err)
		}
	}
	return nil
}

// startMember starts run i's second member of the Kafka group, if it has
// one, a moment after c, and sets o.member; on an error it kills c.
func (sr *scenarioRun) startMember(i int, run runSpec, o *outcome, c *child) (*child, error) {
	if !run.Member {
		return nil, nil
	}
	margs, mstore := sr.args(i, run, true)
	o.member = &outcome{index: i, run: run, args: margs, store: mstore, workers: max(run.Workers, 1)}
	time.Sleep(time.Duration(sr.r.IntN(100)) * time.Millisecond)
	sr.logf("run %d: second member: blackbox %s", i, strings.Join(margs, " "))
	member, err := sr.start(margs, nil, 0)
	if err != nil {
		c.signal(syscall.SIGKILL)
		<-c.done
		return nil, err
	}
	return member, nil
}

// applyDuring applies the operations of run i while c runs, once it is at
// work (its recording, store, exists): a run refused before any work meets
// none of them. On an error it kills c.
func (sr *scenarioRun) applyDuring(ctx context.Context, i int, run runSpec, c *child, store string) error {
	started := len(run.During) == 0 || sr.atWork(c, filepath.Join(sr.dir, store))
	if !started {
		sr.logf("run %d: ended before it was at work: the operations while it runs are not done", i)
		return nil
	}
	if sr.file != nil {
		sr.file.known = true
	}
	for _, op := range run.During {
		time.Sleep(time.Duration(sr.r.IntN(40)) * time.Millisecond)
		sr.logf("run %d: during: %s %d", i, op.Kind, op.N)
		if err := sr.apply(ctx, op); err != nil {
			c.signal(syscall.SIGKILL)
			<-c.done
			return fmt.Errorf("run %d: %s: %w", i, op.Kind, err)
		}
	}
	return nil
}

// stopMember makes run i's second member leave: killed (evicted after its
// session) or stopped (it leaves the group). With a backlog it stays until
// it was given partitions the first member held. It records the member's
// exit and output in o.member.
func (sr *scenarioRun) stopMember(i int, member *child, o *outcome) {
	stay := time.Duration(sr.r.IntN(300)) * time.Millisecond
	sig := pick(sr.r, syscall.SIGKILL, syscall.SIGTERM)
	if sr.s.Backlog {
		stay, sig = 12*time.Second, syscall.SIGTERM
	}
	time.Sleep(stay)
	member.signal(sig)
	if !member.wait(runTimeout) {
		member.signal(syscall.SIGKILL)
		<-member.done
		sr.logf("run %d: second member did not stop after %s", i, sig)
	}
	o.member.exit, o.member.signal = member.exit()
	o.member.output = member.out.String()
	sr.keepOutput(o.member)
}

// endRun ends c as run's End says: by SIGTERM or SIGKILL after its time,
// or (at a kill point) by SIGKILL when a followed run did not reach the
// point; a run that ends by itself is left to.
func endRun(run runSpec, c *child) {
	switch run.End.Kind {
	case endTerm, endKill:
		sig := syscall.SIGTERM
		if run.End.Kind == endKill {
			sig = syscall.SIGKILL
		}
		if !c.wait(run.End.After) {
			c.signal(sig)
		}
	case endKillAt:
		if run.Follow && !c.wait(time.Second+run.End.After) {
			c.signal(syscall.SIGKILL) // the point was not reached while followed
		}
	}
}

// collect fills o from the ended child c: its exit, output, refusal,
// fault and the status it wrote, and for a refused run the files it
// changed since before (their hashes).
func (sr *scenarioRun) collect(o *outcome, c *child, before map[string]string) error {
	run := o.run
	o.exit, o.signal = c.exit()
	o.output = c.out.String()
	sr.keepOutput(o)
	o.refused = o.exit == 2
	sr.ran = sr.ran || !o.refused
	if sr.file != nil && !o.refused {
		sr.file.known = true // the path was the run's to read
	}
	o.faulted = run.Fault.Kind == faultDiskFull || run.Fault.Kind == faultStateDir
	if b, err := os.ReadFile(filepath.Join(sr.dir, strings.TrimSuffix(strings.TrimSuffix(o.store, ".csv"), ".db")+".status.json")); err == nil && !o.killed() {
		var st runStatus
		if json.Unmarshal(b, &st) == nil {
			o.status = &st
		}
	}
	if o.refused {
		after, err := hashFiles(sr.dir, "in.txt.ptr", stateFile, outFile, "run-")
		if err != nil {
			return err
		}
		o.refusedChanged = changedFiles(before, after)
		// A run refused after its --out outbox recovered (the engine
		// refusing its configuration, a signal during its start) has
		// delivered what earlier runs owed: --out grew and its marks
		// were rewritten (docs/GUARANTEES.md, "Effects"); invariant 8
		// holds --out's lines to once.
		o.refusedChanged = slices.DeleteFunc(o.refusedChanged, func(name string) bool {
			return name == outFile+".outbox" || name == outFile && grew(before[outFile], after[outFile])
		})
	}
	return nil
}

// grew reports whether hashFiles' hash after is of a longer file than
// before's.
func grew(before, after string) bool {
	var b, a int64
	fmt.Sscanf(before, "%d:", &b)
	fmt.Sscanf(after, "%d:", &a)
	return a > b
}

// keepOutput writes what run o printed beside its files (log-RUN.txt), for
// the report of a failure: a scenario's directory is kept only then.
func (sr *scenarioRun) keepOutput(o *outcome) {
	name := "log-" + strings.TrimSuffix(strings.TrimSuffix(o.store, ".csv"), ".db") + ".txt"
	if err := os.WriteFile(filepath.Join(sr.dir, name), []byte(o.output), 0o644); err != nil {
		sr.logf("run %d: keeping its output: %v", o.index, err)
	}
}

func envNote(env []string, f runFault) string {
	var parts []string
	for _, e := range env {
		parts = append(parts, e)
	}
	if f.Kind != faultNone {
		parts = append(parts, "fault "+string(f.Kind))
		if f.Bytes > 0 {
			parts[len(parts)-1] += " " + strconv.FormatInt(f.Bytes, 10) + " bytes"
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "  [" + strings.Join(parts, "; ") + "]"
}

func (o *outcome) exitText() string {
	if o.exit < 0 {
		return o.signal.String()
	}
	return strconv.Itoa(o.exit)
}

// changedFiles lists the files created, changed or removed between two
// hashFiles.
func changedFiles(before, after map[string]string) []string {
	var out []string
	for name, h := range after {
		if strings.Contains(name, "-m2") {
			continue // the second member's, which ran beside the run
		}
		if before[name] != h {
			out = append(out, name)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok && !strings.Contains(name, "-m2") {
			out = append(out, name+" (removed)")
		}
	}
	return out
}

// ghostWait is how long a Kafka run that should end is waited for before
// the harness looks for a member kfake never evicts.
const ghostWait = 15 * time.Second

// waitRun waits for the run to end, at most runTimeout; for Kafka, once
// ghostWait passed, it gives up early when the group holds a member no
// process of the scenario runs (ghosts). It reports whether the run ended.
func (sr *scenarioRun) waitRun(ctx context.Context, c *child) bool {
	if sr.kafka == nil {
		return c.wait(runTimeout)
	}
	if c.wait(ghostWait) {
		return true
	}
	if sr.kafka.ghosts(ctx) > 0 {
		return false
	}
	return c.wait(runTimeout - ghostWait)
}

// ghostError is a Kafka scenario the harness cannot carry out: a member
// that was killed in the middle of a rebalance is kept in the group by
// kfake forever (its pending-sync timer is cancelled by the leader's
// SyncGroup, and it never gets a session timer: a kfake defect; Kafka
// evicts it once its session expires), so the partitions it was given are
// never read and a run that waits for the whole topic cannot end. The
// scenario is inconclusive, not failed.
type ghostError struct{ run int }

func (*ghostError) inconclusive() {}

// inconclusiveError is an error of a scenario the harness could not carry
// out because of a defect of kfake (ghostError, bounceLostError): the
// scenario is neither passed nor failed.
type inconclusiveError interface {
	error
	inconclusive()
}

func (e *ghostError) Error() string {
	return fmt.Sprintf("run %d: the group keeps a member that was killed (a kfake defect: no session timer for a member killed in a rebalance); the scenario is inconclusive", e.run)
}

// hangError is a run that did not end within runTimeout.
type hangError struct {
	run  int
	args []string
	out  string
}

func (e *hangError) Error() string {
	return fmt.Sprintf("run %d did not end within %s: blackbox %s\n%s", e.run, runTimeout, strings.Join(e.args, " "), e.out)
}
