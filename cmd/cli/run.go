package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/filesource"
	"github.com/blackbox-audit/blackbox/engine/kafkasource"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/outbox"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/pgstore"
)

// The names `run` gives what it builds.
const (
	feedName  = "input"
	groupName = "main"
)

// recordConfig is one recorded run of one app over one file.
type recordConfig struct {
	app     string
	input   string
	store   string
	format  string // csv, sqlite or postgres
	runID   string // --run-id: a postgres store's run (set in store's URL by parse)
	read    filesource.Strategy
	pointer string
	maxLine int      // 0: filesource.DefaultMaxLine
	rotated []string // nil: filesource.DefaultRotated; empty: nowhere
	follow  bool
	state   string // the state option
	// stateEvery and stateInterval, when set (> 0), are given to the app
	// as options state-every and state-interval (--state-every,
	// --state-interval); 0 leaves the app's defaults.
	stateEvery    int
	stateInterval time.Duration
	options       map[string]string // --option KEY=VALUE
	out           string
	outFormat     string     // --out-format: outbox.FormatValue or FormatEnvelope
	sink          sinkConfig // --sink kafka://BROKERS/TOPIC: the outbox's sink instead of --out
	status        string
	policy        engine.Policy
	latch         engine.LatchRule // --latch: which losses latch the feed's binding
	queue         int
	delay         time.Duration
	journal       bool
	force         bool
	workers       int          // --workers: 1 or more
	order         engine.Order // --order, "" for the app's default
	maxGap        int          // --max-gap, 0 for engine.DefaultMaxGap
	kafka         kafkaConfig  // --kafka: a consumer group instead of --input
	ops           opsConfig    // --listen, --control-token-file, --shutdown-*, --log-format
}

// recordResult is what a recorded run did.
type recordResult struct {
	Status   engine.Status
	Inputs   int64 // input rows recorded (INDEXED, INLINE, TIMER)
	Outputs  int64 // OUTPUT rows recorded
	Failed   int64 // FAILED rows recorded
	Dropped  int64 // DROPPED rows recorded
	Lost     int64 // LOST rows recorded (the source's losses)
	Emitted  int64 // outputs delivered to --out
	Rows     int64 // rows written to the recording
	Recorded error // the recorder's failures (a broken stream), nil when whole
	// State is why the app's durable state could not be saved (its saves
	// kept failing: its group failed, an *engine.DurableError naming the
	// state), nil when every save was made.
	State error
	// Outbox is what --out's or --sink's outbox did (nil without
	// either): delivered, recovered from earlier runs, suppressed,
	// pending.
	Outbox *outbox.Status
	// Out is why the outbox stopped delivering (naming --out's file or
	// --sink), nil when it did not: what it did not deliver is recorded
	// and committed, and the next run delivers it first.
	Out error
	// Partitions is each Kafka partition's standing at the end of a run
	// with --kafka (committed, processed, lag, paused).
	Partitions []kafkasource.PartitionStatus
	// File is the file source's own status at the end of a run with
	// --input (holes skipped, inputs replaced: not losses); nil with
	// --kafka.
	File *filesource.Status
	// Undrained says why a run stopped by a signal did not drain its
	// queue within --shutdown-timeout (what it read and did not process
	// stays uncommitted: the next run reads it again); nil when it did.
	Undrained error
}

// statusJSON is the status JSON of `run --json` and `run --status`: the
// engine's status (settled, lossless, every feed's losses), for a file
// input the file source's own ("source": holes skipped, inputs replaced),
// and with --out or --sink its outbox's ("outbox": its guarantee, what it
// delivered, recovered, suppressed, left pending).
type statusJSON struct {
	engine.Status
	Source *filesource.Status `json:"source,omitempty"`
	Outbox *outbox.Status     `json:"outbox,omitempty"`
}

// statusJSON is the run's status JSON.
func (res recordResult) statusJSON() statusJSON {
	return statusJSON{Status: res.Status, Source: res.File, Outbox: res.Outbox}
}

