package replayer

import (
	"math/rand/v2"
	"testing"
)

// lcsLength is the length of a longest common subsequence of a and b, by
// dynamic programming.
func lcsLength(a, b []uint64) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for i := range a {
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(prev[j+1], cur[j])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// checkMatches fails unless matches is a common subsequence of a and b, of
// the longest length.
func checkMatches(t *testing.T, a, b []uint64, matches [][2]int) {
	t.Helper()
	for k, m := range matches {
		if m[0] < 0 || m[0] >= len(a) || m[1] < 0 || m[1] >= len(b) || a[m[0]] != b[m[1]] {
			t.Fatalf("a %v b %v: match %v is not a pair of equal elements", a, b, m)
		}
		if k > 0 && (m[0] <= matches[k-1][0] || m[1] <= matches[k-1][1]) {
			t.Fatalf("a %v b %v: matches %v do not increase", a, b, matches)
		}
	}
	if want := lcsLength(a, b); len(matches) != want {
		t.Fatalf("a %v b %v: %d matches %v, the longest common subsequence has %d", a, b, len(matches), matches, want)
	}
}

func TestLCSMatchesIsALongestCommonSubsequence(t *testing.T) {
	for _, tc := range []struct{ a, b []uint64 }{
		{nil, nil}, {[]uint64{1}, nil}, {nil, []uint64{1}}, {[]uint64{1}, []uint64{2}},
		{[]uint64{1, 2, 3}, []uint64{1, 2, 3}}, {[]uint64{1, 2, 3}, []uint64{1, 9, 3}},
		{[]uint64{1, 2}, []uint64{2, 1}}, {[]uint64{1, 2, 3, 4}, []uint64{2, 4}}, {[]uint64{2, 4}, []uint64{1, 2, 3, 4}},
	} {
		m, ok := lcsMatches(tc.a, tc.b, 100)
		if !ok {
			t.Fatalf("a %v b %v: gave up", tc.a, tc.b)
		}
		checkMatches(t, tc.a, tc.b, m)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		a, b := make([]uint64, r.IntN(30)), make([]uint64, r.IntN(30))
		for i := range a {
			a[i] = r.Uint64N(4)
		}
		for i := range b {
			b[i] = r.Uint64N(4)
		}
		m, ok := lcsMatches(a, b, len(a)+len(b))
		if !ok {
			t.Fatalf("a %v b %v: gave up with enough edits for any pair", a, b)
		}
		checkMatches(t, a, b, m)
	}
}

// TestLCSMatchesGivesUpBeyondItsBound: two sequences with nothing in
// common need len(a)+len(b) edits; a bound below gives up.
func TestLCSMatchesGivesUpBeyondItsBound(t *testing.T) {
	a, b := []uint64{1, 2, 3}, []uint64{4, 5, 6}
	if _, ok := lcsMatches(a, b, 5); ok {
		t.Error("6 edits within a bound of 5")
	}
	if m, ok := lcsMatches(a, b, 6); !ok || len(m) != 0 {
		t.Errorf("bound 6: matches %v ok %v, want none and ok", m, ok)
	}
}

func FuzzLCSMatches(f *testing.F) {
	f.Add([]byte("abcabba"), []byte("cbabac"))
	f.Add([]byte(""), []byte("x"))
	f.Fuzz(func(t *testing.T, x, y []byte) {
		if len(x) > 200 || len(y) > 200 {
			return
		}
		a, b := make([]uint64, len(x)), make([]uint64, len(y))
		for i, c := range x {
			a[i] = uint64(c % 8)
		}
		for i, c := range y {
			b[i] = uint64(c % 8)
		}
		m, ok := lcsMatches(a, b, len(a)+len(b))
		if !ok {
			t.Fatal("gave up with enough edits for any pair")
		}
		checkMatches(t, a, b, m)
	})
}
