package recorder

import (
	"sync"
	"testing"
)

// TestJournalRing: a slot answers only for the seq it holds; a seq whose
// slot was reused is a miss (its input is then recorded INLINE).
func TestJournalRing(t *testing.T) {
	j := newFeedJournal("f", 4)
	for seq := int64(1); seq <= 6; seq++ {
		j.put(seq, uint64(seq*100))
	}
	tests := []struct {
		seq    int64
		want   uint64
		wantOK bool
	}{
		{1, 0, false}, // overwritten by 5
		{2, 0, false}, // overwritten by 6
		{3, 300, true},
		{4, 400, true},
		{5, 500, true},
		{6, 600, true},
		{7, 0, false}, // not yet journalled
	}
	for _, tt := range tests {
		got, ok := j.get(tt.seq)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("get(%d) = %d, %v; want %d, %v", tt.seq, got, ok, tt.want, tt.wantOK)
		}
	}
}

// TestJournalRingConcurrent: readers racing the writer never see the hash
// of another seq (run with -race).
func TestJournalRingConcurrent(t *testing.T) {
	const n = 200000
	j := newFeedJournal("f", 64)
	hash := func(seq int64) uint64 { return uint64(seq) * 0x9e3779b97f4a7c15 }
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(0); i < n; i++ {
				seq := i + int64(r)
				if h, ok := j.get(seq); ok && h != hash(seq) {
					t.Errorf("get(%d) = %x, want %x", seq, h, hash(seq))
					return
				}
			}
		}()
	}
	for seq := int64(1); seq <= n; seq++ {
		j.put(seq, hash(seq))
	}
	wg.Wait()
}

func TestFNV64a(t *testing.T) {
	// Reference values of FNV-1a 64 (hash/fnv).
	tests := []struct {
		in   string
		want uint64
	}{{"", 0xcbf29ce484222325}, {"a", 0xaf63dc4c8601ec8c}, {"foobar", 0x85944171f73967e8}}
	for _, tt := range tests {
		if got := fnv64a([]byte(tt.in)); got != tt.want {
			t.Errorf("fnv64a(%q) = %x, want %x", tt.in, got, tt.want)
		}
	}
}