// runLong is run's --help.
const runLong = `Run an app over the lines of a file and record everything it saw and did.

The feed is named "input", the processor after the app, its group "main".
Without --follow the run ends once the feed is settled at the end of the
input (every line read, processed and, for a pointer, committed), then
stops cleanly: final commit, END rows. With --follow it tails the file until
SIGINT or SIGTERM, then stops cleanly.

It prints what it read, recorded and emitted (--json: the final status
JSON) and writes the status JSON to --status: the engine's status and, for
a file input, the file source's ("source": holes skipped, inputs replaced). It refuses a
store that already holds a recording unless --force (which removes it
first), and a file that is not a recording even with --force.

Before any work it checks every path: no two of --input, --store,
--pointer, --state (and its files FILE#wK, FILE#workers), --out (and its
marks FILE.outbox) and --status name one file, and every output can be
written. It locks its outputs for the run (PATH.blackbox-lock beside
each): a second run on any of them is refused at once.

With --out FILE the outputs go through an outbox: each is appended to
FILE as one JSON line only once its input is recorded and committed, at
most one state-save interval (--state-interval, default 100ms) plus a
commit poll after it was processed (a timer's output once recorded), and
each exactly once across crashes. The outbox's marks, FILE.outbox, say
what FILE was given: a run first delivers what earlier runs recorded and
committed but did not deliver, and is refused before any work (exit 2)
for marks of another --out-format, a marks line it cannot read, or a FILE
that does not hold what they say. --out-format envelope writes
{"key":{...},"output":...} lines, the key naming the output for good (its
input's feed, epoch and position, and its index). A write that fails
(after 3 tries: a full disk) stops the run: exit 3 naming the file,
nothing lost (the next run delivers the rest first).

With --sink kafka://BROKERS/TOPIC the outputs go through an outbox to a
Kafka topic instead (not with --out): each batch of outputs is one Kafka
transaction, its records' values the outputs, their key the input's
position key (a Kafka input's topic/partition, a file input's feed: one
key's outputs in one partition, in order), their headers blackbox-batch,
blackbox-key (the output's key, as --out-format envelope's),
blackbox-stream and blackbox-outbox (the transactional id). A
read_committed consumer of TOPIC sees each output exactly once across
crashes, at most one state-save interval plus a commit poll plus a
transaction after it was processed. The producer's transactional id is
?txid=ID (default blackbox-TOPIC; one per outbox, the same across its
restarts: a restart fences the producer of a killed run and aborts its
open transaction at once); the outbox's marks are ?marks=PATH (default
TOPIC.kafka.outbox beside --store), locked as --out's are. The topic must
exist. A run is refused before any work (exit 2) when the topic does not
exist or is --kafka's input topic, a broker cannot be reached within a
minute, or the marks file is new while the topic holds batches of the
transactional id (marks lost, or another outbox using the id). A
transaction that fails stops the run as a failed --out write does: exit
3, nothing lost.

With --kafka BROKERS --topic T --group G the feed is a Kafka consumer group
instead of a file (no --input): each record's value is a line for the app,
the run starts at the group's committed offsets and commits, per
partition, only the records processed (never ahead of them). Without
--follow it drains the topic: it ends once everything it read is
processed and committed and the group has committed every partition to
its end, the other members' too (a partition held by a member that reads
nothing, one killed, waits until the group gives it to a live member);
with --follow it consumes until SIGINT or SIGTERM. A partition added to
the topic is assigned within seconds; until it is the run is not settled.
Records deleted (retention) before the group read them, and those of a
deleted topic not read, are lost: counted, not lossless; a topic deleted
under the run has nothing more to read (a run without --follow ends, exit
3 when records were lost, naming the topic), and a topic that does not
exist is refused before any work (exit 2) without --follow, waited for
with it. A topic deleted and created
again is read from its start: its records are another position space (the
DELIVERY rows' epoch is the topic's incarnation, from its topic ID), and a
group commit of the first topic never skips the second's records. A
rebalance waits at most --revoke-timeout for a revoked partition's queued
records; the rest is committed by its new owner only (this run processes
them but never commits them). A member killed (SIGKILL) or hung holds its
partitions until its session expires (--session-timeout, default 45s, as
Kafka's): a restart, or another member, gets them only then. A shorter
session evicts a member whose heartbeats are late (its uncommitted records
are delivered again), and the brokers refuse one outside their
group.min.session.timeout.ms and group.max.session.timeout.ms (the run
then joins no group: not settled, the status detail says why). It prints
each partition's standing at the end: committed, processed, lag, paused
and, when any, lost; and what the source last said when it is not plain (a
topic deleted, records another member has not committed). --read,
--pointer, --max-line and --rotated are for files: given with --kafka they
are refused.

With --state FILE the app keeps its durable state there (option state).
The ledger saves it in batches: once --state-every lines (default 1000)
completed since its last save, or --state-interval (default 100ms) after a
line completed with no save since, and at the end of the run; the pointer
(or Kafka offset) commits a line only once a save holding it is durable, so
a killed run's restart delivers again the lines of the batch it lost and
the ledger applies each line exactly once. A save that fails is tried
again every --state-interval (at most 1s apart); after 3 failures in a row
the run stops: exit 3 naming the state file, nothing committed past the
last save, the recording unfinished (no END); a restart once the fault is
gone delivers the rest again. --state-every 1 saves at every line, before
it is committed: a save that fails is tried again the same way, and the
run stops the same way. With --workers N each worker saves FILE#wK of its own, and a line is
committed once every worker saved what comes before it. A worker's state
holds its keys and the last line it applied, so it is right only on the
same workers, key-ordered: --state with --workers above 1 needs --order
key; a run on workers records N and the order in FILE#workers, and a run
whose workers or order differ from what the existing state was written
with (FILE alone: 1 worker) is refused before any work, naming the file.
--option state=FILE is --state FILE.

A line longer than --max-line bytes is skipped whole, warned and counted
(oversized: not lossless). With --read committed, when FILE is another file
than the pointer's, the pointer's file is looked for among the names of
--rotated (glob patterns, {path} standing for FILE; repeat the flag for
more, --rotated '' for none) and read to its end first, then the files
rotated after it, in the natural order of their names. With --follow, a
file rotated away is read to its end, then every file rotated after it,
in order, then FILE; one gone before it could be read is counted unread.

With --listen ADDR the run serves its operator window there while it
runs (docs/OPERATIONS.md): /metrics, /livez, /readyz, /status, /bindings
and, with --control-token-file, the control endpoints (pause, resume,
clear, release, seek, kill), each action a CONTROL row of the recording.
It prints "blackbox: listening on http://HOST:PORT" on stderr (port 0
picks one). On SIGINT or SIGTERM /readyz fails at once, the run goes on
for --shutdown-delay, then stops reading, drains its queue for at most
--shutdown-timeout and commits what it processed. --log-format json
writes the warnings as slog JSON with the keys run, feed and group.

Exit: 0 settled and lossless; 2 a usage or I/O error, or a refusal
before any work; 3 ran but not settled, not lossless, its recording is
broken, it stopped (a state it could not save, outputs it could not
deliver to --out or --sink), or, stopped by a signal, its queue did not
drain within --shutdown-timeout.`

