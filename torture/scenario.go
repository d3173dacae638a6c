package torture

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// A Scenario is what the harness generates from a seed: an app, a source,
// the lines written before the first run, and a sequence of runs, each with
// its flags, what happens to the input before and while it runs, how it
// ends and the fault it meets. The last run is always a bounded run with
// no fault that ends by itself, so that the oracle can check the whole
// input. A plain value.
type Scenario struct {
	Seed uint64
	// Kind is what the scenario runs: "runs" (a sequence of blackbox run),
	// "crashtest" (blackbox crashtest, whose verdict the oracle checks) or
	// "engine" (the engine driven in-process: engine.go).
	Kind string
	// Crash configures a crashtest scenario.
	Crash  CrashSpec
	Engine EngineSpec
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
	Runs    []RunSpec
}

// A RunSpec is one `blackbox run` of a scenario. A plain value.
type RunSpec struct {
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
	Before        []Op          // done to the input while stopped, before the run
	During        []Op          // done to the input while the run follows
	End           End
	Fault         Fault
	Alias         string // a hostile path: "pointer" or "status" names a worker's state file
	Member        bool   // Kafka: a second member of the group runs beside this run for a while
}

// EndKind is how a run ends.
type EndKind string

// The ends of a run.
const (
	EndSettle EndKind = "settle" // a bounded run: it ends by itself once settled
	EndTerm   EndKind = "term"   // SIGTERM at a random moment: a clean stop
	EndKill   EndKind = "kill"   // SIGKILL at a random moment
	EndKillAt EndKind = "killat" // SIGKILL at a named kill point (BLACKBOX_KILL_AT)
)

// End is how a run ends: After, for term and kill, is when after its
// start; Point and N, for killat, the point and its N-th reach.
type End struct {
	Kind  EndKind
	After time.Duration
	Point string
	N     int
}

// OpKind is something done to the input.
type OpKind string

// The operations on a file input, then on a Kafka topic.
const (
	OpAppend      OpKind = "append"     // N new lines
	OpRename      OpKind = "rename"     // rotation by rename: PATH to PATH-000K, a new empty PATH
	OpCopy        OpKind = "copy"       // rotation by copy-and-truncate: PATH copied to PATH-000K, PATH truncated
	OpBurst       OpKind = "burst"      // N rotations by rename, each after a line or two
	OpTruncate    OpKind = "truncate"   // PATH truncated to 0: its unread lines are destroyed
	OpRewrite     OpKind = "rewrite"    // PATH rewritten in place with new lines (same length or longer)
	OpRecreate    OpKind = "recreate"   // PATH deleted and created again with new lines
	OpPartitions  OpKind = "partitions" // Kafka: N partitions added
	OpRetention   OpKind = "retention"  // Kafka: the records of a partition deleted up to its end (unread ones lost)
	OpDeleteTopic OpKind = "deltopic"   // Kafka: the topic deleted and created again empty
	OpBounce      OpKind = "bounce"     // Kafka: the broker stopped and started again
)

// Op is one operation on the input.
type Op struct {
	Kind OpKind
	N    int
}

// FaultKind is a fault a run meets.
type FaultKind string

// The faults.
const (
	FaultNone     FaultKind = ""
	FaultDiskFull FaultKind = "diskfull" // the run's files may grow to Bytes at most (RLIMIT_FSIZE): the store, --out or the state fails to write
	FaultStateDir FaultKind = "statedir" // a directory takes the state file's place while the run runs: its saves fail
	FaultLocked   FaultKind = "locked"   // another process holds the lock of one of the run's outputs: the run must be refused
	FaultStale    FaultKind = "stale"    // lock files left by a killed run beside every output: they hold nothing
)

