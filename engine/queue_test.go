package engine

import (
	"testing"

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
				e.positioned, e.epoch, e.pos = true, int64(round/5), Position{Offset: seq * 10}
			case 2:
				e.positioned, e.epoch, e.pos = true, int64(round/5), Position{Key: "p" + string(rune('0'+i%7)), Offset: seq}
			case 3:
				e.positioned, e.epoch, e.pos = true, int64(round/3), Position{Offset: seq}
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
		if round%3 != 0 && q.holds(0) {
			t.Fatalf("round %d: the consumer sees items placed and not flushed", round)
		}
		q.flush()
		if !q.holds(int64(n - 1)) {
			t.Fatalf("round %d: holds(%d) false with %d queued", round, n-1, n)
		}
		if n < int(q.size) && q.holds(int64(n)) {
			t.Fatalf("round %d: holds(%d) true with %d queued", round, n, n)
		}
		for {
			e, ok := q.take()
			if !ok {
				break
			}
			got = append(got, e)
		}
		if q.holds(0) {
			t.Fatalf("round %d: holds(0) true on an empty queue", round)
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
