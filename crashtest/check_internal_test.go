package crashtest

import (
	"slices"
	"strings"
	"testing"
)

// The output check is not one that cannot fail: over a clean run's three
// outputs and two kills, the --out file holds each exactly once or it
// fails, whichever line is one more, one fewer or recorded by no run; and
// a line more is counted for the kill whose restart wrote it.
func TestTheOutputCheckFailsOnOneLineMoreOrFewerOrNotRecorded(t *testing.T) {
	ignore := []string{"at"}
	a := `{"account":"a","balance":1,"at":"10:00"}`
	b := `{"account":"b","balance":2,"at":"10:01"}`
	c := `{"account":"a","balance":3,"at":"10:02"}`
	var want []string
	for _, l := range []string{a, b, c} {
		want = append(want, withoutKeys(l, ignore))
	}
	rows := func(lines ...string) map[string]int {
		m := map[string]int{}
		for _, l := range lines {
			m[l]++
		}
		return m
	}
	// The crashed runs' clocks differ from the clean run's: compared
	// without "at", byte for byte with the recordings.
	a2 := strings.Replace(a, "10:00", "11:00", 1)
	tests := []struct {
		name            string
		lines           []string
		rows            map[string]int
		bounds          []int64
		fails           bool
		missing, extra  int
		unrecorded      int
		dupsAfterKill   []int
		failureMentions string
	}{
		{"each once", []string{a2, b, c}, rows(a2, b, c), []int64{1, 2}, false, 0, 0, 0, []int{0, 0}, ""},
		{"each once, a run recorded one twice", []string{a2, b, c}, rows(a2, b, b, c), []int64{1, 2}, false, 0, 0, 0, []int{0, 0}, ""},
		{"one line more", []string{a2, b, b, c}, rows(a2, b, b, c), []int64{1, 2}, true, 0, 1, 0, []int{0, 1}, "extra"},
		{"one line more before the first kill", []string{a2, a2, b, c}, rows(a2, a2, b, c), []int64{2, 3}, true, 0, 1, 0, []int{0, 0}, "extra"},
		{"one line fewer", []string{a2, c}, rows(a2, b, c), []int64{1, 1}, true, 1, 0, 0, []int{0, 0}, "missing"},
		{"a line no run recorded", []string{a2, b, c}, rows(a2, c), []int64{1, 2}, true, 0, 0, 1, []int{0, 0}, "no OUTPUT row"},
		{"a line recorded once, written twice", []string{a2, b, b}, rows(a2, b), []int64{1, 2}, true, 1, 1, 1, []int{0, 1}, "missing"},
	}
	for _, tt := range tests {
		rep := &Report{Kills: make([]KillReport, len(tt.bounds))}
		outputLines(rep, "out.jsonl", tt.lines, want, tt.rows, tt.bounds, ignore)
		var dups []int
		for _, k := range rep.Kills {
			dups = append(dups, k.Duplicates)
		}
		if got := len(rep.Failures) > 0; got != tt.fails || rep.Missing != tt.missing || rep.Duplicates != tt.extra || rep.Unrecorded != tt.unrecorded ||
			!slices.Equal(dups, tt.dupsAfterKill) {
			t.Errorf("%s: failures %q, missing %d, extra %d, unrecorded %d, per kill %v; want failures %v, %d, %d, %d, %v",
				tt.name, rep.Failures, rep.Missing, rep.Duplicates, rep.Unrecorded, dups, tt.fails, tt.missing, tt.extra, tt.unrecorded, tt.dupsAfterKill)
		}
		if tt.fails && !strings.Contains(strings.Join(rep.Failures, "\n"), tt.failureMentions) {
			t.Errorf("%s: failures %q, want one naming %q", tt.name, rep.Failures, tt.failureMentions)
		}
		if rep.Outputs != len(tt.lines) || rep.Want != len(want) {
			t.Errorf("%s: outputs %d, want %d; want %d, %d", tt.name, rep.Outputs, rep.Want, len(tt.lines), len(want))
		}
	}
}
