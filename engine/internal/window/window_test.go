package window

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/cockroachdb/datadriven"
)

// queue is a Target whose acknowledgement point the transcript sets.
type queue struct {
	name string
	ack  int64
}

func (q *queue) AckPoint() int64 { return q.ack }

// TestWindowTranscripts runs the transcripts in testdata/: each drives one
// Window of a feed whose queues it names, and prints what leaves it. `go
// test ./engine/internal/window -run TestWindowTranscripts -rewrite`
// regenerates the expected output after a deliberate change: read the
// diff.
//
// Commands:
//
//	queues a b                  the feed's queues (each entry is offered to them all), acknowledged through 0
//	push seq=1 off=10 [epoch=0 key=k t=5] [a=3 b=0 ...]
//	                            Push, then the position after the item in each queue (0 or absent: not offered), and when it was taken (t, seconds)
//	coalesce                    Coalesce the entry pushed last
//	ack a=3 [b=2 ...]           move queues' acknowledgement points
//	pop                         PopDue: prints the entries that left
//	waits q=a                   WaitsFor(a)
//	forget q=a from=2           Forget(a, 2): prints the entries forgotten (their own item)
//	show                        the entries, oldest first, and whether each is due
func TestWindowTranscripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var w Window[*queue]
		var queues []*queue
		var last *Entry[*queue]
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			intArg := func(key string) int64 {
				var v int
				if d.HasArg(key) {
					d.ScanArgs(t, key, &v)
				}
				return int64(v)
			}
			switch d.Cmd {
			case "queues":
				w, queues, last = Window[*queue]{}, nil, nil
				for _, a := range d.CmdArgs {
					queues = append(queues, &queue{name: a.Key})
				}
				return show(&w)
			case "push":
				pos := core.Position{Offset: intArg("off")}
				if d.HasArg("key") {
					d.ScanArgs(t, "key", &pos.Key)
				}
				last = w.Push(intArg("seq"), intArg("epoch"), pos, queues)
				if d.HasArg("t") {
					last.At = time.Unix(intArg("t"), 0)
				}
				for i, q := range queues {
					last.After[i] = intArg(q.name)
				}
				return show(&w)
			case "coalesce":
				w.Coalesce(last)
				last = nil
				return show(&w)
			case "ack":
				for _, q := range queues {
					if d.HasArg(q.name) {
						q.ack = intArg(q.name)
					}
				}
				return show(&w)
			case "pop":
				var b strings.Builder
				for _, a := range w.PopDue(nil) {
					fmt.Fprintf(&b, "acknowledged seq %d epoch %d at %s%s\n", a.Seq, a.Epoch, a.Pos, taken(a.At))
				}
				return b.String() + show(&w)
			case "waits":
				var name string
				d.ScanArgs(t, "q", &name)
				for _, q := range queues {
					if q.name == name {
						return fmt.Sprintf("%v\n", w.WaitsFor(q))
					}
				}
				d.Fatalf(t, "no queue %q", name)
			case "forget":
				var name string
				d.ScanArgs(t, "q", &name)
				for _, q := range queues {
					if q.name == name {
						var b strings.Builder
						w.Forget(q, intArg("from"), func(e *Entry[*queue], after int64) {
							fmt.Fprintf(&b, "forgot item seq %d offset %d at %s %d\n", e.ItemSeq, e.ItemOffset, q.name, after)
						})
						return b.String() + show(&w)
					}
				}
				d.Fatalf(t, "no queue %q", name)
			case "show":
				return show(&w)
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

// show prints the window's entries, oldest first.
func show(w *Window[*queue]) string {
	if w.Len() == 0 {
		return "empty\n"
	}
	var b strings.Builder
	for i := range w.Len() {
		e := w.At(i)
		fmt.Fprintf(&b, "seq %d epoch %d at %s:", e.Seq, e.Epoch, e.Pos)
		for j, q := range e.Targets {
			if e.After[j] == 0 {
				fmt.Fprintf(&b, " %s -", q.name)
			} else {
				fmt.Fprintf(&b, " %s %d/%d", q.name, q.AckPoint(), e.After[j])
			}
		}
		fmt.Fprintf(&b, " due %v%s\n", e.Due(), taken(e.At))
	}
	return b.String()
}

// taken prints when an entry was taken (t=, in seconds), nothing when it
// was not timed.
func taken(at time.Time) string {
	if at.IsZero() {
		return ""
	}
	return fmt.Sprintf(" taken t=%d", at.Unix())
}