// Fault is the fault a run meets.
type Fault struct {
	Kind  FaultKind
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

// Kill points a run may be killed at (internal/killpoint).
var killPoints = []string{"state-saved", "rows-written", "store-write", "pointer-written"}

// Generate generates the scenario of seed, shrunk by lim. The same seed
// and limits give the same scenario.
func Generate(seed uint64, lim Limits, only Only) Scenario {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := Scenario{Seed: seed, Kind: "runs", Source: "file", Lines: 20 + r.IntN(120)}
	switch x := r.IntN(100); {
	case only.Kind != "":
		s.Kind = only.Kind
	case x < 3:
		s.Kind = "crashtest"
	case x < 12:
		s.Kind = "engine"
	}
	c := cover(seed)
	if only.Kind == "" {
		switch {
		case c == coverCrashtest:
			s.Kind = "crashtest"
		case c >= coverEngine && c < coverEngine+len(engineProperties):
			s.Kind = "engine"
		case c == coverBacklog:
			s.Kind = "runs"
		}
	}
	switch s.Kind {
	case "crashtest":
		s.Crash = genCrash(r)
		return s
	case "engine":
		s.Engine = genEngine(r)
		if c >= coverEngine && c < coverEngine+len(engineProperties) && only.Kind == "" {
			s.Engine.Property = engineProperties[c-coverEngine]
		}
		return s
	}
	kafkaOp := s.drawInput(r, c, only)
	s.drawRuns(r, c, kafkaOp)
	return s.shrink(lim)
}

// drawInput draws a runs scenario's app and its input (a file or a Kafka
// topic, a backlog, poison, oversized lines, ticks), as the seed's cover
// residue c and only force; it returns the Kafka operation c forces, if
// any.
func (s *Scenario) drawInput(r *rand.Rand, c int, only Only) OpKind {
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
	kafkaOp := map[int]OpKind{coverPartitions: OpPartitions, coverRetention: OpRetention, coverDeleteTopic: OpDeleteTopic,
		coverBounce: OpBounce}[c]
	if (c == coverBacklog || kafkaOp != "") && only.Source != "file" {
		s.Source = "kafka"
		if s.Partitions == 0 {
			s.Partitions = 1 + r.IntN(4)
		}
	}
	if s.Source == "kafka" && (r.IntN(30) == 0 || c == coverBacklog) {
		// A backlog a slow member works through while a second member
		// joins: the revocation outlasts its timeout.
		s.Backlog = true
		s.Lines = 2500 + r.IntN(1000)
	}
	s.Poison = (r.IntN(10) == 0 || c == coverPoison) && s.App == "ledger"
	s.Oversize = r.IntN(10) == 0 && s.Source == "file"
	s.Ticks = r.IntN(4) == 0 && s.App != "alerts"
	return kafkaOp
}

// drawRuns draws a runs scenario's runs, and places the Kafka operation
// and the state file alias the seed's cover residue c forces.
func (s *Scenario) drawRuns(r *rand.Rand, c int, kafkaOp OpKind) {
	n := 1 + r.IntN(4)
	if s.Backlog || kafkaOp != "" {
		n = max(n, 2)
	}
	for i := range n {
		run := s.genRun(r, i == 0, i == n-1)
		if s.Backlog && i == 0 {
			run.Delay, run.Member, run.End = 4*time.Millisecond, true, End{Kind: EndTerm, After: 4 * time.Second}
			run.Follow, run.During, run.Fault, run.Alias = true, nil, Fault{}, ""
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
		op := Op{Kind: kafkaOp, N: 1}
		if kafkaOp == OpRetention {
			op.N = r.IntN(s.Partitions)
		}
		s.Runs[1].Before = append(s.Runs[1].Before, op)
	}
	if a := map[int]string{coverAliasPointer: "pointer", coverAliasStatus: "status"}[c]; a != "" && s.State && !s.Backlog {
		s.Runs[0].Alias = a
	}
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
	coverEngine    = 2 // the engine scenarios, one property each from here

	coverAliasPointer = 10 // a ledger with --state whose first run is given --pointer st.json#w1
	coverAliasStatus  = 11 // ... --status st.json#w1
	coverPoison       = 12 // a ledger with lines it always fails

	coverPartitions  = 13 // a Kafka topic given partitions before the second run
	coverRetention   = 14 // ... a partition's records deleted
	coverDeleteTopic = 15 // ... the topic deleted and created again
	coverBounce      = 16 // ... the broker stopped and started
)

func cover(seed uint64) int { return int(seed % coverEvery) }

// Only restricts what Generate draws: a kind of scenario, an app, a source.
type Only struct {
	Kind   string
	App    string
	Source string
}

func (s *Scenario) genRun(r *rand.Rand, first, last bool) RunSpec {
	run := RunSpec{Format: pick(r, "csv", "sqlite"), Workers: 1, Policy: "pause"}
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
	run.Before = append(run.Before, Op{Kind: OpAppend, N: r.IntN(40)})
	if r.IntN(4) == 0 && !first { // before the first run the input is not yet the runs' to lose
		run.Before = append(run.Before, s.hostileOp(r, false))
	}
	if last {
		run.End = End{Kind: EndSettle}
		return run
	}
	run.Follow = r.IntN(5) < 2
	if run.Follow {
		for range 1 + r.IntN(4) {
			if r.IntN(3) == 0 {
				run.During = append(run.During, s.hostileOp(r, true))
			} else {
				run.During = append(run.During, Op{Kind: OpAppend, N: 1 + r.IntN(30)})
			}
		}
	}
	switch x := r.IntN(10); {
	case x < 2 && !run.Follow:
		run.End = End{Kind: EndSettle}
	case x < 4:
		run.End = End{Kind: EndTerm, After: time.Duration(r.IntN(300)) * time.Millisecond}
	case x < 7:
		run.End = End{Kind: EndKill, After: time.Duration(r.IntN(300)) * time.Millisecond}
	default:
		run.End = End{Kind: EndKillAt, Point: pick(r, killPoints...), N: 1 + r.IntN(8)}
	}
	switch x := r.IntN(20); {
	case x == 0:
		run.Fault = Fault{Kind: FaultDiskFull, Bytes: int64(2000 + r.IntN(40000))}
	case x == 1 && s.State:
		run.Fault = Fault{Kind: FaultStateDir}
	case x == 2:
		run.Fault = Fault{Kind: FaultLocked}
	case x == 3:
		run.Fault = Fault{Kind: FaultStale}
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
func (s *Scenario) hostileOp(r *rand.Rand, running bool) Op {
	if s.Source == "kafka" {
		switch r.IntN(4) {
		case 0:
			return Op{Kind: OpPartitions, N: 1 + r.IntN(3)}
		case 1:
			return Op{Kind: OpRetention, N: r.IntN(s.Partitions)}
		case 2:
			return Op{Kind: OpBounce}
		default:
			return Op{Kind: OpDeleteTopic}
		}
	}
	switch r.IntN(8) {
	case 0, 1:
		return Op{Kind: OpRename, N: 1 + r.IntN(10)}
	case 2:
		return Op{Kind: OpCopy, N: 1 + r.IntN(10)}
	case 3, 4:
		k := 2 + r.IntN(4)
		if running && r.IntN(3) == 0 {
			k = 20 + r.IntN(80)
		}
		return Op{Kind: OpBurst, N: k}
	case 5:
		return Op{Kind: OpTruncate}
	case 6:
		return Op{Kind: OpRewrite, N: 1 + r.IntN(10)}
	default:
		return Op{Kind: OpRecreate, N: 1 + r.IntN(10)}
	}
}

// shrink applies lim.
func (s Scenario) shrink(lim Limits) Scenario {
	if lim.Runs > 0 && len(s.Runs) > lim.Runs {
		last := s.Runs[len(s.Runs)-1]
		s.Runs = append(append([]RunSpec{}, s.Runs[:lim.Runs-1]...), last)
	}
	runs := make([]RunSpec, len(s.Runs))
	for i, run := range s.Runs {
		run.Before = limitOps(run.Before, lim)
		run.During = limitOps(run.During, lim)
		if lim.NoFaults {
			run.Fault, run.Alias = Fault{}, ""
		}
		runs[i] = run
	}
	s.Runs = runs
	if lim.Lines > 0 {
		s.Lines = min(s.Lines, lim.Lines)
	}
	return s
}

func limitOps(ops []Op, lim Limits) []Op {
	var out []Op
	for _, op := range ops {
		if lim.NoOps && op.Kind != OpAppend {
			continue
		}
		if lim.Lines > 0 && op.N > lim.Lines && (op.Kind == OpAppend || op.Kind == OpBurst) {
			op.N = lim.Lines
		}
		out = append(out, op)
	}
	return out
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// Dimensions names what the scenario exercises, for the harness's log of
// how many scenarios covered each dimension.
func (s Scenario) Dimensions() []string {
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
	for _, run := range s.Runs {
		d = append(d, "format="+run.Format, "end="+string(run.End.Kind))
		if run.End.Kind == EndKillAt {
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
		for _, op := range append(append([]Op{}, run.Before...), run.During...) {
			if op.Kind != OpAppend || run.Follow {
				d = append(d, "op="+string(op.Kind))
			}
		}
		if run.Fault.Kind != FaultNone {
			d = append(d, "fault="+string(run.Fault.Kind))
		}
		if run.Alias != "" {
			d = append(d, "alias="+run.Alias)
		}
		if run.Member {
			d = append(d, "second-member")
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
		"fault=diskfull", "fault=statedir", "fault=locked", "fault=stale", "alias=pointer", "alias=status"}
	for _, p := range engineProperties {
		d = append(d, "engine="+p)
	}
	for _, p := range []string{"state-saved", "rows-written", "store-write", "pointer-written"} {
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
