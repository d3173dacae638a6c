package core_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/core"
)

// thermostat is a processor: it logs every reading, raises an alert for a
// reading above 30, re-checks it in a reentrant cycle, and once a minute
// after its first reading reports how many it saw.
type thermostat struct{ readings int }

func (p *thermostat) OnEvent(c *core.Cycle, ev any) error {
	switch ev := ev.(type) {
	case int:
		p.readings++
		c.Emit("log", ev)
		if ev > 30 {
			c.Emit("alerts", fmt.Sprintf("%d°C at %s", ev, c.Now().Format(time.TimeOnly)))
			c.Queue(recheck(ev)) // runs after this cycle, under the same delivery
		}
		if p.readings == 1 {
			c.After(time.Minute)
		}
	case recheck:
		c.Emit("log", fmt.Sprintf("recheck %d from %s", int(ev), c.Delivery().Feed))
	}
	return nil
}

// OnTimer makes thermostat a core.TimerHandler.
func (p *thermostat) OnTimer(c *core.Cycle, timer int) error {
	c.Emit("summary", fmt.Sprintf("%d readings", p.readings))
	return nil
}

type recheck int

func printTrace(t *core.Trace) {
	fmt.Printf("%s: %d cycle(s), timer %d, err %v\n", t.Processor, t.Cycles, t.Timer, t.Err)
	for i, o := range t.Outputs {
		fmt.Printf("  output %d to %s: %v\n", i+1, o.Sink, o.Value)
	}
	for _, r := range t.Reads {
		fmt.Printf("  clock read %s\n", r.Format(time.TimeOnly))
	}
}

// A Host runs one processor deterministically and returns a Trace of each
// input and timer: here with a step clock (one second per reading) and a
// scheduler that only prints when timers are due.
func ExampleHost() {
	clock := core.NewStepClock(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC), time.Second)
	timerClock := core.NewStepClock(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC), 0)
	h := core.NewHost("thermostat", &thermostat{}, clock,
		core.WithTimers(timerClock, func(timer int, due time.Time) {
			fmt.Printf("timer %d due at %s\n", timer, due.Format(time.TimeOnly))
		}))

	printTrace(h.Handle(&core.Delivery{Feed: "sensors", Sequence: 1, Position: core.Position{Offset: 3}}, 21))
	printTrace(h.Handle(&core.Delivery{Feed: "sensors", Sequence: 2, Position: core.Position{Offset: 6}}, 34))
	printTrace(h.Fire(1))
	// Output:
	// timer 1 due at 09:01:00
	// thermostat: 1 cycle(s), timer 0, err <nil>
	//   output 1 to log: 21
	// thermostat: 2 cycle(s), timer 0, err <nil>
	//   output 1 to log: 34
	//   output 2 to alerts: 34°C at 09:00:00
	//   output 3 to log: recheck 34 from sensors
	//   clock read 09:00:00
	// thermostat: 1 cycle(s), timer 1, err <nil>
	//   output 1 to summary: 2 readings
}

// batcher buffers the rows of a line and writes them once the delivery is
// complete. It registers the same *flush for every row: OnComplete keeps it
// once per delivery.
type batcher struct {
	rows  []string
	flush *flush
}

type flush struct{ b *batcher }

func (f *flush) Complete(d *core.Delivery) error {
	fmt.Printf("write %s through offset %s\n", strings.Join(f.b.rows, " "), d.Position)
	f.b.rows = f.b.rows[:0]
	return nil
}

func (b *batcher) OnEvent(c *core.Cycle, ev any) error {
	line := ev.(string)
	row, rest, more := strings.Cut(line, ",")
	b.rows = append(b.rows, row)
	c.OnComplete(b.flush)
	if more {
		c.Queue(rest)
	}
	return nil
}

// A completion runs once the positioned delivery is complete: the engine
// runs the Trace's completions after the input's last cycle; a Host's
// caller runs them with Host.Complete.
func ExampleCycle_OnComplete() {
	b := &batcher{}
	b.flush = &flush{b}
	h := core.NewHost("batcher", b, core.SystemClock())

	t := h.Handle(&core.Delivery{Feed: "lines", Sequence: 1, Position: core.Position{Offset: 6}}, "a,b,c")
	fmt.Printf("%d cycles, %d completion(s)\n", t.Cycles, len(t.Completions))
	for _, f := range t.Completions {
		if err := h.Complete(f, t.Delivery); err != nil {
			fmt.Println(err)
		}
	}
	// Output:
	// 3 cycles, 1 completion(s)
	// write a b c through offset 6
}
