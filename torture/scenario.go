package torture

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/crashtest"
)

// A scenarioSpec is what the harness generates from a seed: an app, a
// source, the lines written before the first run, and a sequence of runs,
// each with its flags, what happens to the input before and while it runs,
// how it ends and the fault it meets. The last run is always a bounded run with
// no fault that ends by itself, so that the oracle can check the whole
// input. A plain value.
type scenarioSpec struct {
	Seed uint64
	// Kind is what the scenario runs: "runs" (a sequence of blackbox run),
	// "crashtest" (blackbox crashtest, whose verdict the oracle checks) or
	// "engine" (the engine driven in-process: engine.go).
	Kind string
	// Crash configures a crashtest scenario.
	Crash  crashSpec
	Engine engineSpec
	App    string // ledger, alerts or torture (App)
	State  bool   // ledger: --state
	Source string // file or kafka
	// Lines are written before the first run.
	Lines int
	// Partitions of the Kafka topic at the start.
	Partitions int
	// Poison: the input has lines the app always fails ("fail", ledger)
	// or lines longer than --max-line (oversized), each a counted loss.
	Poison   bool
	Oversize bool
	Ticks    bool // ledger: "tick" lines (timers); torture: "timer,ID" lines
	// Backlog (Kafka): thousands of records before the first run, which
	// handles them slowly while a second member joins and leaves.
	Backlog bool
	// OutFormat is every run's --out-format: "" (value, the default) or
	// envelope ({"key":...,"output":...}); the oracle reads either.
	OutFormat string
	Runs      []runSpec
}

// outFormat is the runs' --out-format.
func (s scenarioSpec) outFormat() string { return orDefault(s.OutFormat, "value") }

// A runSpec is one `blackbox run` of a scenario. A plain value.
type runSpec struct {
	Format        string // csv or sqlite
	Workers       int
	Order         string // "", key or none
	StateEvery    int    // 0: the default
	StateInterval time.Duration
	MaxGap        int // 0: the default
	Journal       bool
	Follow        bool
	Delay         time.Duration // run --delay: slows each event, widening the kill windows
	Policy        string        // pause or drop
	Queue         int           // 0: the default
	Before        []inputOp     // done to the input while stopped, before the run
	During        []inputOp     // done to the input while the run follows
	End           runEnd
	Fault         runFault
	Alias         string // a hostile path: "pointer" or "status" names a worker's state file
	Member        bool   // Kafka: a second member of the group runs beside this run for a while
	// Control is the operator's actions sent over HTTP to the run's window
	// (run --listen, control.go), in order; the run follows its input and
	// is ended by SIGTERM after them, or by a kill among them.
	Control []ctlStep
}

// endKind is how a run ends.
type endKind string

// The ends of a run.
const (
	endSettle endKind = "settle" // a bounded run: it ends by itself once settled
	endTerm   endKind = "term"   // SIGTERM at a random moment: a clean stop
	endKill   endKind = "kill"   // SIGKILL at a random moment
	endKillAt endKind = "killat" // SIGKILL at a named kill point (BLACKBOX_KILL_AT)
)

// runEnd is how a run ends: After, for term and kill, is when after its
// start; Point and N, for killat, the point and its N-th reach.
type runEnd struct {
	Kind  endKind
	After time.Duration
	Point string
	N     int
}

// opKind is something done to the input.
type opKind string

// The operations on a file input, then on a Kafka topic.
const (
	opAppend      opKind = "append"     // N new lines
	opRename      opKind = "rename"     // rotation by rename: PATH to PATH-000K, a new empty PATH
	opCopy        opKind = "copy"       // rotation by copy-and-truncate: PATH copied to PATH-000K, PATH truncated
	opBurst       opKind = "burst"      // N rotations by rename, each after a line or two
	opTruncate    opKind = "truncate"   // PATH truncated to 0: its unread lines are destroyed
	opRewrite     opKind = "rewrite"    // PATH rewritten in place with new lines (same length or longer)
	opRecreate    opKind = "recreate"   // PATH deleted and created again with new lines
	opPartitions  opKind = "partitions" // Kafka: N partitions added
	opRetention   opKind = "retention"  // Kafka: the records of a partition deleted up to its end (unread ones lost)
	opDeleteTopic opKind = "deltopic"   // Kafka: the topic deleted and created again empty
	opBounce      opKind = "bounce"     // Kafka: the broker stopped and started again
)

