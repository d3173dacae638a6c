package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/store"
)

// TestRunsGivenTwiceOrOutOfOrderAreNotConsecutiveRuns: CheckRuns refuses a
// recording that holds the same rows as one before it (the same one, or a
// copy) and a run created before the run before it; two recordings with
// the same META (a fixed clock) but other rows are two runs.
func TestRunsGivenTwiceOrOutOfOrderAreNotConsecutiveRuns(t *testing.T) {
	t1 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := func(created time.Time, seqs ...int64) store.Reader {
		t.Helper()
		r := newRows("", "p").in("p", seqs...).end("p")
		r.rows[0] = store.EncodeMeta(store.Meta{Created: created, Apps: map[string]string{"p": "app"}, Streams: []string{"p"}})
		m, err := store.OpenMemory(r.rows...)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a, b := rec(t1, 1, 2), rec(t1.Add(time.Hour), 1)
	tests := []struct {
		name          string
		runs          []store.Reader
		first, second int
		copied        bool
		ok            bool
	}{
		{"in order", []store.Reader{a, b}, 0, 0, false, true},
		{"one run", []store.Reader{a}, 0, 0, false, true},
		{"the same META, other rows", []store.Reader{a, rec(t1, 1, 2, 3)}, 0, 0, false, true},
		{"the same reader twice", []store.Reader{a, a}, 0, 1, true, false},
		{"a copy", []store.Reader{a, b, rec(t1.Add(time.Hour), 1)}, 1, 2, true, false},
		{"out of order", []store.Reader{b, a}, 0, 1, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := store.CheckRuns(tt.runs)
			if tt.ok {
				if err != nil {
					t.Fatalf("CheckRuns: %v, want nil", err)
				}
				return
			}
			var re *store.RunsError
			if !errors.As(err, &re) || !errors.Is(err, store.ErrRuns) {
				t.Fatalf("CheckRuns: %v, want a *RunsError wrapping ErrRuns", err)
			}
			if re.First != tt.first || re.Second != tt.second || re.Copy != tt.copied || re.Before == tt.copied {
				t.Errorf("CheckRuns: %+v, want runs %d and %d, copy %v", re, tt.first, tt.second, tt.copied)
			}
		})
	}
}
