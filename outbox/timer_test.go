package outbox_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/outbox"
	"github.com/blackbox-audit/blackbox/store"
)

// ticker emits {"n":n,"k":1} for item n and, for an even n, sets a timer
// at once (After(0)) whose cycle emits {"timer":n}: the ledger's "tick".
type ticker struct{ last int }

func (p *ticker) OnEvent(c *core.Cycle, ev any) error {
	n := ev.(int)
	p.last = n
	c.Emit("out", out{n, 1})
	if n%2 == 0 {
		c.After(0)
	}
	return nil
}

func (p *ticker) OnTimer(c *core.Cycle, _ int) error {
	c.Emit("out", map[string]int{"timer": p.last})
	return nil
}

// tickerOutputs is what ticker emits for items from through to, in order.
func tickerOutputs(from, to int) []string {
	var l []string
	for n := from; n <= to; n++ {
		l = append(l, fmt.Sprintf(`{"n":%d,"k":1}`, n))
		if n%2 == 0 {
			l = append(l, fmt.Sprintf(`{"timer":%d}`, n))
		}
	}
	return l
}

// A timer set by an input (After(0)) takes that input's place: a run that
// recorded the input and the timer's outputs and stopped before its
// source committed the input has them delivered by the next Open; the
// next run reads the input again, fires the timer again, and delivers
// neither output again (the timer's output used to leave a second time:
// it had no position to be suppressed with).
func TestATimerFiredAgainAfterAnInputReadAgainIsNotDeliveredAgain(t *testing.T) {
	b := newBench(t)
	tp := newTape(ints(1, 4)...)
	_, box := b.mustOpenFile(outbox.FormatValue)
	tp.setClosed(true)
	l := b.start(box, runConfig{Source: tp.source(), Processor: &ticker{}})
	l.settle()
	if _, err := l.stop(); err != nil {
		t.Fatal(err)
	}
	b.crashBeforeClose()
	// The crash: before any commit (the marks keep the header and the
	// run's line), the file empty, the source's commit at its start.
	ls := readMarkLines(t, b.marks)
	writeMarkLines(t, b.marks, ls[:2])
	truncate(t, b.out, 0)
	tp.setCommitted(0)

	_, box = b.mustOpenFile(outbox.FormatValue)
	if st := box.Status(); st.Recovered != int64(len(tickerOutputs(1, 4))) {
		t.Fatalf("recovery's status %+v, want the crashed run's %d outputs recovered", st, len(tickerOutputs(1, 4)))
	}
	tp.add(ints(5, 6)...)
	l = b.start(box, runConfig{Source: tp.source(), Processor: &ticker{}})
	l.settle()
	st, err := l.stop()
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len(tickerOutputs(1, 4))); st.Suppressed != want {
		t.Errorf("the next run's status %+v: want %d suppressed (the inputs' and the timers')", st, want)
	}
	if diff := cmp.Diff(tickerOutputs(1, 6), lines(t, b.out)); diff != "" {
		t.Fatalf("out file (-want +got):\n%s", diff)
	}
}

// A timer fires after its input's cycle, in a cycle of its own: the
// source may commit that input between the two, before the timer's rows
// are written. The timer's outputs, which wait for that commit, are then
// deliverable at once: no later commit of the feed has to come (a run
// that read its input once ended with a timer's output undelivered, in
// the marks for the next run to recover, when the file source committed
// the "tick" line before the ledger's timer fired).
func TestATimerWrittenAfterItsInputsCommitIsDeliveredWithoutAnotherCommit(t *testing.T) {
	dir := t.TempDir()
	var got []string // the loop's deliveries: read after Close, which waits for them
	sink := effectSinkFunc(func(_ int64, effs []core.Effect) error {
		for _, e := range effs {
			got = append(got, string(e.Payload))
		}
		return nil
	})
	box := begun(t, dir, sink)
	box.Written([]store.Entry{
		{Processor: "p", Index: 1, Kind: store.KindDelivery, Source: "in", Seq: 1, Epoch: 1, Key: "k", Offset: 5, N: 1},
		{Processor: "p", Index: 2, Kind: store.KindIndexed, Source: "in", Seq: 1, N: 1},
		{Processor: "p", Index: 3, Kind: store.KindOutput, Source: "out", Seq: 1, Payload: []byte(`"input"`)},
	})
	box.Observer().Committed("in", engine.Commit{Seq: 1, Epoch: 1, Position: core.Position{Key: "k", Offset: 5}})
	box.Written([]store.Entry{
		{Processor: "p", Index: 4, Kind: store.KindTimer, Seq: 1, N: 1},
		{Processor: "p", Index: 5, Kind: store.KindOutput, Source: "out", Seq: 1, Payload: []byte(`"timer"`)},
	})
	// No commit follows. Close delivers what is ready and nothing that
	// still waits for a commit.
	if err := box.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{`"input"`, `"timer"`}, got); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
	if st := box.Status(); st.Delivered != 2 {
		t.Errorf("status %+v: want 2 delivered", st)
	}
}