// runFlags are run's flags that are parsed into its recordConfig.
type runFlags struct {
	format, read, policy string
	latch                string
	spin, deadline       time.Duration
	asJSON               bool
	options              []string
	order                string
}

func (c *CLI) runCmd() *cobra.Command {
	var (
		cfg recordConfig
		fl  runFlags
	)
	cmd := &cobra.Command{
		Use:   "run --app NAME --input FILE --store PATH",
		Short: "Run an app over a file and record it",
		Long:  runLong,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := fl.parse(cmd.Flags().Changed, &cfg); err != nil {
				return err
			}
			if cfg.format == formatPostgres {
				fmt.Fprintf(c.stderr, "blackbox: run id %s\n", cfg.runID)
			}
			res, err := c.record(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if fl.asJSON {
				if err := WriteJSON(out, res.statusJSON()); err != nil {
					return err
				}
			} else {
				printRun(out, cfg, res)
			}
			return runVerdict(res)
		},
	}
	fl.bind(cmd.Flags(), &cfg, core.AppNames(c.apps))
	return cmd
}

// bind binds run's flags to cfg and fl; appNames lists the apps the
// binary knows.
func (fl *runFlags) bind(f *pflag.FlagSet, cfg *recordConfig, appNames string) {
	f.StringVar(&cfg.app, "app", "", "the app to run (this binary knows: "+appNames+")")
	f.StringVar(&cfg.input, "input", "", "the input file, one item per line")
	cfg.kafka.flags(f)
	f.StringVar(&cfg.store, "store", "", "the recording to write (.csv is CSV, a postgres:// URL a run in PostgreSQL, anything else SQLite)")
	f.StringVar(&fl.format, "format", "", "the recording's format: csv or sqlite (default: from the extension)")
	f.StringVar(&fl.read, "read", "committed", "read strategy: committed, earliest, latest, once-earliest or once-latest")
	f.StringVar(&cfg.pointer, "pointer", "", "the read pointer file of --read committed (default FILE.ptr)")
	f.IntVar(&cfg.maxLine, "max-line", filesource.DefaultMaxLine, "skip a line longer than `BYTES` (counted: oversized)")
	f.StringArrayVar(&cfg.rotated, "rotated", filesource.DefaultRotated, "a name the rotated input may have: a `GLOB`, {path} for FILE (repeatable; '' for none)")
	f.BoolVar(&cfg.follow, "follow", false, "tail the input until SIGINT or SIGTERM")
	f.StringVar(&cfg.state, "state", "", "the app's durable state file, given to it as option state (ledger: balances and the last position applied)")
	f.IntVar(&cfg.stateEvery, "state-every", apps.DefaultSaveEvery, "with --state: save the state at least every `N` lines (option state-every; 1 saves each line before it is committed)")
	f.DurationVar(&cfg.stateInterval, "state-interval", apps.DefaultSaveInterval, "with --state: save lines processed since the last save within this `DURATION` (option state-interval)")
	f.StringArrayVar(&fl.options, "option", nil, "an option of the app, `KEY=VALUE` (repeatable; alerts: threshold=N)")
	f.StringVar(&cfg.out, "out", "", "append each output to this file, one JSON line per output, once its input is recorded and committed: at most one state-save interval (--state-interval, default 100ms) plus a commit poll after it was processed; each exactly once across crashes (marks in FILE.outbox)")
	f.StringVar(&cfg.sink.raw, "sink", "", "produce each output to a Kafka topic (`URL` kafka://BROKERS/TOPIC[?txid=ID&marks=PATH]) once its input is recorded and committed, one transaction per batch: exactly once for a read_committed reader, across crashes (not with --out)")
	f.StringVar(&cfg.outFormat, "out-format", outbox.FormatValue, "--out's lines: value (the output) or envelope ({\"key\":...,\"output\":...}: the output's feed, epoch, position and index)")
	f.StringVar(&cfg.status, "status", "", "write the final status JSON to this file")
	f.StringVar(&fl.policy, "policy", "pause", "overload policy of the feed: pause, drop or block")
	f.IntVar(&cfg.queue, "queue", 1024, "capacity of the processor's queue (with --kafka the default is --poll-records, a poll's records)")
	f.DurationVar(&fl.spin, "spin", engine.DefaultSpin, "drop: how long a full queue is spun on before dropping")
	f.DurationVar(&fl.deadline, "deadline", time.Second, "block: how long a publish waits for room before it is refused")
	f.StringVar(&fl.latch, "latch", string(engine.LatchNeverDrop), "which losses latch the feed's binding, `RULE`: never-drop (a pause or block queue's loss), every-loss or nothing; a LATCHED binding stays so (/readyz 503) until an operator clears it (ctl clear)")
	f.BoolVar(&cfg.journal, "journal", false, "journal the feed: inputs are recorded once as JOURNAL rows and indexed")
	f.DurationVar(&cfg.delay, "delay", 0, "slow the processor down by this much per event (to watch a run, to test)")
	f.StringVar(&cfg.runID, "run-id", "", "a postgres:// --store: the run's id (default: run= of the URL, else a new one, printed at start)")
	f.BoolVar(&cfg.force, "force", false, "replace a store that already holds a recording")
	f.IntVar(&cfg.workers, "workers", 1, "run the app on `N` workers, each with instances of its own (and --state FILE#wK; a restart on the same N)")
	f.StringVar(&fl.order, "order", "", "how workers share the lines: key (one account's lines on one worker, in order) or none (default: key if the app has a key; --state on workers needs key)")
	f.IntVar(&cfg.maxGap, "max-gap", engine.DefaultMaxGap, "workers: how many lines may complete beyond the oldest pending one")
	f.BoolVar(&fl.asJSON, "json", false, "print the final status JSON")
	cfg.ops.flags(f)
}

