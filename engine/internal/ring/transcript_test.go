package ring

import (
	"fmt"
	"strings"
	"testing"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/cockroachdb/datadriven"
)

// TestRingTranscripts runs the transcripts in testdata/: each drives one
// Ring as its producer and its consumer, one step at a time, and prints
// what the consumer sees. `go test ./engine/internal/ring -run
// TestRingTranscripts -rewrite` regenerates the expected output after a
// deliberate change: read the diff.
//
// Commands:
//
//	new size=4                      New(4): prints its slots and how often the consumer publishes its head
//	place seq=1 [off=10 epoch=0 key=k]  Place (positioned when off is given): prints the position after it
//	push seq=1                      Push: placed and shown at once
//	flush                           Flush: prints how many placed items it showed
//	take [n=1]                      Take n times: prints each item taken, or empty
//	room                            Room, as the producer sees it
//	publish-head                    PublishHead
//	pause-at                        PauseAt: prints the head at which Drained holds
//	drained                         Drained
//	state                           the producer's and the consumer's counters
func TestRingTranscripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var q *Ring
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			intArg := func(key string, def int64) int64 {
				if !d.HasArg(key) {
					return def
				}
				var v int
				d.ScanArgs(t, key, &v)
				return int64(v)
			}
			if d.Cmd == "new" {
				q = New(int(intArg("size", 1)))
				return fmt.Sprintf("slots %d, head published every %d\n", q.size, q.every)
			}
			if q == nil {
				d.Fatalf(t, "%s before new", d.Cmd)
			}
			switch d.Cmd {
			case "place":
				e := Item{Value: fmt.Sprintf("v%d", intArg("seq", 0)), Seq: intArg("seq", 0)}
				if d.HasArg("off") {
					e.Positioned, e.Epoch, e.Pos.Offset = true, intArg("epoch", 0), intArg("off", 0)
					if d.HasArg("key") {
						d.ScanArgs(t, "key", &e.Pos.Key)
					}
				}
				if q.Room() <= 0 {
					return "no room: not placed\n"
				}
				return fmt.Sprintf("after %d (pending %d)\n", q.Place(e), len(q.pending))
			case "push":
				if q.Room() <= 0 {
					return "no room: not pushed\n"
				}
				seq := intArg("seq", 0)
				q.Push(fmt.Sprintf("v%d", seq), seq)
				return fmt.Sprintf("tail %d\n", q.Tail())
			case "flush":
				n := len(q.pending)
				return fmt.Sprintf("showed %d (%v)\n", n, q.Flush())
			case "take":
				var b strings.Builder
				for range intArg("n", 1) {
					e, ok := q.Take()
					if !ok {
						b.WriteString("empty\n")
						continue
					}
					fmt.Fprintf(&b, "%s\n", describe(e))
				}
				return b.String()
			case "room":
				return fmt.Sprintf("room %d\n", q.Room())
			case "publish-head":
				q.PublishHead()
				return fmt.Sprintf("head %d\n", q.head.Load())
			case "pause-at":
				q.PauseAt()
				return fmt.Sprintf("resume at %d\n", q.resume.Load())
			case "drained":
				return fmt.Sprintf("drained %v\n", q.Drained())
			case "state":
				return fmt.Sprintf("tail %d, taken %d, head published %d, producer's view %d, non-empty %v\n",
					q.Tail(), q.Taken(), q.head.Load(), q.headCache, q.NonEmpty())
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

// describe is one item as the consumer took it.
func describe(e Item) string {
	if !e.Positioned {
		return fmt.Sprintf("seq %d %v push", e.Seq, e.Value)
	}
	return fmt.Sprintf("seq %d %v epoch %d at %s", e.Seq, e.Value, e.Epoch, core.Position{Key: e.Pos.Key, Offset: e.Pos.Offset})
}