// inputOp is one operation on the input.
type inputOp struct {
	Kind opKind
	N    int
}

// faultKind is a fault a run meets.
type faultKind string

// The faults.
const (
	faultNone     faultKind = ""
	faultDiskFull faultKind = "diskfull" // the run's files may grow to Bytes at most (RLIMIT_FSIZE): the store, --out or the state fails to write
	faultStateDir faultKind = "statedir" // a directory takes the state file's place while the run runs: its saves fail
	faultLocked   faultKind = "locked"   // another process holds the lock of one of the run's outputs: the run must be refused
	faultStale    faultKind = "stale"    // lock files left by a killed run beside every output: they hold nothing
)

// runFault is the fault a run meets.
type runFault struct {
	Kind  faultKind
	Bytes int64
}

// Limits shrink a generated scenario: at most Runs runs (the last one kept
// as a final bounded run), Lines scaled down, no faults, no operations on
// the input. The zero value leaves a scenario whole.
type Limits struct {
	Runs     int  // 0: all
	Lines    int  // 0: all; else at most this many lines per batch
	NoFaults bool // no faults, no hostile paths
	NoOps    bool // no operation but appends
}

func (l Limits) String() string {
	var parts []string
	if l.Runs > 0 {
		parts = append(parts, fmt.Sprintf("runs=%d", l.Runs))
	}
	if l.Lines > 0 {
		parts = append(parts, fmt.Sprintf("lines=%d", l.Lines))
	}
	if l.NoFaults {
		parts = append(parts, "faults=off")
	}
	if l.NoOps {
		parts = append(parts, "ops=off")
	}
	return strings.Join(parts, ",")
}

// ParseLimits reads Limits as String writes them.
func ParseLimits(s string) (Limits, error) {
	var l Limits
	if s == "" {
		return l, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return l, fmt.Errorf("torture: limit %q: want KEY=VALUE", part)
		}
		var err error
		switch k {
		case "runs":
			_, err = fmt.Sscanf(v, "%d", &l.Runs)
		case "lines":
			_, err = fmt.Sscanf(v, "%d", &l.Lines)
		case "faults":
			l.NoFaults = v == "off"
		case "ops":
			l.NoOps = v == "off"
		default:
			err = fmt.Errorf("unknown limit (want runs, lines, faults, ops)")
		}
		if err != nil {
			return l, fmt.Errorf("torture: limit %q: %v", part, err)
		}
	}
	return l, nil
}

// killPoints are the kill points a run may be killed at: those a recorded
// run reaches, its --out outbox's included, as crashtest --kill-at takes
// them (crashtest.RunKillPoints, named by internal/killpoint): the list
// is the CLI's, not the harness's.
var killPoints = crashtest.RunKillPoints

