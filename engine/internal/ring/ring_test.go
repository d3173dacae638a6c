package ring

import (
	"runtime"
	"testing"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/google/go-cmp/cmp"
)

// The ring hands over every field of an Item, in order, across many
// wraps, in batches shown to the consumer only when flushed: positioned and push items mixed, epochs changing, keys set and
// unset, and sequences with gaps (items dropped for this queue).
func TestRingHandsOverEveryField(t *testing.T) {
	q := New(8)
	var want, got []Item
	seq := int64(0)
	for round := range 40 {
		n := 1 + round%int(q.size)
		for i := range n {
			seq += 1 + int64(i%3) // gaps: other queues' or dropped items
			e := Item{Value: seq, Seq: seq}
			switch (round + i) % 4 {
			case 1:
				e.Positioned, e.Epoch, e.Pos = true, int64(round/5), core.Position{Offset: seq * 10}
			case 2:
				e.Positioned, e.Epoch, e.Pos = true, int64(round/5), core.Position{Key: "p" + string(rune('0'+i%7)), Offset: seq}
			case 3:
				e.Positioned, e.Epoch, e.Pos = true, int64(round/3), core.Position{Offset: seq}
			}
			if q.Room() <= 0 {
				t.Fatalf("round %d item %d: no room with %d queued of %d", round, i, q.tail-q.headLocal, q.size)
			}
			if round%3 == 0 && !e.Positioned {
				// A publish's hand-off, between batches.
				q.Flush()
				q.Push(e.Value, e.Seq)
			} else {
				q.Place(e)
			}
			want = append(want, e)
		}
		if round%3 != 0 && q.NonEmpty() {
			t.Fatalf("round %d: the consumer sees items placed and not flushed", round)
		}
		q.Flush()
		if !q.NonEmpty() {
			t.Fatalf("round %d: nonEmpty false with %d queued", round, n)
		}
		for {
			e, ok := q.Take()
			if !ok {
				break
			}
			got = append(got, e)
		}
		if q.NonEmpty() {
			t.Fatalf("round %d: nonEmpty true on an empty queue", round)
		}
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(Item{})); diff != "" {
		t.Fatalf("taken items differ (-offered +taken):\n%s", diff)
	}
}

// QueueSize is a guaranteed capacity: the producer can queue that many items
// beyond what the consumer has published as taken.
func TestRingCapacityIsGuaranteed(t *testing.T) {
	for _, size := range []int{1, 2, 7, 64, 1024} {
		q := New(size)
		for range 3 {
			for i := range size {
				if q.Room() <= 0 {
					t.Fatalf("size %d: full after %d items", size, i)
				}
				q.Place(Item{Seq: q.tail + 1})
				q.Flush()
			}
			// The consumer takes all but publishes its head only now and
			// then: the producer must still see room for size items once
			// the consumer is idle (take found the queue empty).
			for {
				if _, ok := q.Take(); !ok {
					break
				}
			}
		}
	}
}

// A producer and a consumer on two goroutines: batches of every size, each
// shown with one atomic store, arrive whole and in order. Run with -race,
// this also checks that the plain stores of a batch's tags happen before the
// consumer reads them. The two sides spin (Gosched) on a full or empty
// ring: the ring has no wait of its own (the group's wake-up is outside
// it), and a channel or lock between them would order the stores itself and
// hide what -race is here to catch.
func TestRingBatchesCrossGoroutines(t *testing.T) {
	const total = 50_000
	q := New(64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		seq := int64(0)
		for n := 1; seq < total; n = n%97 + 1 {
			for k := 0; k < n && seq < total; k++ {
				for q.Room() <= 0 {
					q.Flush()
					runtime.Gosched()
				}
				seq++
				q.PlacePositioned(seq, seq, seq/1000, &core.Position{Offset: seq * 3})
			}
			q.Flush()
		}
	}()
	var last int64
	for last < total {
		e, ok := q.Take()
		if !ok {
			runtime.Gosched()
			continue
		}
		want := Item{Value: last + 1, Seq: last + 1, Epoch: (last + 1) / 1000, Pos: core.Position{Offset: (last + 1) * 3}, Positioned: true}
		if diff := cmp.Diff(want, e, cmp.AllowUnexported(Item{})); diff != "" {
			t.Fatalf("after %d (-want +got):\n%s", last, diff)
		}
		last = e.Seq
	}
	<-done
}

// A refused producer is signalled when its queue is half empty: drained
// turns true when the consumer has taken the items past half of what was
// queued at the refusal, not before.
func TestRingDrainedAtHalf(t *testing.T) {
	q := New(64)
	for q.Room() > 0 {
		q.Place(Item{Seq: q.tail + 1})
	}
	q.Flush()
	q.PauseAt()
	queued := q.tail
	for taken := int64(0); taken < queued; taken++ {
		got, want := q.Drained(), queued-taken <= q.size/2
		if got != want {
			t.Fatalf("%d of %d queued: drained %v, want %v", queued-taken, queued, got, want)
		}
		if _, ok := q.Take(); !ok {
			t.Fatalf("empty after %d of %d", taken, queued)
		}
	}
}
