package apps

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blackbox-audit/blackbox/core"
)

// ErrFailLine is the error of a "fail" line: an input that always fails.
var ErrFailLine = errors.New("apps: ledger: fail line")

// The defaults of LedgerOptions.SaveEvery and SaveInterval (and of `blackbox
// run --state-every` and --state-interval).
const (
	DefaultSaveEvery    = 1000
	DefaultSaveInterval = 100 * time.Millisecond
)

// LedgerOptions configure the ledger app. A plain value: NewLedger only reads it.
type LedgerOptions struct {
	// StatePath, if set, is the ledger's state file: read when the ledger is
	// built (if it exists), written atomically (a temporary file, fsync,
	// rename, directory fsync). "" keeps the state in memory only.
	//
	// Run by an engine (which gives it its checkpoints: it is an
	// core.CheckpointUser), the ledger saves in batches: once SaveEvery
	// deliveries completed since the last save, or SaveInterval after a
	// delivery completed with no save since (whichever comes first; an idle
	// ledger saves too), and when the engine stops; the source commits an
	// input only once a save covering it is durable. A save that fails is
	// tried again (every min(SaveInterval, MaxSaveRetry)); after SaveTries
	// failures in a row the ledger reports it (core.Checkpoint.Fail with
	// a *StateError): its group fails and the run stops, nothing committed
	// past the last save. Without checkpoints
	// (a core.Host alone: tests, golden, replay), or with SaveEvery 1, it
	// saves when each positioned delivery completes, before the input
	// counts as processed, and at once after an input without a position.
	// Run by an engine with SaveEvery 1, a save that fails is tried again
	// within the completion (SaveTries in a row, every min(SaveInterval,
	// MaxSaveRetry)); when every try failed the ledger reports it
	// (core.Checkpoint.Fail with a *StateError) before the completion
	// returns: the delivery does not count, its group fails and the run
	// stops, nothing committed past the last save.
	StatePath string
	// SaveEvery is how many completed deliveries a batch holds at most.
	// 0: DefaultSaveEvery; 1: a save per delivery, no batches.
	SaveEvery int
	// SaveInterval is how long a completed delivery waits at most for its
	// batch to be saved. 0: DefaultSaveInterval.
	SaveInterval time.Duration
}

// LedgerState is the ledger's state, as saved in its state file and its
// Snapshot: the balances, the count of postings applied, the source
// position (epoch, key, offset) of the last delivery applied (seed 5a:
// consumer side offsets) and, for a source whose positions have a key (a
// Kafka partition, "topic/partition"), the offset of the last delivery
// applied in each position space (epoch and key). State returns a copy,
// safe to use anywhere.
type LedgerState struct {
	Balances map[string]int64 `json:"balances"`
	Applied  int64            `json:"applied"`
	Epoch    int64            `json:"epoch"`
	Key      string           `json:"key,omitempty"`
	Offset   int64            `json:"offset"`
	// Spaces holds, per epoch and then per position key, the offset of
	// the last delivery of that position space applied. A Kafka epoch is
	// the topic's incarnation (kafkasource.TopicEpoch): the same for
	// every generation and restart reading it, another once the topic is
	// deleted and created again, whose offsets start at 0 again. Nil for
	// a file.
	Spaces map[int64]map[string]int64 `json:"spaces,omitempty"`
	// Positions is what a state saved by an earlier version holds in
	// place of Spaces: per key, the offset of the last delivery of that
	// key applied, whatever its epoch (then the group generation). A
	// key's entry stands for the position space of the first delivery of
	// that key the ledger applies after reading it (its topic taken to be
	// the one it was saved from), which takes it over: it is moved to
	// Spaces then. Never written otherwise.
	Positions map[string]int64 `json:"positions,omitempty"`
}