// generate generates the scenario of seed, shrunk by lim. The same seed
// and limits give the same scenario.
func generate(seed uint64, lim Limits, only Only) scenarioSpec {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := scenarioSpec{Seed: seed, Kind: "runs", Source: "file", Lines: 20 + r.IntN(120)}
	c := cover(seed)
	s.Kind = genKind(r, c, only)
	switch s.Kind {
	case "crashtest":
		s.Crash = genCrash(r)
		return s
	case "engine":
		s.Engine = genEngine(r)
		if p, ok := forcedProperty(c); ok && only.Kind == "" {
			s.Engine.Property = p
		}
		return s
	}
	kafkaOp := map[int]opKind{coverPartitions: opPartitions, coverRetention: opRetention, coverDeleteTopic: opDeleteTopic,
		coverBounce: opBounce}[c]
	s.genInput(r, c, kafkaOp != "", only)
	// Whether a run is sent control actions draws from a stream of its
	// own (as the --out format), so that the seeds of the scenarios
	// before the dimension came keep drawing what they drew.
	cr := rand.New(rand.NewPCG(seed, 0xc7))
	control := s.Source == "file" && !s.Backlog && (c == coverControl || cr.IntN(25) == 0)
	// A Kafka runs scenario (no backlog, no operation on the topic forced)
	// draws a controlled run from a stream of its own too: a third of them.
	if s.Source == "kafka" && !s.Backlog && kafkaOp == "" && (c == coverControl || rand.New(rand.NewPCG(seed, 0x4bac)).IntN(3) == 0) {
		control = true
	}
	// The --out format draws from a stream of its own, so that the draws
	// before and after it stay the seed's.
	if rand.New(rand.NewPCG(seed, 0x0f0)).IntN(4) == 0 {
		s.OutFormat = "envelope"
	}
	n := 1 + r.IntN(4)
	if s.Backlog || kafkaOp != "" {
		n = max(n, 2)
	}
	for i := range n {
		run := s.genRun(r, i == 0, i == n-1)
		if s.Backlog && i == 0 {
			run.Delay, run.Member, run.End = 4*time.Millisecond, true, runEnd{Kind: endTerm, After: 4 * time.Second}
			run.Follow, run.During, run.Fault, run.Alias = true, nil, runFault{}, ""
		}
		if i > 0 && s.State && r.IntN(4) > 0 {
			// Durable state is per worker: most restarts keep the layout
			// (another is refused before any work), some change it.
			prev := s.Runs[i-1]
			run.Workers, run.Order, run.MaxGap = prev.Workers, prev.Order, prev.MaxGap
		}
		s.Runs = append(s.Runs, run)
	}
	if kafkaOp != "" && s.Source == "kafka" && !s.Backlog {
		op := inputOp{Kind: kafkaOp, N: 1}
		if kafkaOp == opRetention {
			op.N = r.IntN(s.Partitions)
		}
		s.Runs[1].Before = append(s.Runs[1].Before, op)
	}
	if a := map[int]string{coverAliasPointer: "pointer", coverAliasStatus: "status"}[c]; a != "" && s.State && !s.Backlog {
		s.Runs[0].Alias = a
	}
	if control {
		// A run of its own, before a drawn one and with its layout (a
		// restart with another is refused, as it would be before that
		// one), so that the runs the seed drew stay as they were.
		k := cr.IntN(len(s.Runs))
		run := s.Runs[k]
		run.Before = []inputOp{{Kind: opAppend, N: cr.IntN(40)}}
		run.controlled(cr, rand.New(rand.NewPCG(seed, 0xbac)), s.Source == "kafka")
		s.Runs = slices.Insert(s.Runs, k, run)
	}
	return s.shrink(lim)
}

// genKind draws the scenario's kind (c, the seed's residue, may force it).
func genKind(r *rand.Rand, c int, only Only) string {
	kind := "runs"
	switch x := r.IntN(100); {
	case only.Kind != "":
		return only.Kind
	case x < 3:
		kind = "crashtest"
	case x < 7:
		kind = "engine"
	}
	switch {
	case c == coverCrashtest:
		kind = "crashtest"
	case isForcedProperty(c):
		kind = "engine"
	case c == coverBacklog:
		kind = "runs"
	}
	return kind
}