// parse checks run's flags (changed tells those given on the command
// line) and completes cfg with them; every refusal is a usage error.
func (fl *runFlags) parse(changed func(flag string) bool, cfg *recordConfig) error {
	if err := cfg.kafka.check(cfg.input, changed); err != nil {
		return err
	}
	if cfg.app == "" || cfg.input == "" && !cfg.kafka.on() || cfg.store == "" {
		return usagef("run needs --app, --input (or --kafka) and --store")
	}
	var err error
	if cfg.format, err = formatOf(cfg.store, fl.format); err != nil {
		return err
	}
	if err := setRunID(cfg, changed("run-id")); err != nil {
		return err
	}
	if cfg.options, err = parseOptions(fl.options); err != nil {
		return err
	}
	if cfg.read, err = filesource.ParseStrategy(fl.read); err != nil {
		return usagef("--read: %v", err)
	}
	if cfg.policy, err = parsePolicy(fl.policy, fl.spin, fl.deadline, changed("spin")); err != nil {
		return err
	}
	switch r := engine.LatchRule(fl.latch); r {
	case engine.LatchNeverDrop, engine.LatchEveryLoss, engine.LatchNothing:
		cfg.latch = r
	default:
		return usagef("unknown --latch %q (want %s, %s or %s)", fl.latch, engine.LatchNeverDrop, engine.LatchEveryLoss, engine.LatchNothing)
	}
	if cfg.pointer == "" && !cfg.kafka.on() {
		cfg.pointer = cfg.input + ".ptr"
	}
	if cfg.kafka.on() && !changed("queue") {
		// A poll's records fit in the queue: the source hands them
		// over in one go instead of waiting for room every 1024.
		cfg.queue = cfg.kafka.pollRecords
	}
	if err := checkRunNumbers(*cfg); err != nil {
		return err
	}
	if err := cfg.ops.check(); err != nil {
		return err
	}
	switch engine.Order(fl.order) {
	case "", engine.OrderKey, engine.OrderNone:
		cfg.order = engine.Order(fl.order)
	default:
		return usagef("unknown --order %q (want key or none)", fl.order)
	}
	if cfg.maxLine <= 0 {
		return usagef("--max-line must be positive, got %d", cfg.maxLine)
	}
	if err := takeStateOption(cfg); err != nil {
		return err
	}
	if err := stateBatchFlags(changed, cfg); err != nil {
		return err
	}
	if err := checkOutFormat(changed, *cfg); err != nil {
		return err
	}
	if cfg.sink.on() {
		if cfg.out != "" {
			return usagef("--sink and --out both name where the outputs go: give one")
		}
		if cfg.sink, err = parseSink(cfg.sink.raw, cfg.store); err != nil {
			return err
		}
		if cfg.sink.feeds(cfg.kafka) {
			return usagef("--sink %s is the input topic of --kafka: each output would be read as an input", cfg.sink)
		}
	}
	if changed("rotated") {
		cfg.rotated = slices.DeleteFunc(cfg.rotated, func(p string) bool { return p == "" })
	}
	return nil
}

// setRunID completes a postgres:// --store with its run id: --run-id
// (given: changed), else the URL's run=, else a new one (pgstore.NewRunID),
// and, for a Kafka run, the consumer group as the run's group= unless the
// URL has one. --run-id with a file store, or beside another run= in the
// URL, is a usage error.
func setRunID(cfg *recordConfig, changed bool) error {
	if cfg.format != formatPostgres {
		if changed {
			return usagef("--run-id needs a postgres:// --store")
		}
		return nil
	}
	loc, err := pgstore.ParseURL(cfg.store)
	if err != nil {
		return usagef("--store: %v", err)
	}
	switch {
	case changed && loc.Run != "" && loc.Run != cfg.runID:
		return usagef("--run-id %s and run=%s of --store name two runs", cfg.runID, loc.Run)
	case !changed && loc.Run != "":
		cfg.runID = loc.Run
	case !changed:
		cfg.runID = pgstore.NewRunID(time.Now())
	}
	if cfg.store, err = pgstore.WithRun(cfg.store, cfg.runID); err != nil {
		return usagef("--store: %v", err)
	}
	if cfg.kafka.on() && loc.Group == "" {
		if cfg.store, err = pgstore.WithParam(cfg.store, "group", cfg.kafka.group); err != nil {
			return usagef("--store: %v", err)
		}
	}
	return nil
}

