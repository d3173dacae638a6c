package incident

import (
	"math"
	"slices"
	"testing"
)

// TestSpansGapsAndHas: table of seq sets and the gaps of 1 ... through,
// a DROPPED row of the largest count and seqs at the top of int64 included.
func TestSpansGapsAndHas(t *testing.T) {
	tests := []struct {
		name    string
		add     []span // lo, n
		through int64
		gaps    []span
		has     []int64
		hasNot  []int64
	}{
		{"none", nil, 3, []span{{1, 3}}, nil, []int64{1}},
		{"all", []span{{1, 1}, {2, 2}}, 3, nil, []int64{1, 2, 3}, []int64{4}},
		{"holes", []span{{2, 1}, {5, 2}}, 8, []span{{1, 1}, {3, 4}, {7, 8}}, []int64{2, 5, 6}, []int64{4, 7}},
		{"overlapping", []span{{3, 5}, {1, 3}}, 9, []span{{8, 9}}, []int64{7}, []int64{8}},
		{"to the top", []span{{2, math.MaxInt64}}, math.MaxInt64, []span{{1, 1}}, []int64{math.MaxInt64}, []int64{1}},
		{"a seq at the top", []span{{math.MaxInt64, 1}}, 4, []span{{1, 4}}, []int64{math.MaxInt64}, []int64{4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s spans
			for _, a := range tt.add {
				s.addRange(a.lo, a.hi)
			}
			s.merge()
			if got := s.gaps(tt.through); !slices.Equal(got, tt.gaps) {
				t.Errorf("gaps(%d) = %v, want %v", tt.through, got, tt.gaps)
			}
			for _, x := range tt.has {
				if !s.has(x) {
					t.Errorf("has(%d) = false", x)
				}
			}
			for _, x := range tt.hasNot {
				if s.has(x) {
					t.Errorf("has(%d) = true", x)
				}
			}
		})
	}
}