// genInput draws a runs scenario's app, source and input (c, the seed's
// residue, may force a Kafka source, a backlog, the ledger with state,
// poison lines; kafkaOp says a Kafka operation is forced).
func (s *scenarioSpec) genInput(r *rand.Rand, c int, kafkaOp bool, only Only) {
	switch x := r.IntN(20); {
	case x < 10:
		s.App, s.State = "ledger", true
	case x < 11:
		s.App = "ledger"
	case x < 15:
		s.App = "alerts"
	default:
		s.App = AppName
	}
	if r.IntN(5) == 0 {
		s.Source, s.Partitions = "kafka", 1+r.IntN(4)
	}
	if (c == coverAliasPointer || c == coverAliasStatus || c == coverPoison) && only.App == "" {
		s.App, s.State = "ledger", true
	}
	if only.App != "" {
		s.App, s.State = only.App, only.App == "ledger"
	}
	if only.Source != "" {
		s.Source = only.Source
		if s.Partitions == 0 {
			s.Partitions = 1 + r.IntN(4)
		}
	}
	if c == coverControl && only.Source == "" {
		s.Source, s.Partitions = "file", 0
	}
	if (c == coverBacklog || kafkaOp) && only.Source != "file" {
		s.Source = "kafka"
		if s.Partitions == 0 {
			s.Partitions = 1 + r.IntN(4)
		}
	}
	if s.Source == "kafka" && (r.IntN(30) == 0 || c == coverBacklog) {
		// A backlog a slow member works through while a second member
		// joins: the revocation outlasts its timeout. The members share
		// no state file (each run's --state is its own to lock).
		s.Backlog = true
		s.Lines = 2500 + r.IntN(1000)
		s.State = false
	}
	s.Poison = (r.IntN(10) == 0 || c == coverPoison) && s.App == "ledger"
	s.Oversize = r.IntN(10) == 0 && s.Source == "file"
	s.Ticks = r.IntN(4) == 0 && s.App != "alerts"
}

// Every session runs consecutive seeds: a seed's residue modulo coverEvery
// forces a dimension random draws would leave out of many sessions (a
// backlog with a second member is drawn once in 150 scenarios), so that
// every 200 consecutive seeds cover each at least 5 times. The residue is
// the seed's: `--seed S --scenarios 1` reproduces the scenario.
const (
	coverEvery     = 40
	coverBacklog   = 0 // a Kafka backlog and a second member joining
	coverCrashtest = 1 // blackbox crashtest
	coverEngine    = 2 // the engine scenarios, one property each from here: 2..9 the first eight of engineProperties, in order

	coverAliasPointer = 10 // a ledger with --state whose first run is given --pointer st.json#w1
	coverAliasStatus  = 11 // ... --status st.json#w1
	coverPoison       = 12 // a ledger with lines it always fails

	coverPartitions  = 13 // a Kafka topic given partitions before the second run
	coverRetention   = 14 // ... a partition's records deleted
	coverDeleteTopic = 15 // ... the topic deleted and created again
	coverBounce      = 16 // ... the broker stopped and started

	coverEngineMore = 17 // the engine properties after the first eight (operator: 17), past the residues taken before they came
	coverControl    = 18 // a runs scenario of a file whose run is sent control actions over HTTP (control.go)
)

// engineResidue is the residue that forces engineProperties[i]: the
// first eight from coverEngine, the later ones from coverEngineMore (so
// that the seeds of the earlier scenarios keep reproducing them).
func engineResidue(i int) int {
	if first := coverAliasPointer - coverEngine; i >= first {
		return coverEngineMore + i - first
	}
	return coverEngine + i
}

// forcedProperty is the engine property residue c forces, if any.
func forcedProperty(c int) (string, bool) {
	for i, p := range engineProperties {
		if engineResidue(i) == c {
			return p, true
		}
	}
	return "", false
}

func isForcedProperty(c int) bool { _, ok := forcedProperty(c); return ok }

func cover(seed uint64) int { return int(seed % coverEvery) }

// Only restricts what generate draws (Config.Only): a kind of scenario, an app, a source.
type Only struct {
	Kind   string
	App    string
	Source string
}