// checkRunNumbers checks --queue, --delay, --workers and --max-gap.
func checkRunNumbers(cfg recordConfig) error {
	switch {
	case cfg.queue <= 0:
		return usagef("--queue must be positive, got %d", cfg.queue)
	case cfg.delay < 0:
		return usagef("--delay must not be negative, got %s", cfg.delay)
	case cfg.workers < 1:
		return usagef("--workers must be at least 1, got %d", cfg.workers)
	case cfg.maxGap < 0:
		return usagef("--max-gap must not be negative, got %d", cfg.maxGap)
	}
	return nil
}

// checkOutFormat checks --out-format: value or envelope, and only with
// --out.
func checkOutFormat(changed func(flag string) bool, cfg recordConfig) error {
	switch {
	case changed("out-format") && cfg.out == "":
		return usagef("--out-format needs --out")
	case cfg.outFormat != outbox.FormatValue && cfg.outFormat != outbox.FormatEnvelope:
		return usagef("unknown --out-format %q (want %s or %s)", cfg.outFormat, outbox.FormatValue, outbox.FormatEnvelope)
	}
	return nil
}

// stateBatchFlags checks --state-every and --state-interval: positive,
// and only with --state; given on the command line, they go to the app as
// options (apps.StateBatchOptions), else the app keeps its defaults (an app
// taking option state but not these works without them).
func stateBatchFlags(changed func(flag string) bool, cfg *recordConfig) error {
	every, interval := changed("state-every"), changed("state-interval")
	switch {
	case (every || interval) && cfg.state == "":
		return usagef("--state-every and --state-interval need --state")
	case every && cfg.stateEvery < 1:
		return usagef("--state-every must be at least 1, got %d", cfg.stateEvery)
	case interval && cfg.stateInterval <= 0:
		return usagef("--state-interval must be positive, got %s", cfg.stateInterval)
	}
	if !every {
		cfg.stateEvery = 0
	}
	if !interval {
		cfg.stateInterval = 0
	}
	return nil
}

// takeStateOption makes --option state=FILE the --state FILE it is the
// same as, so that it gets every check of --state (its files, their
// layout, their locks); both at once is a usage error.
func takeStateOption(cfg *recordConfig) error {
	v, ok := cfg.options[apps.OptionState]
	if !ok {
		return nil
	}
	if cfg.state != "" {
		return usagef("--state and --option %s=... both name the state file", apps.OptionState)
	}
	cfg.state = v
	cfg.options = maps.Clone(cfg.options)
	delete(cfg.options, apps.OptionState)
	return nil
}

// checkStateOrder refuses --state on several workers that are not
// key-ordered (order, resolved): each worker's state holds the last line it
// applied, and with --order none a line delivered again after a crash may
// reach another worker than the one that applied it.
func checkStateOrder(cfg recordConfig, order engine.Order) error {
	if cfg.state == "" || cfg.workers <= 1 || order == engine.OrderKey {
		return nil
	}
	why := "--order " + string(order)
	if cfg.order == "" {
		why = fmt.Sprintf("app %s has no key: its workers run --order none", cfg.app)
	}
	return &usageError{&fileError{cfg.state, fmt.Errorf("--state: %w (%s): each worker's state holds the last line it applied, and with --order none a line delivered again after a crash may reach another worker than the one that applied it (applied twice, or skipped and never applied); run with --order key, or on 1 worker",
		errStateOrder, why)}}
}

// parseOptions reads --option KEY=VALUE flags into app options.
func parseOptions(flags []string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	opts := make(map[string]string, len(flags))
	for _, f := range flags {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return nil, usagef("--option %q: want KEY=VALUE", f)
		}
		if _, dup := opts[k]; dup {
			return nil, usagef("--option %s given twice", k)
		}
		opts[k] = v
	}
	return opts, nil
}

// appOptions reads replay's --option [APP:]KEY=VALUE flags into options per
// app: KEY=VALUE goes to app (--app) when set, otherwise to every app.
func (c *CLI) appOptions(flags []string, app string) (map[string]map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := map[string]map[string]string{}
	for _, f := range flags {
		target, kv := app, f
		if name, rest, ok := strings.Cut(f, ":"); ok && !strings.Contains(name, "=") {
			if _, err := c.app(name); err != nil {
				return nil, err
			}
			target, kv = name, rest
		}
		opt, err := parseOptions([]string{kv})
		if err != nil {
			return nil, err
		}
		targets := []string{target}
		if target == "" {
			targets = targets[:0]
			for _, a := range c.apps {
				targets = append(targets, a.Name)
			}
		}
		for _, t := range targets {
			if out[t] == nil {
				out[t] = map[string]string{}
			}
			for k, v := range opt {
				if _, dup := out[t][k]; dup {
					return nil, usagef("--option %s given twice for app %s", k, t)
				}
				out[t][k] = v
			}
		}
	}
	return out, nil
}

// parsePolicy reads --policy with its --spin and --deadline.
func parsePolicy(name string, spin, deadline time.Duration, spinSet bool) (engine.Policy, error) {
	if spin < 0 {
		return engine.Policy{}, usagef("--spin must not be negative, got %s", spin)
	}
	kind, err := engine.ParsePolicyKind(name)
	if err != nil {
		return engine.Policy{}, usagef("unknown --policy %q (want pause, drop or block)", name)
	}
	var p engine.Policy
	switch kind {
	case engine.PauseKind:
		p = engine.Pause()
	case engine.DropAfterSpinKind:
		return engine.DropAfterSpin(spin), nil
	case engine.BlockKind:
		if deadline <= 0 {
			return engine.Policy{}, usagef("--deadline must be positive, got %s", deadline)
		}
		p = engine.BlockWithDeadline(deadline)
	}
	if spinSet {
		p = p.WithSpin(spin)
	}
	return p, nil
}