// applied reports whether the state already holds delivery d: for a
// position with a key, an offset at or before the last one applied in its
// position space (its epoch and key; a key saved by an earlier version,
// in Positions, whatever the epoch until a delivery of it is applied);
// for a file (key ""), the same epoch and an offset at or before the last
// one (core.Delivery.AlreadyApplied).
func (st *LedgerState) applied(d *core.Delivery) bool {
	switch {
	case d == nil:
		return false
	case d.Position.Key != "":
		off, ok := st.Spaces[d.Epoch][d.Position.Key]
		if !ok {
			off, ok = st.Positions[d.Position.Key]
		}
		return ok && d.Position.Offset <= off
	}
	return d.AlreadyApplied(st.Epoch, core.Position{Offset: st.Offset})
}

// record notes d as the last delivery applied (and of its position
// space, which takes over the key's entry of an earlier version).
func (st *LedgerState) record(d *core.Delivery) {
	st.Epoch, st.Key, st.Offset = d.Epoch, d.Position.Key, d.Position.Offset
	key := d.Position.Key
	if key == "" {
		return
	}
	if st.Spaces == nil {
		st.Spaces = map[int64]map[string]int64{}
	}
	sp := st.Spaces[d.Epoch]
	if sp == nil {
		sp = map[string]int64{}
		st.Spaces[d.Epoch] = sp
	}
	off, ok := sp[key]
	if !ok {
		off = st.Positions[key]
	}
	sp[key] = max(off, d.Position.Offset)
	if _, ok := st.Positions[key]; ok {
		delete(st.Positions, key)
		if len(st.Positions) == 0 {
			st.Positions = nil
		}
	}
}

// clone is a copy of st that shares no map with it.
func (st LedgerState) clone() LedgerState {
	st.Balances = maps.Clone(st.Balances)
	st.Spaces = cloneSpaces(st.Spaces)
	st.Positions = maps.Clone(st.Positions)
	return st
}

// cloneSpaces is a copy of sp that shares no map with it.
func cloneSpaces(sp map[int64]map[string]int64) map[int64]map[string]int64 {
	if sp == nil {
		return nil
	}
	c := make(map[int64]map[string]int64, len(sp))
	for e, keys := range sp {
		c[e] = maps.Clone(keys)
	}
	return c
}

// Posting is the output of the ledger for each amount applied to an
// account, to sink "ledger". Outputs are plain values, not modified after
// they are emitted.
type Posting struct {
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
	Balance int64  `json:"balance"`
	At      string `json:"at"` // Cycle.Now, RFC 3339 with nanoseconds, UTC
}

// Rejected is the output of the ledger for a malformed line; the line
// changes no balance.
type Rejected struct {
	Rejected string `json:"rejected"`
	Reason   string `json:"reason"`
}

// Summary is the output of the ledger's timer (set by a "tick" line).
type Summary struct {
	Timer    int   `json:"timer"`
	Accounts int   `json:"accounts"`
	Total    int64 `json:"total"`
}

// posting is the reentrant event of a transfer: one side of it.
type posting struct {
	account string
	amount  int64
}

