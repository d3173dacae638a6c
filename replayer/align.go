package replayer

import "slices"

// maxAlignEdits bounds the content alignment of one chunk (the inputs of a
// lane between two inputs aligned by position): Myers' algorithm stops once
// the chunk needs more than this many removed plus inserted inputs, and the
// chunk's inputs stay unaligned (only in A, only in B). It bounds the
// alignment's memory (the trace of Myers' furthest points: about
// maxAlignEdits² 4-byte ints, 16 MB) and its time (O((n+m)·maxAlignEdits)
// comparisons of 64-bit hashes for a chunk of n and m inputs).
const maxAlignEdits = 2000

// lcsMatches aligns a and b (hashes of inputs, in stream order) as a text
// diff would: it returns the pairs (i, j) of a shortest edit script's
// matched elements, increasing in both i and j, and ok. It returns ok false
// when more than maxEdits removals plus insertions are needed. Myers' greedy
// algorithm ("An O(ND) Difference Algorithm", 1986) with its trace kept for
// the walk back: O((n+m)·D) time, O(D²) memory for D edits.
func lcsMatches(a, b []uint64, maxEdits int) (matches [][2]int, ok bool) {
	n, m := len(a), len(b)
	limit := min(maxEdits, n+m)
	// v[k+off] is the furthest x reached on diagonal k = x - y.
	off := limit + 1
	v := make([]int32, 2*limit+3)
	var trace [][]int32 // trace[d][k+d]: v after step d, diagonals -d..d
	end := -1
	for d := 0; d <= limit && end < 0; d++ {
		for k := -d; k <= d; k += 2 {
			var x int
			switch {
			case d == 0:
				x = 0
			case k == -d || (k != d && v[off+k-1] < v[off+k+1]):
				x = int(v[off+k+1]) // down: insert b[y-1]
			default:
				x = int(v[off+k-1]) + 1 // right: remove a[x-1]
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = int32(x)
			if x >= n && y >= m {
				end = d
			}
		}
		trace = append(trace, append([]int32(nil), v[off-d:off+d+1]...))
	}
	if end < 0 {
		return nil, false
	}
	// Walk back from (n, m), collecting the snakes' matches in reverse.
	x, y := n, m
	for d := end; d >= 0; d-- {
		var px, py int
		if d > 0 {
			prev := trace[d-1] // diagonals -(d-1)..d-1 at index k+d-1
			k := x - y
			pk := k - 1
			if k == -d || (k != d && prev[k-1+d-1] < prev[k+1+d-1]) {
				pk = k + 1
			}
			px = int(prev[pk+d-1])
			py = px - pk
		}
		// The snake ends at (x, y) and starts after the edit from (px, py).
		sx, sy := px, py
		switch {
		case d > 0 && px-py == x-y-1: // a removal: x advanced
			sx = px + 1
		case d > 0: // an insertion: y advanced
			sy = py + 1
		}
		for x > sx && y > sy {
			x, y = x-1, y-1
			matches = append(matches, [2]int{x, y})
		}
		x, y = px, py
	}
	slices.Reverse(matches)
	return matches, true
}