// runVerdict maps a run's result to its exit.
func runVerdict(res recordResult) error {
	switch {
	case res.Recorded != nil:
		return exit(ExitIncomplete, fmt.Errorf("the recording is broken: %w", res.Recorded))
	case res.State != nil:
		return exit(ExitIncomplete, fmt.Errorf("the state could not be saved, the run stopped (nothing is committed past its last save: a restart delivers the rest again): %w", res.State))
	case res.Out != nil:
		return exit(ExitIncomplete, fmt.Errorf("outputs not delivered, the run stopped (recorded and committed: the next run delivers them first): %w", res.Out))
	case res.Undrained != nil:
		return exit(ExitIncomplete, res.Undrained)
	case !res.Status.Settled:
		return exit(ExitIncomplete, nil)
	case !res.Status.Lossless:
		return exit(ExitIncomplete, nil)
	}
	return nil
}

func printRun(w io.Writer, cfg recordConfig, res recordResult) {
	var fs engine.FeedStatus
	if len(res.Status.Feeds) > 0 {
		fs = res.Status.Feeds[0]
	}
	if cfg.kafka.on() {
		fmt.Fprintf(w, "read      %s (group %s, %s): %s\n", cfg.kafka.topic, cfg.kafka.group, cfg.kafka.brokers, count(fs.Sequence, "record"))
	} else {
		how := cfg.read.String()
		if cfg.read == filesource.Committed {
			how += ", pointer " + cfg.pointer
		}
		again := ""
		if f := res.File; f != nil && f.Replaced > 0 {
			again = fmt.Sprintf(", replaced %d", f.Replaced) // read again from 0
		}
		if f := res.File; f != nil && f.HoleBytes > 0 {
			again += fmt.Sprintf(", %s skipped as a hole", count(f.HoleBytes, "NUL byte"))
		}
		fmt.Fprintf(w, "read      %s (%s): %s%s\n", cfg.input, how, count(fs.Sequence, "line"), again)
	}
	lostRows := ""
	if res.Lost > 0 {
		lostRows = ", " + count(res.Lost, "LOST row")
	}
	fmt.Fprintf(w, "recorded  %s (%s): %s, %s, %s, %d failed, %s%s; %s\n", cfg.store, cfg.format, cfg.app,
		count(res.Inputs, "input"), count(res.Outputs, "output"), res.Failed, count(res.Dropped, "drop"), lostRows, count(res.Rows, "row"))
	if cfg.out != "" || cfg.sink.on() {
		more := ""
		if o := res.Outbox; o != nil {
			if o.Recovered > 0 {
				more += fmt.Sprintf(", %d of them from earlier runs", o.Recovered)
			}
			if o.Suppressed > 0 {
				more += fmt.Sprintf(", %d not again (delivered by an earlier run)", o.Suppressed)
			}
			if o.Undelivered > 0 {
				more += fmt.Sprintf(", %d not delivered (recorded and committed: the next run delivers them first)", o.Undelivered)
			}
			if o.Pending > 0 {
				more += fmt.Sprintf(", %d pending (not committed: the next run processes them again)", o.Pending)
			}
		}
		if cfg.sink.on() {
			fmt.Fprintf(w, "outputs   %s (transactional id %s): %s produced%s\n", cfg.sink, cfg.sink.txid, count(res.Emitted, "record"), more)
		} else {
			fmt.Fprintf(w, "outputs   %s: %s appended%s\n", cfg.out, count(res.Emitted, "line"), more)
		}
	}
	if cfg.status != "" {
		fmt.Fprintf(w, "status    %s\n", cfg.status)
	}
	for _, p := range res.Partitions {
		lost := ""
		if p.Lost > 0 {
			lost = fmt.Sprintf(", lost %d", p.Lost)
		}
		if p.Fenced > 0 {
			// Processed here, never committed: the partition's next
			// owner reads them again.
			lost += fmt.Sprintf(", fenced %d", p.Fenced)
		}
		fmt.Fprintf(w, "partition %s/%d: committed %d, processed %d, lag %d, paused %s%s\n", p.Topic, p.Partition, p.Committed, p.Processed, p.Lag, yesNo(p.Paused), lost)
	}
	if cfg.kafka.on() && fs.Detail != nil && *fs.Detail != "" {
		fmt.Fprintf(w, "source    %s: %s\n", fs.State, *fs.Detail) // a topic deleted, a partition no one reads ...
	}
	losses := fmt.Sprintf("dropped %d, refused %d, completion failures %d", fs.Dropped, fs.Refused, fs.CompletionFailures)
	for _, reason := range slices.Sorted(maps.Keys(fs.Losses)) {
		losses += fmt.Sprintf(", lost %s %d", reason, fs.Losses[reason])
	}
	fmt.Fprintf(w, "verdict   settled: %s  lossless: %s  (%s; state %s, acknowledged %d, failures %d)\n",
		yesNo(res.Status.Settled), yesNo(res.Status.Lossless), losses, fs.State, fs.Acknowledged, fs.Failures)
}

