package engine

import (
	"runtime"
	"testing"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/google/go-cmp/cmp"
)

// The ring hands over every field of an envelope, in order, across many
// wraps, in batches shown to the consumer only when flushed: positioned and push items mixed, epochs changing, keys set and
// unset, and sequences with gaps (items dropped for this queue).
func TestQueueHandsOverEveryField(t *testing.T) {
	q := newQueue(8)
	var want, got []envelope
	seq := int64(0)
	for round := range 40 {
		n := 1 + round%int(q.size)
		for i := range n {
			seq += 1 + int64(i%3) // gaps: other queues' or dropped items
			e := envelope{item: seq, seq: seq}
			switch (round + i) % 4 {
			case 1:
				e.positioned, e.epoch, e.pos = true, int64(round/5), core.Position{Offset: seq * 10}
			case 2:
				e.positioned, e.epoch, e.pos = true, int64(round/5), core.Position{Key: "p" + string(rune('0'+i%7)), Offset: seq}
			case 3:
				e.positioned, e.epoch, e.pos = true, int64(round/3), core.Position{Offset: seq}
			}
			if q.room() <= 0 {
				t.Fatalf("round %d item %d: no room with %d queued of %d", round, i, q.tail-q.headLocal, q.size)
			}
			if round%3 == 0 && !e.positioned {
				// A publish's hand-off, between batches.
				q.flush()
				q.push(e.item, e.seq)
			} else {
				q.place(e)
			}
			want = append(want, e)
		}
		if round%3 != 0 && q.nonEmpty() {
			t.Fatalf("round %d: the consumer sees items placed and not flushed", round)
		}
		q.flush()
		if !q.nonEmpty() {
			t.Fatalf("round %d: nonEmpty false with %d queued", round, n)
		}
		for {
			e, ok := q.take()
			if !ok {
				break
			}
			got = append(got, e)
		}
		if q.nonEmpty() {
			t.Fatalf("round %d: nonEmpty true on an empty queue", round)
		}
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(envelope{})); diff != "" {
		t.Fatalf("taken items differ (-offered +taken):\n%s", diff)
	}
}

// QueueSize is a guaranteed capacity: the producer can queue that many items
// beyond what the consumer has published as taken.
func TestQueueCapacityIsGuaranteed(t *testing.T) {
	for _, size := range []int{1, 2, 7, 64, 1024} {
		q := newQueue(size)
		for range 3 {
			for i := range size {
				if q.room() <= 0 {
					t.Fatalf("size %d: full after %d items", size, i)
				}
				q.place(envelope{seq: q.tail + 1})
				q.flush()
			}
			// The consumer takes all but publishes its head only now and
			// then: the producer must still see room for size items once
			// the consumer is idle (take found the queue empty).
			for {
				if _, ok := q.take(); !ok {
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
func TestQueueBatchesCrossGoroutines(t *testing.T) {
	const total = 50_000
	q := newQueue(64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		seq := int64(0)
		for n := 1; seq < total; n = n%97 + 1 {
			for k := 0; k < n && seq < total; k++ {
				for q.room() <= 0 {
					q.flush()
					runtime.Gosched()
				}
				seq++
				q.placePositioned(seq, seq, seq/1000, &core.Position{Offset: seq * 3})
			}
			q.flush()
		}
	}()
	var last int64
	for last < total {
		e, ok := q.take()
		if !ok {
			runtime.Gosched()
			continue
		}
		want := envelope{item: last + 1, seq: last + 1, epoch: (last + 1) / 1000, pos: core.Position{Offset: (last + 1) * 3}, positioned: true}
		if diff := cmp.Diff(want, e, cmp.AllowUnexported(envelope{})); diff != "" {
			t.Fatalf("after %d (-want +got):\n%s", last, diff)
		}
		last = e.seq
	}
	<-done
}

// A refused producer is signalled when its queue is half empty: drained
// turns true when the consumer has taken the items past half of what was
// queued at the refusal, not before.
func TestQueueDrainedAtHalf(t *testing.T) {
	q := newQueue(64)
	for q.room() > 0 {
		q.place(envelope{seq: q.tail + 1})
	}
	q.flush()
	q.pauseAt()
	queued := q.tail
	for taken := int64(0); taken < queued; taken++ {
		got, want := q.drained(), queued-taken <= q.size/2
		if got != want {
			t.Fatalf("%d of %d queued: drained %v, want %v", queued-taken, queued, got, want)
		}
		if _, ok := q.take(); !ok {
			t.Fatalf("empty after %d of %d", taken, queued)
		}
	}
}
