package store

import (
	"slices"
	"testing"
)

func TestIntervals(t *testing.T) {
	tests := []struct {
		add  []int64
		want []span
	}{
		{nil, nil},
		{[]int64{1, 2, 3}, []span{{1, 3}}},
		{[]int64{3, 2, 1}, []span{{1, 3}}},
		{[]int64{1, 3, 2}, []span{{1, 3}}},
		{[]int64{1, 5, 3}, []span{{1, 1}, {3, 3}, {5, 5}}},
		{[]int64{5, 1, 3, 4, 2}, []span{{1, 5}}},
		{[]int64{1, 1, 2, 2}, []span{{1, 2}}},
		{[]int64{maxInt64, maxInt64 - 1, -maxInt64 - 1}, []span{{-maxInt64 - 1, -maxInt64 - 1}, {maxInt64 - 1, maxInt64}}},
	}
	for _, tt := range tests {
		var s intervals
		for _, x := range tt.add {
			s.add(x)
		}
		if !slices.Equal(s.iv, tt.want) {
			t.Errorf("add(%v) = %v, want %v", tt.add, s.iv, tt.want)
		}
		for _, x := range tt.add {
			if !s.contains(x) {
				t.Errorf("add(%v): contains(%d) = false", tt.add, x)
			}
		}
		if s.contains(4) != slices.Contains(tt.add, 4) {
			t.Errorf("add(%v): contains(4) = %v", tt.add, s.contains(4))
		}
	}
}

func TestIntervalsMinus(t *testing.T) {
	mk := func(xs ...int64) *intervals {
		var s intervals
		for _, x := range xs {
			s.add(x)
		}
		return &s
	}
	tests := []struct {
		a, b *intervals
		want []span
	}{
		{mk(1, 2, 3, 4, 5), nil, []span{{1, 5}}},
		{mk(1, 2, 3, 4, 5), mk(1, 2, 3, 4, 5), nil},
		{mk(1, 2, 3, 4, 5), mk(2, 4), []span{{1, 1}, {3, 3}, {5, 5}}},
		{mk(1, 2, 3, 7, 8), mk(0, 1, 8, 9), []span{{2, 3}, {7, 7}}},
		{mk(5), mk(1, 2, 9), []span{{5, 5}}},
	}
	for _, tt := range tests {
		if got := tt.a.minus(tt.b); !slices.Equal(got, tt.want) {
			t.Errorf("%v minus %v = %v, want %v", tt.a.iv, tt.b, got, tt.want)
		}
	}
}

// TestIntervalsAddRange: a range joins the spans it overlaps or touches,
// wherever it falls, as adding each of its values would.
func TestIntervalsAddRange(t *testing.T) {
	tests := []struct {
		start []span // added as ranges first, in order
		lo    int64
		hi    int64
		want  []span
	}{
		{nil, 2, 4, []span{{2, 4}}},
		{[]span{{1, 1}}, 2, 4, []span{{1, 4}}},
		{[]span{{1, 1}}, 3, 4, []span{{1, 1}, {3, 4}}},
		{[]span{{10, 12}}, 2, 4, []span{{2, 4}, {10, 12}}},
		{[]span{{10, 12}}, 2, 9, []span{{2, 12}}},
		{[]span{{1, 2}, {5, 6}, {9, 9}}, 3, 8, []span{{1, 9}}},
		{[]span{{1, 2}, {5, 6}, {20, 21}}, 4, 7, []span{{1, 2}, {4, 7}, {20, 21}}},
		{[]span{{1, 10}}, 3, 4, []span{{1, 10}}},
		{[]span{{5, 6}}, 1, 100, []span{{1, 100}}},
	}
	for _, tt := range tests {
		var s, each intervals
		for _, sp := range tt.start {
			s.addRange(sp.lo, sp.hi)
			for x := sp.lo; x <= sp.hi; x++ {
				each.add(x)
			}
		}
		s.addRange(tt.lo, tt.hi)
		for x := tt.lo; x <= tt.hi; x++ {
			each.add(x)
		}
		if !slices.Equal(s.iv, tt.want) || !slices.Equal(each.iv, tt.want) {
			t.Errorf("%v + [%d, %d] = %v (value by value %v), want %v", tt.start, tt.lo, tt.hi, s.iv, each.iv, tt.want)
		}
	}
}
