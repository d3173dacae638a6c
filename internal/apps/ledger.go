package apps

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/internal/atomicfile"
	"github.com/blackbox-audit/blackbox/internal/killpoint"
)

// ErrFailLine is the error of a "fail" line: an input that always fails.
var ErrFailLine = errors.New("apps: ledger: fail line")

// LedgerOptions configure the ledger app. A plain value: NewLedger only reads it.
type LedgerOptions struct {
	// StatePath, if set, is the ledger's state file: read when the ledger is
	// built (if it exists), written atomically (a temporary file, fsync,
	// rename) when each positioned delivery completes, or at once for an
	// input without a position. "" keeps the state in memory only.
	StatePath string
}

// LedgerState is the ledger's state, as saved in its state file and its
// Snapshot: the balances, the count of postings applied, and the source
// position (epoch, offset) of the last delivery applied (seed 5a: consumer
// side offsets). State returns a copy, safe to use anywhere.
type LedgerState struct {
	Balances map[string]int64 `json:"balances"`
	Applied  int64            `json:"applied"`
	Epoch    int64            `json:"epoch"`
	Offset   int64            `json:"offset"`
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
//   - a delivery already applied (Delivery.AlreadyApplied with the saved
//     epoch and offset, after a restart) is skipped: no output, no change;
//   - account,amount applies the amount and emits a Posting;
//   - transfer,from,to,amount queues two reentrant postings (the debit, the
//     credit), each emitting its Posting;
//   - tick sets a timer whose cycle emits a Summary;
//   - fail returns ErrFailLine, changing nothing;
//   - anything else emits a Rejected and changes no balance.
//
// Every handled positioned delivery registers one completion (the same
// pointer each cycle, kept once) that records its epoch and offset and saves
// the state; an input without a position is saved at once. Applied counts
// postings (a transfer is two).
//
// Ledger implements core.Snapshotter, core.TimerHandler and core.Durable. It is not
// safe for concurrent use (the engine never calls a processor
// concurrently).
type Ledger struct {
	path string
	st   LedgerState
	save *ledgerSave
}

// ledgerSave is the ledger's completion: a pointer, so that registering it
// on every cycle of a delivery keeps it once.
type ledgerSave struct{ l *Ledger }

// Complete records the delivery's position and saves the state.
func (s *ledgerSave) Complete(d *core.Delivery) error {
	s.l.st.Epoch, s.l.st.Offset = d.Epoch, d.Position.Offset
	return s.l.persist()
}

// NewLedger returns the ledger app, with the state of opts.StatePath if
// that file exists.
func NewLedger(opts LedgerOptions) (*Ledger, error) {
	l := &Ledger{path: opts.StatePath, st: LedgerState{Balances: map[string]int64{}}}
	l.save = &ledgerSave{l}
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
	b, _ := json.Marshal(l.st.Balances) // a map of strings to integers always encodes
	return core.DurableState{Applied: l.st.Applied, Epoch: l.st.Epoch, Position: core.Position{Offset: l.st.Offset}, Effects: string(b)}
}

// State returns a copy of the ledger's state.
func (l *Ledger) State() LedgerState {
	st := l.st
	st.Balances = maps.Clone(l.st.Balances) // never nil: New and Restore make it
	return st
}

// Snapshot returns the state as JSON (keys sorted).
func (l *Ledger) Snapshot() ([]byte, error) { return json.Marshal(l.st) }

// Restore replaces the state with a Snapshot.
func (l *Ledger) Restore(snapshot []byte) error {
	var st LedgerState
	if err := json.Unmarshal(snapshot, &st); err != nil {
		return fmt.Errorf("apps: ledger snapshot: %w", err)
	}
	if st.Balances == nil {
		st.Balances = map[string]int64{}
	}
	l.st = st
	return nil
}

// OnEvent handles a line, or one side of a transfer.
func (l *Ledger) OnEvent(c *core.Cycle, ev any) error {
	if d := c.Delivery(); d != nil && d.AlreadyApplied(l.st.Epoch, core.Position{Offset: l.st.Offset}) {
		return nil
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
	l.st.Balances[account] += amount
	l.st.Applied++
	c.Emit(LedgerSink, Posting{Account: account, Amount: amount, Balance: l.st.Balances[account], At: stamp(c.Now())})
}

// done registers the save for the delivery's completion, or saves at once
// for an input without a position.
func (l *Ledger) done(c *core.Cycle) error {
	if c.OnComplete(l.save) {
		return nil
	}
	return l.persist()
}

// OnTimer emits the ledger's Summary.
func (l *Ledger) OnTimer(c *core.Cycle, timer int) error {
	var total int64
	for _, b := range l.st.Balances {
		total += b
	}
	c.Emit(LedgerSink, Summary{Timer: timer, Accounts: len(l.st.Balances), Total: total})
	return nil
}

// persist writes the state file atomically: a temporary file in the same
// directory, fsync, rename over the state file, fsync of the directory.
func (l *Ledger) persist() error {
	if l.path == "" {
		return nil
	}
	b, err := l.Snapshot()
	if err != nil {
		return err
	}
	if err := atomicfile.Write(l.path, ".tmp", func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	}); err != nil {
		return fmt.Errorf("apps: ledger state: %w", err)
	}
	killpoint.Reach(killpoint.StateSaved) // tests only: dormant unless armed
	return nil
}