func (s *scenarioSpec) genRun(r *rand.Rand, first, last bool) runSpec {
	run := runSpec{Format: pick(r, "csv", "sqlite"), Workers: 1, Policy: "pause"}
	if r.IntN(2) == 0 {
		run.Workers = 2 + r.IntN(7)
		switch r.IntN(5) {
		case 0:
			if !s.State || r.IntN(4) == 0 { // refused with --state: rarely drawn there
				run.Order = "none"
			}
		case 1:
			run.Order = "key"
		}
		if r.IntN(3) == 0 {
			run.MaxGap = 1 + r.IntN(64)
		}
	}
	if s.State {
		switch r.IntN(4) {
		case 0:
			run.StateEvery = 1
		case 1, 2:
			run.StateEvery = 2 + r.IntN(50)
		}
		if r.IntN(2) == 0 {
			run.StateInterval = time.Duration(2+r.IntN(40)) * time.Millisecond
		}
	}
	run.Journal = r.IntN(3) == 0
	if r.IntN(4) == 0 {
		run.Delay = time.Duration(100+r.IntN(900)) * time.Microsecond
	}
	if r.IntN(8) == 0 {
		run.Queue = 2 + r.IntN(30)
		if r.IntN(3) == 0 {
			run.Policy = "drop"
		}
	}
	// What happens to the input while stopped: new lines, and sometimes
	// worse.
	run.Before = append(run.Before, inputOp{Kind: opAppend, N: r.IntN(40)})
	if r.IntN(4) == 0 && !first { // before the first run the input is not yet the runs' to lose
		run.Before = append(run.Before, s.hostileOp(r, false))
	}
	if last {
		run.End = runEnd{Kind: endSettle}
		return run
	}
	run.Follow = r.IntN(5) < 2
	if run.Follow {
		for range 1 + r.IntN(4) {
			if r.IntN(3) == 0 {
				run.During = append(run.During, s.hostileOp(r, true))
			} else {
				run.During = append(run.During, inputOp{Kind: opAppend, N: 1 + r.IntN(30)})
			}
		}
	}
	switch x := r.IntN(10); {
	case x < 2 && !run.Follow:
		run.End = runEnd{Kind: endSettle}
	case x < 4:
		run.End = runEnd{Kind: endTerm, After: time.Duration(r.IntN(300)) * time.Millisecond}
	case x < 7:
		run.End = runEnd{Kind: endKill, After: time.Duration(r.IntN(300)) * time.Millisecond}
	default:
		run.End = runEnd{Kind: endKillAt, Point: pick(r, killPoints...), N: 1 + r.IntN(8)}
	}
	switch x := r.IntN(20); {
	case x == 0:
		run.Fault = runFault{Kind: faultDiskFull, Bytes: int64(2000 + r.IntN(40000))}
	case x == 1 && s.State:
		run.Fault = runFault{Kind: faultStateDir}
	case x == 2:
		run.Fault = runFault{Kind: faultLocked}
	case x == 3:
		run.Fault = runFault{Kind: faultStale}
	}
	if s.State && r.IntN(20) == 0 {
		run.Alias = pick(r, "pointer", "status")
	}
	if s.Source == "kafka" && r.IntN(4) == 0 && !s.State {
		run.Member = true
	}
	return run
}

// hostileOp draws an operation beyond an append, for the scenario's source.
func (s *scenarioSpec) hostileOp(r *rand.Rand, running bool) inputOp {
	if s.Source == "kafka" {
		switch r.IntN(4) {
		case 0:
			return inputOp{Kind: opPartitions, N: 1 + r.IntN(3)}
		case 1:
			return inputOp{Kind: opRetention, N: r.IntN(s.Partitions)}
		case 2:
			return inputOp{Kind: opBounce}
		default:
			return inputOp{Kind: opDeleteTopic}
		}
	}
	switch r.IntN(8) {
	case 0, 1:
		return inputOp{Kind: opRename, N: 1 + r.IntN(10)}
	case 2:
		return inputOp{Kind: opCopy, N: 1 + r.IntN(10)}
	case 3, 4:
		k := 2 + r.IntN(4)
		if running && r.IntN(3) == 0 {
			k = 20 + r.IntN(80)
		}
		return inputOp{Kind: opBurst, N: k}
	case 5:
		return inputOp{Kind: opTruncate}
	case 6:
		return inputOp{Kind: opRewrite, N: 1 + r.IntN(10)}
	default:
		return inputOp{Kind: opRecreate, N: 1 + r.IntN(10)}
	}
}

// shrink applies lim.
func (s scenarioSpec) shrink(lim Limits) scenarioSpec {
	if lim.Runs > 0 && len(s.Runs) > lim.Runs {
		last := s.Runs[len(s.Runs)-1]
		s.Runs = append(append([]runSpec{}, s.Runs[:lim.Runs-1]...), last)
	}
	runs := make([]runSpec, len(s.Runs))
	for i, run := range s.Runs {
		run.Before = limitOps(run.Before, lim)
		run.During = limitOps(run.During, lim)
		if lim.NoFaults {
			run.Fault, run.Alias = runFault{}, ""
		}
		runs[i] = run
	}
	s.Runs = runs
	if lim.Lines > 0 {
		s.Lines = min(s.Lines, lim.Lines)
	}
	return s
}