// record runs cfg: the app over the input file, recorded to the store.
// Every path is checked before any work starts (planRun: no two flags name
// one file, every output can be written) and every output is locked for
// the run (lockOutputs); a store that is not a recording is refused, and
// an existing recording is refused (store.ErrHoldsRecording) unless
// cfg.force. A failure after the store was created removes what the run
// created (the store, an --out file it created: runFiles), and a store
// that cannot be created in full removes what it made (its Create), so an
// error never leaves a half-written file behind.
func (c *CLI) record(ctx context.Context, cfg recordConfig) (res recordResult, err error) {
	plan, err := c.planRun(&cfg)
	if err != nil {
		return res, err
	}
	release, err := lockOutputs(runPaths(cfg))
	if err != nil {
		return res, err
	}
	defer release()
	if err := plan.checkLocked(cfg); err != nil {
		return res, err
	}
	ops, err := openOps(cfg.ops) // --listen: the address taken before any work
	if err != nil {
		return res, err
	}
	defer func() {
		if err != nil {
			ops.close(context.Background()) // not served yet: its listener
		}
	}()
	logger := cfg.ops.logger(c.stderr, c.name, cfg.store)
	var cm *clientMetrics // the Kafka client's metrics, for the operator window
	if cfg.kafka.on() && cfg.ops.listen != "" {
		cm = newClientMetrics()
	}
	src, ks, err := runSource(ctx, cfg, logger, cm)
	if err != nil {
		return res, err
	}
	if ks != nil {
		defer ks.Close() // after the engine's last commit
	}
	build, recorded, err := appBuilder(plan.app, cfg)
	if err != nil {
		return res, err
	}
	saves := &saveCounts{}
	build = saves.counting(build)
	proc, err := buildFirst(build)
	if err != nil {
		return res, err
	}
	// --out's or --sink's outbox first delivers what earlier runs left,
	// reading their recordings before --force may replace one.
	var out *runOutbox
	switch {
	case cfg.out != "":
		if out, err = openOutbox(cfg, c.outWriter, logger); err != nil {
			return res, err
		}
	case cfg.sink.on():
		if out, err = openSinkOutbox(ctx, cfg, logger); err != nil {
			return res, err
		}
	}
	// From here on the run creates files: undone on a failure before the
	// engine ran (once it ran, its recording is the record of what it did).
	files, err := createRunFiles(cfg, plan, out)
	if err != nil {
		return res, err
	}
	defer files.close()
	proc, newProc := workerProcs(proc, build, cfg.delay)
	run, err := recorder.Start(ctx, recorder.RunConfig{
		Store:         files.store,
		Feed:          engine.FeedConfig{Name: feedName, Source: src, Policy: cfg.policy, QueueSize: cfg.queue, Latch: cfg.latch},
		Journal:       cfg.journal,
		Group:         groupName,
		Processors:    []recorder.Processor{{Name: cfg.app, App: plan.app, Processor: proc, New: newProc, Options: recorded}},
		Workers:       cfg.workers,
		Order:         plan.order,
		MaxGap:        cfg.maxGap,
		Clock:         c.clock,
		RecorderClock: c.clock,
		Outbox:        files.box,
		Path:          cfg.store,
		Logger:        logger,
		NoCommits:     c.noCommits,
		DrainTimeout:  cfg.ops.shutdownTimeout,
	})
	if err != nil {
		files.remove()
		return res, startErr(cfg.store, err)
	}
	fsrc, _ := src.(*filesource.Source)
	srcs := runSources{file: fsrc, kafka: ks, client: cm}
	if cfg.state != "" {
		srcs.saves = saves
	}
	if ops != nil {
		if err = ops.serve(c.stderr, run, files, srcs, c.clock, logger); err != nil {
			run.Engine().Kill("the operator window could not start: " + err.Error())
			run.Stop(context.WithoutCancel(ctx))
			files.store.Close()
			return res, err
		}
	}
	return c.finishRun(ctx, cfg, run, files, srcs, ops, logger)
}

// runSources is the run's source, as the one of its kind whose status the
// run reports: the file source (--input) or the Kafka source (--kafka);
// and the app's counts of its state saves, which the window reports.
type runSources struct {
	file  *filesource.Source
	kafka *kafkasource.Source
	// saves counts the app's state saves (--state), nil without a state;
	// client is the Kafka client's metrics, nil without --kafka and
	// --listen.
	saves  *saveCounts
	client *clientMetrics
}