// Ledger is the stateful ledger app. For each line:
//
//   - a delivery already applied (after a restart: for a file,
//     Delivery.AlreadyApplied with the saved epoch and offset; for a
//     position with a key, a Kafka partition, an offset at or before the
//     saved one of its position space, epoch and key) is skipped: no
//     output, no change;
//   - account,amount applies the amount and emits a Posting;
//   - transfer,from,to,amount queues two reentrant postings (the debit, the
//     credit), each emitting its Posting;
//   - tick sets a timer whose cycle emits a Summary;
//   - fail returns ErrFailLine, changing nothing;
//   - anything else emits a Rejected and changes no balance.
//
// Every handled positioned delivery registers one completion (the same
// pointer each cycle, kept once) that records its position and
// saves the state, or counts the delivery into the batch of the next save
// (LedgerOptions); an input without a position is saved at once, or
// counted into the batch. Applied counts postings (a transfer is two).
//
// Saving in batches, the ledger takes a copy of its state and its
// checkpoints' marks together (the copy leaves out the postings of every
// delivery whose completion has not run: its position is not recorded
// yet), and a goroutine of its own (started by UseCheckpoint, which
// Engine.Start calls, stopped by CloseCheckpoint, which Engine.Stop calls)
// writes it, then tells the checkpoints the marks are durable. A mark
// counts only deliveries whose completion ran, so every input the source
// may commit is in the saved state: after a crash the restart re-delivers
// what the last save did not cover, and skips (Delivery.AlreadyApplied)
// what it did. Its completion is then a core.BatchCompletion: the engine
// runs it once the recording of the delivery's batch is written, after
// later deliveries of the batch were handled, so several deliveries may
// be open (handled, not completed) at once; each completion closes its
// own. A line tried again (its try failed) first takes back the postings
// of the failed try; without batches, those of every open delivery (a
// delivery abandoned, too).
//
// Ledger implements core.Snapshotter, core.TimerHandler, core.Durable and
// core.CheckpointUser. The engine calls its handlers and completions from
// one goroutine at a time; its state is guarded by a mutex shared with its
// saving goroutine, so its methods are safe for concurrent use.
type Ledger struct {
	path     string
	every    int
	interval time.Duration
	save     *ledgerSave
	batch    *ledgerBatchSave
	saves    atomic.Int64 // the state file's writes that succeeded (StateSaves)

	mu      sync.Mutex // guards everything below
	st      LedgerState
	open    []openPosting     // the postings of the positioned deliveries whose completion has not run, in order
	opened  []openDelivery    // those deliveries (the ones with postings), in order: several when completions are deferred
	pending int               // deliveries completed since the last snapshot
	cps     []core.Checkpoint // batches: the checkpoints of the feeds, in UseCheckpoint order
	next    *ledgerSnap       // the latest snapshot not yet written (its marks not yet durable)
	saveErr error             // the last write's error (a *StateError), nil once a write succeeds
	saver   *ledgerSaver      // the saving goroutine, started by the first UseCheckpoint that batches
	fails   []core.Checkpoint // a save per delivery: the released checkpoints of the feeds, to Fail when a save keeps failing
}

// NewLedger returns the ledger app, with the state of opts.StatePath if
// that file exists.
func NewLedger(opts LedgerOptions) (*Ledger, error) {
	if opts.SaveEvery < 0 || opts.SaveInterval < 0 {
		return nil, fmt.Errorf("%w: ledger: negative save batch (%d deliveries, %s)", core.ErrOption, opts.SaveEvery, opts.SaveInterval)
	}
	l := &Ledger{path: opts.StatePath, every: opts.SaveEvery, interval: opts.SaveInterval, st: LedgerState{Balances: map[string]int64{}}}
	if l.every == 0 {
		l.every = DefaultSaveEvery
	}
	if l.interval == 0 {
		l.interval = DefaultSaveInterval
	}
	l.save, l.batch = &ledgerSave{l}, &ledgerBatchSave{l}
	if l.path == "" {
		return l, nil
	}
	b, err := os.ReadFile(l.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return l, nil
	case err != nil:
		return nil, fmt.Errorf("apps: ledger state: %w", err)
	}
	if err := l.Restore(b); err != nil {
		return nil, fmt.Errorf("apps: ledger state %s: %w", l.path, err)
	}
	return l, nil
}

// DurableState is what the ledger's state holds (core.Durable): postings
// applied, the position of the last input applied and, as the digest of
// its effects, the balances (JSON, keys sorted).
func (l *Ledger) DurableState() core.DurableState {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, _ := json.Marshal(l.st.Balances) // a map of strings to integers always encodes
	return core.DurableState{Applied: l.st.Applied, Epoch: l.st.Epoch, Position: core.Position{Key: l.st.Key, Offset: l.st.Offset}, Effects: string(b)}
}

// State returns a copy of the ledger's state.
func (l *Ledger) State() LedgerState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.clone() // Balances never nil: New and Restore make it
}

// Snapshot returns the state as JSON (keys sorted).
func (l *Ledger) Snapshot() ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return json.Marshal(l.st)
}

