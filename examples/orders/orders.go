// Package orders is an example processor written against blackbox's public
// API (docs/PROCESSORS.md walks through it). It keeps order totals per
// customer over CSV-ish input lines:
//
//	ORDER,CUSTOMER,AMOUNT      e.g. o1,alice,40.00
//
// Blank lines and lines starting with '#' are skipped. Each accepted order
// is emitted to the "totals" sink with the customer's running window total;
// a customer's first order opens a window that a timer closes after the
// "window" option (default 1h), emitting the window's settlement to
// "totals". An order that takes a window over the "limit" option queues a
// reentrant event that emits an alert to the "alerts" sink; a line that
// cannot be read is an alert too.
//
// The processor's state is its open windows and the position of the last
// input it applied, recorded by a completion callback once the input's
// delivery is complete. Snapshot and Restore carry that state from one run
// to the next; a restored processor skips the inputs it already applied
// (core.Delivery.AlreadyApplied), so an input delivered again after a
// restart is counted once.
package orders

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/core"
)

// AppName is the app's name in recordings, golden cases and command lines.
const AppName = "orders"

// The sinks the processor emits to.
const (
	SinkTotals = "totals" // Accepted and Settled values
	SinkAlerts = "alerts" // Alert values
)

// The options New takes.
const (
	// OptionLimit is the window amount above which an order raises an
	// over-limit alert, a decimal such as "50.00"; none by default.
	OptionLimit = "limit"
	// OptionWindow is how long a customer's window stays open after its
	// first order, a Go duration such as "1h" (the default).
	OptionWindow = "window"
)

// DefaultWindow is the window of a processor without the window option.
const DefaultWindow = time.Hour

// ErrEvent is returned by OnEvent for an event of a type it does not know.
var ErrEvent = errors.New("orders: unknown event")

// App is the orders app: its name, its constructor taking the options
// OptionLimit and OptionWindow, and the decoder of its recorded inputs.
func App() core.App {
	return core.App{
		Name: AppName,
		New: func(options map[string]string) (core.Processor, error) {
			p, err := New(options)
			if err != nil {
				return nil, err
			}
			return p, nil
		},
		Decode: Decode,
	}
}

// Decode decodes a recorded input: the processor's inputs are the lines of
// a file, strings, which the recorder's JSON codec records as JSON strings.
func Decode(payload []byte) (any, error) {
	var line string
	if err := json.Unmarshal(payload, &line); err != nil {
		return nil, fmt.Errorf("orders: an input is a JSON string: %w", err)
	}
	return line, nil
}

// Money is an amount in cents. It reads and writes as a decimal with two
// places ("12.50"), in JSON a string.
type Money int64

// ParseMoney reads a non-negative decimal with at most two places.
func ParseMoney(s string) (Money, error) {
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" || dot && (frac == "" || len(frac) > 2) || !digits(whole) || !digits(frac) {
		return 0, fmt.Errorf("amount %q: want a decimal such as 12.50", s)
	}
	for len(frac) < 2 {
		frac += "0"
	}
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("amount %q: %w", s, err)
	}
	return Money(n), nil
}

func digits(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r < '0' || r > '9' })
}

func (m Money) String() string {
	sign := ""
	if m < 0 {
		sign, m = "-", -m
	}
	return fmt.Sprintf("%s%d.%02d", sign, m/100, m%100)
}

// MarshalText writes m as String does.
func (m Money) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads what MarshalText wrote.
func (m *Money) UnmarshalText(b []byte) error {
	v, err := ParseMoney(string(b))
	*m = v
	return err
}

// Accepted is emitted to SinkTotals for each order read: the order and its
// customer's window total with it.
type Accepted struct {
	Order    string `json:"order"`
	Customer string `json:"customer"`
	Amount   Money  `json:"amount"`
	Window   Money  `json:"window"`
}

// Settled is emitted to SinkTotals when a customer's window closes (its
// timer): the window's orders and amount, at the engine clock's time.
type Settled struct {
	Customer string    `json:"customer"`
	Orders   int       `json:"orders"`
	Amount   Money     `json:"amount"`
	At       time.Time `json:"at"`
}

