package kafkasink_test

import (
	"fmt"
	"testing"
)

// BenchmarkDeliver is one batch's transaction (begin, produce, commit) on
// an in-process cluster, by batch size; and one Delivered after them.
func BenchmarkDeliver(b *testing.B) {
	for _, size := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			c := newCluster(b)
			s := openSink(b, c, "tx", 0)
			es := effects(0, size)
			var n int64
			for b.Loop() {
				n++
				if err := s.Deliver(n, es); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*int64(size)), "ns/output")
		})
	}
}

// BenchmarkDelivered reads back the last batch of a topic holding 1,000
// batches of 10 outputs over 3 partitions.
func BenchmarkDelivered(b *testing.B) {
	c := newCluster(b)
	s := openSink(b, c, "tx", 0)
	for n := int64(1); n <= 1000; n++ {
		if err := s.Deliver(n, effects(int(n)*10, 10)); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if got, err := s.Delivered(); err != nil || got != 1000 {
			b.Fatalf("Delivered: %d, %v", got, err)
		}
	}
}
