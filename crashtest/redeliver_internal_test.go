package crashtest

import "testing"

// The figures of a kill: lag counts the inputs processed so far (by the
// killed run and those before it) past the pointer, redelivered the
// inputs of the next run among them.
func TestAKillsLagAndRedeliveredCountWhatBothRunsRecorded(t *testing.T) {
	set := func(offs ...int64) map[int64]bool {
		m := map[int64]bool{}
		for _, o := range offs {
			m[o] = true
		}
		return m
	}
	tests := []struct {
		name           string
		seen, next     map[int64]bool
		pointer        int64
		wantLag, again int64
	}{
		{"resumed at the pointer", set(10, 20, 30, 40), set(30, 40, 50), 20, 2, 2},
		{"everything committed", set(10, 20), set(30), 20, 0, 0},
		{"the restart killed early", set(10, 20, 30, 40), set(30), 20, 2, 1},
		{"nothing recorded", set(), set(10), 0, 0, 0},
		{"a restart before the pointer", set(10, 20, 30), set(20, 30, 40), 25, 1, 2},
	}
	for _, tt := range tests {
		lag, again := redelivered(tt.seen, tt.next, tt.pointer)
		if lag != tt.wantLag || again != tt.again {
			t.Errorf("%s: lag %d, redelivered %d; want %d, %d", tt.name, lag, again, tt.wantLag, tt.again)
		}
	}
}