func limitOps(ops []inputOp, lim Limits) []inputOp {
	var out []inputOp
	for _, op := range ops {
		if lim.NoOps && op.Kind != opAppend {
			continue
		}
		if lim.Lines > 0 && op.N > lim.Lines && (op.Kind == opAppend || op.Kind == opBurst) {
			op.N = lim.Lines
		}
		out = append(out, op)
	}
	return out
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// Dimensions names what the scenario exercises, for the harness's log of
// how many scenarios covered each dimension.
func (s scenarioSpec) Dimensions() []string {
	switch s.Kind {
	case "crashtest":
		return s.Crash.dimensions()
	case "engine":
		return s.Engine.dimensions()
	}
	d := []string{"kind=runs", "app=" + s.App, "source=" + s.Source, fmt.Sprintf("runs=%d", len(s.Runs))}
	if s.State {
		d = append(d, "state")
	}
	if s.Poison {
		d = append(d, "poison")
	}
	if s.Oversize {
		d = append(d, "oversized")
	}
	if s.Ticks {
		d = append(d, "timers")
	}
	if s.Backlog {
		d = append(d, "backlog")
	}
	d = append(d, "out="+s.outFormat())
	for _, run := range s.Runs {
		d = append(d, "format="+run.Format, "end="+string(run.End.Kind))
		if run.End.Kind == endKillAt {
			d = append(d, "killpoint="+run.End.Point)
		}
		if run.Workers > 1 {
			d = append(d, "workers", "order="+orDefault(run.Order, "default"))
		}
		if run.MaxGap > 0 {
			d = append(d, "max-gap")
		}
		if run.StateEvery > 0 {
			d = append(d, "state-every")
		}
		if run.StateInterval > 0 {
			d = append(d, "state-interval")
		}
		if run.Journal {
			d = append(d, "journal")
		}
		if run.Follow {
			d = append(d, "follow")
		}
		if run.Policy == "drop" {
			d = append(d, "policy=drop")
		}
		for _, op := range append(append([]inputOp{}, run.Before...), run.During...) {
			if op.Kind != opAppend || run.Follow {
				d = append(d, "op="+string(op.Kind))
			}
		}
		if run.Fault.Kind != faultNone {
			d = append(d, "fault="+string(run.Fault.Kind))
		}
		if run.Alias != "" {
			d = append(d, "alias="+run.Alias)
		}
		if run.Member {
			d = append(d, "second-member")
		}
		if len(run.Control) > 0 {
			d = append(d, "control")
		}
	}
	return d
}

// AllDimensions are the dimensions every 200 consecutive seeds cover (the
// harness's promise, docs/TORTURE.md): TestTortureScenarios fails a
// session of 200 scenarios that misses one.
func AllDimensions() []string {
	d := []string{"kind=runs", "kind=crashtest", "app=ledger", "app=alerts", "app=" + AppName, "source=file", "source=kafka",
		"state", "poison", "oversized", "timers", "backlog", "second-member", "format=csv", "format=sqlite",
		"end=settle", "end=term", "end=kill", "end=killat", "workers", "order=key", "order=none", "order=default", "max-gap",
		"state-every", "state-interval", "journal", "follow", "policy=drop",
		"op=append", "op=rename", "op=copy", "op=burst", "op=truncate", "op=rewrite", "op=recreate",
		"op=partitions", "op=retention", "op=deltopic", "op=bounce",
		"fault=diskfull", "fault=statedir", "fault=locked", "fault=stale", "alias=pointer", "alias=status",
		"out=value", "out=envelope", "control"}
	for _, p := range engineProperties {
		d = append(d, "engine="+p)
	}
	for _, p := range killPoints {
		d = append(d, "killpoint="+p)
	}
	return d
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