// Restore replaces the state with a Snapshot.
func (l *Ledger) Restore(snapshot []byte) error {
	var st LedgerState
	if err := json.Unmarshal(snapshot, &st); err != nil {
		return fmt.Errorf("apps: ledger snapshot: %w", err)
	}
	if st.Balances == nil {
		st.Balances = map[string]int64{}
	}
	l.mu.Lock()
	l.st = st
	l.closeOpen()
	l.mu.Unlock()
	return nil
}

// OnEvent handles a line, or one side of a transfer.
func (l *Ledger) OnEvent(c *core.Cycle, ev any) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st.applied(c.Delivery()) {
		return nil
	}
	if _, line := ev.(string); line {
		l.takeBackLocked(c.Delivery())
	}
	switch v := ev.(type) {
	case posting:
		l.post(c, v.account, v.amount)
	case string:
		if err := l.line(c, v); err != nil {
			return err
		}
	default:
		c.Emit(LedgerSink, Rejected{Rejected: fmt.Sprint(ev), Reason: fmt.Sprintf("not a text line but %T", ev)})
	}
	return l.done(c)
}

func (l *Ledger) line(c *core.Cycle, line string) error {
	reject := func(reason string) { c.Emit(LedgerSink, Rejected{Rejected: line, Reason: reason}) }
	fs := fields(line)
	switch {
	case len(fs) == 1 && fs[0] == "":
		reject("empty line")
	case len(fs) == 1 && fs[0] == "tick":
		c.After(0)
	case len(fs) == 1 && fs[0] == "fail":
		return fmt.Errorf("%w: %q", ErrFailLine, line)
	case fs[0] == "transfer":
		if len(fs) != 4 {
			reject("want transfer,from,to,amount")
			return nil
		}
		from, to := fs[1], fs[2]
		n, err := parseAmount(from, fs[3])
		switch {
		case err != nil:
			reject(err.Error())
		case to == "":
			reject("empty account")
		case n <= 0:
			reject("transfer amount must be positive")
		case from != to && (overflows(l.st.Balances[from], -n) || overflows(l.st.Balances[to], n)):
			reject("balance overflow")
		default:
			c.Queue(posting{from, -n})
			c.Queue(posting{to, n})
		}
	case len(fs) == 2:
		n, err := parseAmount(fs[0], fs[1])
		switch {
		case err != nil:
			reject(err.Error())
		case overflows(l.st.Balances[fs[0]], n):
			reject("balance overflow")
		default:
			l.post(c, fs[0], n)
		}
	default:
		reject("want account,amount")
	}
	return nil
}

func overflows(a, b int64) bool {
	s := a + b
	return (b > 0 && s < a) || (b < 0 && s > a)
}

func (l *Ledger) post(c *core.Cycle, account string, amount int64) {
	if d := c.Delivery(); d != nil {
		_, had := l.st.Balances[account]
		l.open = append(l.open, openPosting{account: account, amount: amount, created: !had})
		if k := len(l.opened) - 1; k < 0 || !l.opened[k].is(d) {
			l.opened = append(l.opened, openDelivery{feed: d.Feed, seq: d.Sequence})
		}
		l.opened[len(l.opened)-1].postings++
	}
	l.st.Balances[account] += amount
	l.st.Applied++
	c.Emit(LedgerSink, Posting{Account: account, Amount: amount, Balance: l.st.Balances[account], At: stamp(c.Now())})
}

// done registers the save for the delivery's completion (the batch
// completion when saving in batches), or saves (counts into the batch) at
// once for an input without a position. mu held.
func (l *Ledger) done(c *core.Cycle) error {
	var f core.Completion = l.save
	if l.batched() {
		f = l.batch
	}
	if c.OnComplete(f) {
		return nil
	}
	return l.completedLocked()
}

