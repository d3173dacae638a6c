package console

import "testing"

// A write counts in the first bucket whose bound holds its rows, and in
// every bucket after it (Prometheus' buckets are cumulative); one past the
// last bound only in the count.
func TestBatchesBuckets(t *testing.T) {
	for _, tc := range []struct {
		rows    []int
		wantLe4 uint64 // writes of at most 4 rows
		wantLe8 uint64
		wantMax uint64 // at most the last bound
		wantN   uint64
		wantSum float64
	}{
		{nil, 0, 0, 0, 0, 0},
		{[]int{4}, 1, 1, 1, 1, 4},
		{[]int{5}, 0, 1, 1, 1, 5},
		{[]int{1, 4, 8, 9}, 2, 3, 4, 4, 22},
		{[]int{4096, 4097}, 0, 0, 1, 2, 8193},
	} {
		var b Batches
		for _, r := range tc.rows {
			b.Add(r)
		}
		n, sum, buckets := b.cumulative()
		got := []any{buckets[4], buckets[8], buckets[batchBounds[len(batchBounds)-1]], n, sum, len(buckets)}
		want := []any{tc.wantLe4, tc.wantLe8, tc.wantMax, tc.wantN, tc.wantSum, len(batchBounds)}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("rows %v: got (le4 le8 leMax count sum buckets) %v, want %v; buckets %v", tc.rows, got, want, buckets)
				break
			}
		}
	}
}