// startErr is the error of a run that recorder.Start refused: a usage
// error for a configuration the engine refuses, ctx's own error, else the
// recorder's, naming the store.
func startErr(path string, err error) error {
	switch {
	case errors.Is(err, engine.ErrConfig):
		return usagef("%v", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return storeErr(path, err) // the recorder could not start the recording
}

// runSource is the run's source: a Kafka consumer group's (ks too: the
// caller closes it after the run, once the engine's last commit is made;
// without --follow its topic must exist; its client feeds cm, when not
// nil) or the input file's.
func runSource(ctx context.Context, cfg recordConfig, logger *slog.Logger, cm *clientMetrics) (src source, ks *kafkasource.Source, err error) {
	if !cfg.kafka.on() {
		fsrc, err := filesource.New(cfg.input, filesource.Options{Read: cfg.read, Pointer: cfg.pointer, Logger: logger,
			MaxLine: cfg.maxLine, Rotated: cfg.rotated})
		if err != nil {
			return nil, nil, usagef("%v", err)
		}
		return fsrc, nil, nil
	}
	if !cfg.follow {
		if err := cfg.kafka.checkTopic(ctx); err != nil {
			return nil, nil, err
		}
	}
	var client []kgo.Opt
	if cm != nil {
		client = append(client, cm.hooks())
	}
	if ks, err = cfg.kafka.source(cfg.ops.kafkaLogger(logger), cfg.follow, client...); err != nil {
		return nil, nil, usagef("%v", err)
	}
	return ks, ks, nil
}

// finishRun waits for the end of a started run (run.Wait: settled without
// --follow, a signal, the source failing, the recorder or a state save
// failing, an output not written), stops it and closes the store, then
// writes --status. It returns what the run did; its error is the source's
// (naming the file or topic) or --status's.
func (c *CLI) finishRun(ctx context.Context, cfg recordConfig, run *recorder.Run, files *runFiles, srcs runSources, ops *opsServer, logger *slog.Logger) (recordResult, error) {
	p := c.progress()
	var failed <-chan struct{}
	if files.box != nil {
		failed = files.box.Failed()
	}
	win := ops.window()
	if win != nil {
		win.Beat() // the loop begins: /readyz is not "starting" for its first ProgressEvery
	}
	srcErr := run.Wait(ctx, recorder.WaitConfig{Follow: cfg.follow, Stop: failed, Progress: func(st engine.Status) {
		if win != nil {
			win.Beat()
		}
		if len(st.Feeds) > 0 {
			p.Printf("%s: %d lines read, %d acknowledged", st.Feeds[0].State, st.Feeds[0].Sequence, st.Feeds[0].Acknowledged)
		}
	}})
	p.Done()
	signalled := ctx.Err() != nil
	stopErr, recErr := c.shutdown(ctx, cfg.ops, run, win, signalled)
	closeCtx, cancelClose := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second) // a request under way ends
	defer cancelClose()
	if err := ops.close(closeCtx); err != nil {
		logger.Warn(fmt.Sprintf("operator window: %v", err))
	}
	w := files.store
	if cerr := w.Close(); cerr != nil && recErr == nil {
		recErr = cerr
	}
	if recErr != nil {
		recErr = storeErr(cfg.store, recErr)
	}
	outErr := files.close()
	eng := run.Engine()
	res := recordResult{Status: eng.Status(), Inputs: w.inputs(), Outputs: w.kinds[store.KindOutput],
		Failed: w.kinds[store.KindFailed], Dropped: w.kinds[store.KindDropped], Lost: w.kinds[store.KindLost], Rows: w.rows,
		Recorded: recErr}
	if box := files.boxStatus; box != nil {
		res.Emitted, res.Outbox = box.Delivered, box
	}
	if srcs.kafka != nil { // stopped: its final commit made
		res.Partitions = srcs.kafka.Status().Partitions
	}
	if srcs.file != nil {
		fst := srcs.file.Status()
		res.File = &fst
	}
	if signalled {
		res.Undrained = undrained(res.Status, cfg.ops.shutdownTimeout)
	}
	var de *engine.DurableError
	if errors.As(eng.Err(), &de) {
		res.State = de
	}
	if outErr != nil {
		// Recorded and committed, not delivered: the next run's outbox
		// delivers it first. Not a loss, but the run did not finish.
		res.Out = &fileError{cfg.out, outErr}
		if cfg.sink.on() {
			res.Out = fmt.Errorf("--sink %s: %w", cfg.sink, outErr)
		}
	}
	if srcErr != nil {
		return res, sourceErr(cfg, srcErr)
	}
	if stopErr = withoutState(stopErr); stopErr != nil {
		logger.Warn(fmt.Sprintf("stop: %v", stopErr))
	}
	if cfg.status != "" {
		if err := writeFileAtomic(cfg.status, func(f io.Writer) error { return WriteJSON(f, res.statusJSON()) }); err != nil {
			return res, err
		}
	}
	return res, nil
}

// sourceErr is the error the run's source ended with, naming the file
// (the input, or one the file source read) or the Kafka topic.
func sourceErr(cfg recordConfig, err error) error {
	var fe *filesource.FileError
	if errors.As(err, &fe) {
		return &fileError{fe.Path, fmt.Errorf("%s: %w", fe.Op, unwrapPathError(fe.Err))}
	}
	if cfg.kafka.on() {
		return fmt.Errorf("kafka %s: %w", cfg.kafka.topic, err)
	}
	return fmt.Errorf("%s: %w", cfg.input, err)
}

// withoutState is Stop's error without the group's failure for a state
// that could not be saved (engine.ErrNotDurable), which the run's verdict
// reports (recordResult.State).
func withoutState(stopErr error) error {
	j, ok := stopErr.(interface{ Unwrap() []error })
	if !ok {
		if errors.Is(stopErr, engine.ErrNotDurable) {
			return nil
		}
		return stopErr
	}
	var keep []error
	for _, err := range j.Unwrap() {
		if !errors.Is(err, engine.ErrNotDurable) {
			keep = append(keep, err)
		}
	}
	return errors.Join(keep...)
}

// source is a feed's source with its default overload policy: a file
// source or a Kafka source.
type source interface {
	engine.Source
	engine.PolicySource
}