// Alert is emitted to SinkAlerts: an order that took its customer's window
// over the limit (Kind "over-limit"), or a line that is not an order
// (Kind "rejected": Line and Reason).
type Alert struct {
	Kind     string `json:"kind"`
	Customer string `json:"customer,omitempty"`
	Order    string `json:"order,omitempty"`
	Window   Money  `json:"window,omitempty"`
	Limit    Money  `json:"limit,omitempty"`
	Line     string `json:"line,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// overLimit is the reentrant event an order queues when it takes its
// customer's window over the limit: handled in a cycle of its own, right
// after the order's, under the same delivery.
type overLimit struct {
	customer, order string
	window          Money
}

// window is a customer's open window.
type window struct {
	Orders int   `json:"orders"`
	Amount Money `json:"amount"`
}

// state is what a snapshot holds: the open windows, and the delivery
// position of the last input applied (Applied false: none yet).
type state struct {
	Windows  map[string]*window `json:"windows"`
	Applied  bool               `json:"applied"`
	Epoch    int64              `json:"epoch"`
	Position core.Position      `json:"position"`
}

// applied is the processor's completion: once an input's delivery is
// complete (every cycle of it handled, its rows recorded) it records the
// input's position as applied. It is a pointer registered in every cycle
// of a delivery, kept once (core.SameCompletion).
type applied struct{ p *Processor }

// Complete records d's position in the processor's state.
func (a *applied) Complete(d *core.Delivery) error {
	st := &a.p.st
	st.Applied, st.Epoch, st.Position = true, d.Epoch, d.Position
	return nil
}

// Processor keeps the open windows of the customers. It implements
// core.Processor, core.TimerHandler and core.Snapshotter. Like every
// processor it is called by one goroutine at a time: it is not safe for
// concurrent use.
type Processor struct {
	limit  Money // 0: no limit
	window time.Duration
	st     state
	done   *applied
	timers map[int]string // a pending timer's number -> its customer
	rearm  bool           // restored: set the windows' timers at the next cycle
}

// New returns a processor configured by options (OptionLimit,
// OptionWindow); an unknown option, or a value it cannot use, is an error
// wrapping core.ErrOption.
func New(options map[string]string) (*Processor, error) {
	p := &Processor{window: DefaultWindow, st: state{Windows: map[string]*window{}}, timers: map[int]string{}}
	p.done = &applied{p}
	for _, k := range slices.Sorted(maps.Keys(options)) {
		v := options[k]
		switch k {
		case OptionLimit:
			m, err := ParseMoney(v)
			if err != nil || m == 0 {
				return nil, fmt.Errorf("%w: %s=%q: want a positive amount such as 50.00", core.ErrOption, k, v)
			}
			p.limit = m
		case OptionWindow:
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("%w: %s=%q: want a positive duration such as 1h", core.ErrOption, k, v)
			}
			p.window = d
		default:
			return nil, fmt.Errorf("%w: unknown option %q (orders takes %s and %s)", core.ErrOption, k, OptionLimit, OptionWindow)
		}
	}
	return p, nil
}

// OnEvent handles an input line, or the overLimit event an order queued.
// A line whose delivery the state already applied is skipped.
func (p *Processor) OnEvent(c *core.Cycle, ev any) error {
	p.arm(c)
	switch ev := ev.(type) {
	case string:
		d := c.Delivery()
		if p.st.Applied && d.AlreadyApplied(p.st.Epoch, p.st.Position) {
			return nil
		}
		p.line(c, ev)
		// Recorded applied at the delivery's completion, once every cycle
		// of the line ran and its rows were recorded: the state never
		// claims a line whose reentrant cycles or recording did not finish.
		// An input without a position (pushed) has nothing to record.
		c.OnComplete(p.done)
		return nil
	case overLimit:
		c.Emit(SinkAlerts, Alert{Kind: "over-limit", Customer: ev.customer, Order: ev.order, Window: ev.window, Limit: p.limit})
		return nil
	}
	return fmt.Errorf("%w: %T", ErrEvent, ev)
}

func (p *Processor) line(c *core.Cycle, line string) {
	line = strings.TrimSpace(line)
	if line == "" || strings.HasPrefix(line, "#") {
		return
	}
	o, err := parseOrder(line)
	if err != nil {
		c.Emit(SinkAlerts, Alert{Kind: "rejected", Line: line, Reason: err.Error()})
		return
	}
	w := p.st.Windows[o.Customer]
	if w == nil {
		w = &window{}
		p.st.Windows[o.Customer] = w
		p.timers[c.After(p.window)] = o.Customer
	}
	before := w.Amount
	w.Orders++
	w.Amount += o.Amount
	c.Emit(SinkTotals, Accepted{Order: o.ID, Customer: o.Customer, Amount: o.Amount, Window: w.Amount})
	if p.limit > 0 && before <= p.limit && w.Amount > p.limit {
		c.Queue(overLimit{customer: o.Customer, order: o.ID, window: w.Amount})
	}
}

// OnTimer closes the window of the timer's customer.
func (p *Processor) OnTimer(c *core.Cycle, timer int) error {
	p.arm(c)
	customer, ok := p.timers[timer]
	if !ok {
		return fmt.Errorf("orders: timer %d closes no window", timer)
	}
	delete(p.timers, timer)
	w := p.st.Windows[customer]
	delete(p.st.Windows, customer)
	c.Emit(SinkTotals, Settled{Customer: customer, Orders: w.Orders, Amount: w.Amount, At: c.Now()})
	return nil
}

// arm sets the timers of the windows a restored snapshot holds, in
// customer order, once, in the first cycle after Restore: timers are not
// part of a snapshot, so a restored window stays open a whole window more.
func (p *Processor) arm(c *core.Cycle) {
	if !p.rearm {
		return
	}
	p.rearm = false
	for _, customer := range slices.Sorted(maps.Keys(p.st.Windows)) {
		p.timers[c.After(p.window)] = customer
	}
}

// Snapshot captures the state: the open windows and the last input
// applied (JSON; map keys sorted, so equal states give equal bytes).
func (p *Processor) Snapshot() ([]byte, error) {
	return json.Marshal(p.st)
}

// Restore replaces the processor's state by a snapshot's; the windows'
// timers are set again in the next cycle.
func (p *Processor) Restore(snapshot []byte) error {
	var st state
	if err := json.Unmarshal(snapshot, &st); err != nil {
		return fmt.Errorf("orders: snapshot: %w", err)
	}
	if st.Windows == nil {
		st.Windows = map[string]*window{}
	}
	p.st, p.timers, p.rearm = st, map[int]string{}, true
	return nil
}

// order is one input line read.
type order struct {
	ID, Customer string
	Amount       Money
}

func parseOrder(line string) (order, error) {
	f := strings.Split(line, ",")
	if len(f) != 3 {
		return order{}, fmt.Errorf("want ORDER,CUSTOMER,AMOUNT, got %d fields", len(f))
	}
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	if f[0] == "" || f[1] == "" {
		return order{}, errors.New("an order needs an id and a customer")
	}
	m, err := ParseMoney(f[2])
	if err != nil {
		return order{}, err
	}
	return order{ID: f[0], Customer: f[1], Amount: m}, nil
}