// takeBackLocked takes back, before a line of delivery d is handled, the
// postings of the open deliveries whose completion will never run. Saving
// in batches, completions may be deferred: the deliveries open before d
// are to complete, and only d's own postings (a try that failed, retried
// now) are taken back. Without batches a completion runs right after its
// delivery, so every open delivery is d's failed try or one abandoned (an
// observer failed, Stop cut it). mu held.
func (l *Ledger) takeBackLocked(d *core.Delivery) {
	if !l.batched() {
		l.st = l.committedState()
		l.closeOpen()
		return
	}
	k := len(l.opened) - 1
	if k < 0 || d == nil || !l.opened[k].is(d) {
		return
	}
	n := len(l.open) - l.opened[k].postings
	for i := len(l.open) - 1; i >= n; i-- {
		l.open[i].takeBack(&l.st, l.st.Balances)
	}
	clear(l.open[n:])
	l.open = l.open[:n]
	l.opened[k] = openDelivery{}
	l.opened = l.opened[:k]
}

// closeFirst forgets the oldest open delivery: its postings are kept.
// mu held.
func (l *Ledger) closeFirst() {
	n := l.opened[0].postings
	clear(l.open[:n])
	l.open = l.open[:copy(l.open, l.open[n:])]
	l.opened[0] = openDelivery{}
	l.opened = l.opened[:copy(l.opened, l.opened[1:])]
}

// takeBackFirst takes back the postings of the k oldest open deliveries,
// whose completions will never run, from the state, keeping those of the
// later ones: an account one of them created is deleted, unless a later
// open posting touches it, which becomes the posting that created it.
// mu held.
func (l *Ledger) takeBackFirst(k int) {
	n := 0
	for _, o := range l.opened[:k] {
		n += o.postings
	}
	for i := n - 1; i >= 0; i-- {
		p := l.open[i]
		if p.created {
			if j := slices.IndexFunc(l.open[n:], func(q openPosting) bool { return q.account == p.account }); j >= 0 {
				l.open[n+j].created = true
				p.created = false
			}
		}
		p.takeBack(&l.st, l.st.Balances)
	}
	clear(l.open[:n])
	l.open = l.open[:copy(l.open, l.open[n:])]
	clear(l.opened[:k])
	l.opened = l.opened[:copy(l.opened, l.opened[k:])]
}

// closeOpen forgets every open delivery (its postings are kept, or were
// taken back). mu held.
func (l *Ledger) closeOpen() {
	clear(l.open)
	l.open = l.open[:0]
	clear(l.opened)
	l.opened = l.opened[:0]
}

// OnTimer emits the ledger's Summary.
func (l *Ledger) OnTimer(c *core.Cycle, timer int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var total int64
	for _, b := range l.st.Balances {
		total += b
	}
	c.Emit(LedgerSink, Summary{Timer: timer, Accounts: len(l.st.Balances), Total: total})
	return nil
}

// openPosting is a posting of a delivery whose completion has not run:
// what to take back to see the state without it.
type openPosting struct {
	account string
	amount  int64
	created bool // the posting created the account
}

// takeBack removes the posting from st, whose balances are b. Postings are
// taken back newest first.
func (p openPosting) takeBack(st *LedgerState, b map[string]int64) {
	if p.created {
		delete(b, p.account)
	} else {
		b[p.account] -= p.amount
	}
	st.Applied--
}

// openDelivery is a positioned delivery that posted and whose completion
// has not run: its feed and sequence, and how many of the open postings
// (after those of the deliveries before it) are its.
type openDelivery struct {
	feed     string
	seq      int64
	postings int
}

// is reports whether d is that delivery.
func (o openDelivery) is(d *core.Delivery) bool { return o.seq == d.Sequence && o.feed == d.Feed }

// committedState is the state without the postings of the deliveries
// whose completion has not run (their positions not yet recorded): the
// state a save may hold while they are under way, or abandoned (an
// observer failed, Stop cut one). It shares st's Spaces and Positions, and its
// Balances when there is none. mu held.
func (l *Ledger) committedState() LedgerState {
	if len(l.open) == 0 {
		return l.st
	}
	st := l.st
	st.Balances = maps.Clone(l.st.Balances)
	for i := len(l.open) - 1; i >= 0; i-- {
		l.open[i].takeBack(&st, st.Balances)
	}
	return st
}
