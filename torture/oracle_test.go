package torture

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/internal/apps"
)

func TestAScenarioIsTheSameForTheSameSeedAndLimits(t *testing.T) {
	for seed := uint64(1); seed < 200; seed++ {
		lim := Limits{Runs: 2, Lines: 10, NoFaults: seed%2 == 0}
		a, b := generate(seed, lim, Only{}), generate(seed, lim, Only{})
		if diff := cmp.Diff(a, b); diff != "" {
			t.Fatalf("seed %d: two scenarios differ:\n%s", seed, diff)
		}
		if len(a.Runs) > 0 && a.Runs[len(a.Runs)-1].End.Kind != endSettle {
			t.Errorf("seed %d: the last run ends by %s, want a bounded run that settles", seed, a.Runs[len(a.Runs)-1].End.Kind)
		}
	}
}

func TestLimitsReadBackAsWritten(t *testing.T) {
	for _, want := range []Limits{{}, {Runs: 2}, {Lines: 5, NoOps: true}, {Runs: 1, Lines: 10, NoFaults: true, NoOps: true}} {
		got, err := ParseLimits(want.String())
		if err != nil || got != want {
			t.Errorf("ParseLimits(%q) = %+v, %v; want %+v", want.String(), got, err, want)
		}
	}
	if _, err := ParseLimits("runs=two"); err == nil {
		t.Error("ParseLimits(runs=two): no error")
	}
}

// TestEveryLinesOutputsAreThoseItsAppEmits runs each app on generated
// lines and checks that the outputs it emits are, identity for identity,
// the outputs the oracle expects of each line.
func TestEveryLinesOutputsAreThoseItsAppEmits(t *testing.T) {
	for _, app := range []core.App{apps.LedgerApp(), apps.AlertsApp(), App} {
		t.Run(app.Name, func(t *testing.T) {
			s := &scenarioSpec{Seed: 7, App: app.Name, Ticks: true}
			g := newLineGen(s)
			p, err := app.Build(nil)
			if err != nil {
				t.Fatal(err)
			}
			h := core.NewHost(app.Name, p, core.NewStepClock(time.Unix(0, 0), time.Second))
			for _, l := range g.gen(300) {
				tr := h.Handle(nil, l.text)
				if tr.Err != nil {
					t.Fatalf("line %q: %v", l.text, tr.Err)
				}
				var got []string
				for _, o := range tr.Outputs {
					b, err := json.Marshal(o.Value)
					if err != nil {
						t.Fatal(err)
					}
					if id := outputID(app.Name, b); id != "" {
						got = append(got, id)
					}
				}
				if !cmp.Equal(got, l.outputs) {
					t.Fatalf("line %q: outputs %v, the oracle expects %v", l.text, got, l.outputs)
				}
			}
		})
	}
}

// TestTheStateSaysHowManyTimesEachLineWasApplied applies generated ledger
// lines to balances as the ledger does, one line twice and one never, and
// checks that the oracle's decoding of the state finds exactly those.
func TestTheStateSaysHowManyTimesEachLineWasApplied(t *testing.T) {
	s := &scenarioSpec{Seed: 3, App: "ledger", State: true}
	g := newLineGen(s)
	lines := g.gen(400)
	var twice, never int
	for _, l := range lines {
		if l.postings == nil {
			continue
		}
		switch {
		case twice == 0:
			twice = l.id
		case never == 0 && l.kind == lineTransfer:
			never = l.id
		}
	}
	bal := map[string]int64{}
	for _, l := range lines {
		times := 1
		switch l.id {
		case twice:
			times = 2
		case never:
			times = 0
		}
		for range times {
			for acct, tp := range l.postings {
				amt := pow3(tp)
				if l.kind == lineTransfer && acct[0] == 'd' {
					amt = -amt
				}
				bal[acct] += amt
			}
		}
	}
	// Split the balances over two worker files, as workers would.
	dir := t.TempDir()
	halves := []map[string]int64{{}, {}}
	for acct, b := range bal {
		halves[0][acct] = b / 2
		halves[1][acct] = b - b/2
	}
	for w, h := range halves {
		b, _ := json.Marshal(map[string]any{"balances": h})
		if err := os.WriteFile(filepath.Join(dir, stateFile+"#w"+strconv.Itoa(w)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := &oracle{sr: &scenarioRun{s: *s, dir: dir, runs: []*outcome{{workers: 2}}}}
	applied, ok := o.appliedByState(lines)
	if !ok || len(o.vs) > 0 {
		t.Fatalf("appliedByState: %v %v", ok, o.vs)
	}
	for _, l := range lines {
		if l.postings == nil {
			continue
		}
		want := 1
		switch l.id {
		case twice:
			want = 2
		case never:
			want = 0
		}
		if got := applied[l.id]; got != want {
			t.Errorf("line %d %q: applied %d times, want %d", l.id, l.text, got, want)
		}
	}
}

func TestTheReaderFindsWhatAKillLeaves(t *testing.T) {
	meta := `,1,META,,0,,0,,0,0,,"{""format"":""blackbox-recording/3"",""apps"":{""p"":""x""},""streams"":[""p""]}",` + "\n"
	start := "p,1,START,,0,2024-03-01T08:00:00Z,0,,0,0,,,\n"
	deliv := "p,2,DELIVERY,in,1,,1,,5,0,,,\n"
	inline := "p,3,INLINE,in,1,2024-03-01T08:00:00Z,0,,0,1,\"\"\"a\"\"\",,\n"
	output := "p,4,OUTPUT,s,1,,0,,0,0,1,,\n"
	input := deliv + inline + output
	end := "p,5,END,,0,2024-03-01T08:00:01Z,0,,0,1,,,\n"
	for _, c := range []struct {
		name string
		body string
		want map[string]int
	}{
		{"complete", meta + start + input + end, map[string]int{}},
		{"killed after an input", meta + start + input, map[string]int{"unfinished": 1}},
		{"killed inside a write", meta + start + input[:len(input)-10], map[string]int{"torn": 1, "unfinished": 1, "orphan": 1}},
		{"a row lost", meta + start + deliv + output + end, map[string]int{"gap": 1, "orphan": 2}},
		{"never started", meta, map[string]int{"missing-stream": 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.csv")
			if err := os.WriteFile(path, []byte(csvHeader+"\n"+c.body), 0o644); err != nil {
				t.Fatal(err)
			}
			rec, err := readRecording(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := rec.shape(); !cmp.Equal(got, c.want) {
				t.Errorf("shape %v, want %v\n%s", got, c.want, fmt.Sprint(rec.rows))
			}
		})
	}
}

func TestRemovingAnInputRenumbersItsStream(t *testing.T) {
	meta := `,1,META,,0,,0,,0,0,,"{""format"":""blackbox-recording/3"",""apps"":{""p"":""x""},""streams"":[""p""]}",` + "\n"
	rows := meta +
		"p,1,START,,0,2024-03-01T08:00:00Z,0,,0,0,,,\n" +
		"p,2,DELIVERY,in,1,,1,,5,0,,,\n" +
		"p,3,INLINE,in,1,2024-03-01T08:00:00Z,0,,0,1,\"\"\"a\"\"\",,\n" +
		"p,4,OUTPUT,s,1,,0,,0,0,1,,\n" +
		"p,5,DELIVERY,in,2,,1,,10,0,,,\n" +
		"p,6,INLINE,in,2,2024-03-01T08:00:00Z,0,,0,0,\"\"\"b\"\"\",,\n" +
		",2,COMMIT,in,2,,1,,10,0,,,\n" +
		"p,7,END,,0,2024-03-01T08:00:01Z,0,,0,2,,,\n"
	got, ok, err := removeInput([]byte(csvHeader+"\n"+rows), 1)
	if err != nil || !ok {
		t.Fatalf("removeInput: %v %v", ok, err)
	}
	want := csvHeader + "\n" + meta +
		"p,1,START,,0,2024-03-01T08:00:00Z,0,,0,0,,,\n" +
		"p,2,DELIVERY,in,2,,1,,10,0,,,\n" +
		"p,3,INLINE,in,2,2024-03-01T08:00:00Z,0,,0,0,\"\"\"b\"\"\",,\n" +
		",2,COMMIT,in,2,,1,,10,0,,,\n" +
		"p,4,END,,0,2024-03-01T08:00:01Z,0,,0,1,,,\n"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("tampered copy (-want +got):\n%s", diff)
	}
	path := filepath.Join(t.TempDir(), "t.csv")
	if err := os.WriteFile(path, got, 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := readRecording(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.shape(); !cmp.Equal(got, map[string]int{"missing-input": 1}) {
		t.Errorf("the oracle's reader of the tampered copy: %v, want only the missing input", got)
	}
}

// kafkaRecording is a recording of a Kafka run: one delivery of key at
// each offset, processed at the instants given, then (claim > 0) a COMMIT
// row of key at claim.
func kafkaRecording(key string, offsets []int64, at time.Time, claim int64) *recording {
	rec := &recording{rows: []row{{kind: "START", processor: "p", instant: at}}}
	for i, off := range offsets {
		seq := int64(i + 1)
		rec.rows = append(rec.rows,
			row{kind: "DELIVERY", processor: "p", source: "input", seq: seq, key: key, offset: off},
			row{kind: "INLINE", processor: "p", source: "input", seq: seq, instant: at.Add(time.Duration(i) * time.Millisecond)})
	}
	if claim > 0 {
		rec.rows = append(rec.rows, row{kind: "COMMIT", source: "input", seq: int64(len(offsets)), key: key, offset: claim})
	}
	return rec
}

// TestARevokedMembersFencedRecordsBehindAnotherMembersCommitAreNoBrokenClaim:
// the first member, its partition revoked while its records were still
// queued, processes them after the second member committed them (the
// product's documented fencing: processed twice, never committed). So
// many deliveries as its run says it fenced of the partition break no
// claim; one more does, as does any without a fenced count.
func TestARevokedMembersFencedRecordsBehindAnotherMembersCommitAreNoBrokenClaim(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 6, 0, 0, 0, time.UTC)
	line := "partition t/2: committed 3, processed 0, lag 0, paused no"
	for _, tc := range []struct {
		name   string
		output string
		want   int // violations of InvClaims
	}{
		{"fenced every delivery behind the claim", line + ", fenced 3\n", 0},
		{"fenced fewer than were delivered", line + ", fenced 2\n", 1},
		{"killed: no count", "", 1},
		{"fenced records of another partition", "partition t/3: committed 3, processed 0, lag 0, paused no, fenced 3\n" + line + "\n", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := &outcome{index: 1, store: "run-1.csv", output: tc.output}
			first.member = &outcome{index: 1, store: "run-1-m2.csv"}
			sr := &scenarioRun{s: scenarioSpec{Runs: []runSpec{{}}}, kafka: &kafkaInput{partitions: 4}, runs: []*outcome{first}}
			o := &oracle{sr: sr, recs: map[string]*recording{
				"run-1-m2.csv": kafkaRecording("t/2", []int64{1, 2, 3}, t0, 3),
				"run-1.csv":    kafkaRecording("t/2", []int64{1, 2, 3}, t0.Add(10*time.Second), 0),
			}}
			o.checkClaims()
			if got := len(o.vs); got != tc.want {
				t.Errorf("violations %v, want %d", o.vs, tc.want)
			}
		})
	}
}

// TestASecondMemberGivenOnlyDrainedPartitionsHasJoined: in a backlog
// scenario shrunk to a few lines, the first member has read everything
// before the second is given partitions: the second handles no record,
// but its run names the partitions it was given, and it joined. One that
// names none was given none.
func TestASecondMemberGivenOnlyDrainedPartitionsHasJoined(t *testing.T) {
	for _, tc := range []struct {
		name   string
		output string
		want   int
	}{
		{"given two empty partitions", "partition t/2: committed -1, processed 0, lag -1, paused no\npartition t/3: committed -1, processed 0, lag -1, paused no\n", 0},
		{"given none", "read      t (group g, 127.0.0.1:1): 0 records\n", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := &outcome{index: 1, store: "run-1.csv"}
			first.member = &outcome{index: 1, store: "run-1-m2.csv", output: tc.output}
			sr := &scenarioRun{s: scenarioSpec{Backlog: true, Runs: []runSpec{{}}}, kafka: &kafkaInput{partitions: 4}, runs: []*outcome{first}}
			o := &oracle{sr: sr, recs: map[string]*recording{
				"run-1-m2.csv": kafkaRecording("t/2", nil, time.Now(), 0),
				"run-1.csv":    kafkaRecording("t/0", []int64{1, 2}, time.Now(), 0),
			}}
			o.checkJoins()
			if got := len(o.vs); got != tc.want {
				t.Errorf("violations %v, want %d", o.vs, tc.want)
			}
		})
	}
}

// TestTwoHundredConsecutiveSeedsCoverEveryDimension: a session of 200
// consecutive seeds (what `go test ./torture` runs), from any first seed
// (here 300 drawn at random), covers every dimension of docs/TORTURE.md
// (AllDimensions) at least once: the rare ones are forced by the seed's
// residue (cover), the others drawn.
func TestTwoHundredConsecutiveSeedsCoverEveryDimension(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	starts := []uint64{1, 9000, 1<<63 + 12345}
	for range 300 {
		starts = append(starts, r.Uint64())
	}
	for _, first := range starts {
		got := map[string]int{}
		for seed := first; seed < first+200; seed++ {
			for _, d := range generate(seed, Limits{}, Only{}).Dimensions() {
				got[d]++
			}
		}
		for _, d := range AllDimensions() {
			if got[d] == 0 {
				t.Errorf("seeds %d..%d: no scenario covers %s", first, first+199, d)
			}
		}
	}
}

// TestCoverResiduesAreDistinct: the engine properties' forced residues
// (engineResidue: one per property) stay clear of the residues that
// force the other dimensions, and every residue is below coverEvery.
func TestCoverResiduesAreDistinct(t *testing.T) {
	used := map[int]string{}
	claim := func(c int, what string) {
		if c < 0 || c >= coverEvery {
			t.Errorf("residue %d (%s) outside 0..%d", c, what, coverEvery-1)
		}
		if prev, ok := used[c]; ok {
			t.Errorf("residue %d forces both %s and %s", c, prev, what)
		}
		used[c] = what
	}
	for c, what := range map[int]string{coverBacklog: "backlog", coverCrashtest: "crashtest",
		coverAliasPointer: "alias=pointer", coverAliasStatus: "alias=status", coverPoison: "poison",
		coverPartitions: "op=partitions", coverRetention: "op=retention", coverDeleteTopic: "op=deltopic", coverBounce: "op=bounce",
		coverControl: "control"} {
		claim(c, what)
	}
	for i, p := range engineProperties {
		claim(engineResidue(i), "engine="+p)
	}
	for i, p := range engineProperties {
		seed := uint64(engineResidue(i) + coverEvery)
		if got := generate(seed, Limits{}, Only{}); got.Kind != "engine" || got.Engine.Property != p {
			t.Errorf("seed %d: kind %s engine %q, want engine=%s forced", seed, got.Kind, got.Engine.Property, p)
		}
	}
}

// outRecording is a CSV recording of the harness's app on one stream:
// each item an input at its offset (or, offset < 0, a timer) with its
// outputs; an item with want > len(outputs) is cut (fewer OUTPUT rows
// than its n).
type outItem struct {
	offset  int64
	outputs []string
	want    int
}

func outRecording(items ...outItem) *recording {
	rec := &recording{rows: []row{{kind: "START", processor: "p", index: 1}}}
	idx := int64(1)
	next := func() int64 { idx++; return idx }
	for i, it := range items {
		seq := int64(i + 1)
		n := int64(max(it.want, len(it.outputs)))
		if it.offset < 0 {
			rec.rows = append(rec.rows, row{kind: "TIMER", processor: "p", index: next(), n: n})
		} else {
			rec.rows = append(rec.rows,
				row{kind: "DELIVERY", processor: "p", index: next(), source: "input", seq: seq, epoch: 7, offset: it.offset},
				row{kind: "INLINE", processor: "p", index: next(), source: "input", seq: seq, n: n})
		}
		for k, o := range it.outputs {
			rec.rows = append(rec.rows, row{kind: "OUTPUT", processor: "p", index: next(), source: "tally", seq: int64(k + 1), payload: []byte(o)})
		}
	}
	return rec
}

func tallyOut(id int) string { return fmt.Sprintf(`{"key":"k1","id":%d,"n":1}`, id) }

const timerOut = `{"timer":1,"keys":1}`

// TestTheOracleFindsEveryOutputDeliveredOnceAndRecorded: invariant 8 on
// out.jsonl (recovered by every run: exact), a second member's file (its
// own outbox: no line unrecorded, none twice), in both line formats.
func TestTheOracleFindsEveryOutputDeliveredOnceAndRecorded(t *testing.T) {
	envelope := func(offset, k int64, out string) string {
		return fmt.Sprintf(`{"key":{"feed":"input","epoch":7,"position":{"key":"","offset":%d},"index":%d},"output":%s}`, offset, k, out)
	}
	run1 := outRecording(outItem{offset: 10, outputs: []string{tallyOut(1)}}, outItem{offset: 20, outputs: []string{tallyOut(2)}},
		outItem{offset: -1, outputs: []string{timerOut}}, outItem{offset: 30, outputs: []string{tallyOut(3)}, want: 2})
	// run 2 read offset 20 again (killed before its commit): the same output.
	run2 := outRecording(outItem{offset: 20, outputs: []string{tallyOut(2)}}, outItem{offset: -1, outputs: []string{timerOut}},
		outItem{offset: 40, outputs: []string{tallyOut(4)}})
	run1.created, run2.created = time.Date(2026, 1, 1, 6, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 7, 0, 0, 0, time.UTC)
	timerEnvelope := func(recording string, row int) string {
		return fmt.Sprintf(`{"key":{"epoch":0,"position":{"key":"","offset":0},"index":1,"recording":%q,"stream":"p","row":%d},"output":%s}`,
			recording, row, timerOut)
	}
	all := []string{tallyOut(1), tallyOut(2), timerOut, timerOut, tallyOut(4)}
	for _, tc := range []struct {
		name    string
		format  string
		out     string // out.jsonl
		member  string // out-m2-1.jsonl ("": none)
		pending string // the last run's outputs line
		want    []string
	}{
		{name: "each once", out: lines(all...)},
		{name: "an output twice", out: lines(append(all, tallyOut(2))...), want: []string{"delivered more than once"}},
		{name: "a timer's output more often than recorded", out: lines(append(all, timerOut)...), want: []string{"delivered more than once"}},
		// A timer fired again after an input read again is recorded again,
		// not delivered again: once is enough, none is a loss.
		{name: "a timer's output less often than recorded", out: lines(all[:3]...) + lines(all[4])},
		// ... and, unable to tell which input a firing followed, the
		// oracle does not hold a timer's output owed.
		{name: "a timer's output never delivered", out: lines(slices.DeleteFunc(slices.Clone(all), func(l string) bool { return l == timerOut })...)},
		{name: "an output never delivered", out: lines(all[1:]...), want: []string{"were not delivered"}},
		{name: "pending in the last run", out: lines(all[:4]...), pending: "outputs   out.jsonl: 4 lines appended, 1 pending (not committed: the next run processes them again)"},
		{name: "a line no run recorded", out: lines(append(all, tallyOut(9))...), want: []string{"no output a run recorded whole"}},
		{name: "the output of an item a kill cut", out: lines(append(all, tallyOut(3))...), want: []string{"no output a run recorded whole"}},
		{name: "a torn last line", out: lines(all...) + tallyOut(5)[:6], want: []string{"torn line"}},
		{name: "not JSON", out: lines(all...) + "}{\n", want: []string{"are not value lines"}},
		{name: "in a member's file too", out: lines(all...), member: lines(tallyOut(2), tallyOut(4)) + `{"ke`},
		{name: "twice in a member's file", out: lines(all...), member: lines(tallyOut(4), tallyOut(4)), want: []string{"out-m2-1.jsonl: 1 outputs delivered more than once"}},
		{name: "in a member's file, not its recording", out: lines(all...), member: lines(tallyOut(1)), want: []string{"out-m2-1.jsonl: 1 lines are no output"}},
		{name: "envelopes", format: "envelope", out: lines(envelope(10, 1, tallyOut(1)), envelope(20, 1, tallyOut(2)),
			`{"key":{"epoch":0,"position":{"key":"","offset":0},"index":1,"stream":"p","row":9},"output":`+timerOut+`}`,
			`{"key":{"epoch":0,"position":{"key":"","offset":0},"index":1,"stream":"p","row":6},"output":`+timerOut+`}`,
			envelope(40, 1, tallyOut(4)))},
		{name: "an envelope naming another position", format: "envelope", out: lines(envelope(10, 1, tallyOut(1)), envelope(21, 1, tallyOut(2)),
			`{"key":{"epoch":0,"position":{"key":"","offset":0},"index":1,"stream":"p","row":9},"output":`+timerOut+`}`,
			`{"key":{"epoch":0,"position":{"key":"","offset":0},"index":1,"stream":"p","row":6},"output":`+timerOut+`}`,
			envelope(40, 1, tallyOut(4))), want: []string{"names no recorded output"}},
		{name: "envelopes naming their recordings", format: "envelope", out: lines(envelope(10, 1, tallyOut(1)), envelope(20, 1, tallyOut(2)),
			timerEnvelope("2026-01-01T06:00:00Z", 9), timerEnvelope("2026-01-01T07:00:00Z", 6), envelope(40, 1, tallyOut(4)))},
		{name: "an envelope naming another recording", format: "envelope", out: lines(envelope(10, 1, tallyOut(1)), envelope(20, 1, tallyOut(2)),
			timerEnvelope("2026-01-01T06:00:00Z", 9), timerEnvelope("2026-01-01T06:00:00Z", 6), envelope(40, 1, tallyOut(4))),
			want: []string{"names no recorded output"}},
		{name: "a timer's envelope twice", format: "envelope", out: lines(envelope(10, 1, tallyOut(1)), envelope(20, 1, tallyOut(2)),
			timerEnvelope("2026-01-01T06:00:00Z", 9), timerEnvelope("2026-01-01T07:00:00Z", 6), timerEnvelope("2026-01-01T07:00:00Z", 6),
			envelope(40, 1, tallyOut(4))), want: []string{"delivered more than once", "envelope keys delivered more than once"}},
		{name: "a value line in an envelope file", format: "envelope", out: lines(all...), want: []string{"are not envelope lines", "were not delivered"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, outFile), []byte(tc.out), 0o644); err != nil {
				t.Fatal(err)
			}
			first := &outcome{index: 1, store: "run-1.csv"}
			last := &outcome{index: 2, store: "run-2.csv", output: tc.pending}
			recs := map[string]*recording{"run-1.csv": run1, "run-2.csv": run2}
			if tc.member != "" {
				first.member = &outcome{index: 1, store: "run-1-m2.csv"}
				recs["run-1-m2.csv"] = outRecording(outItem{offset: 20, outputs: []string{tallyOut(2)}}, outItem{offset: 40, outputs: []string{tallyOut(4)}})
				if err := os.WriteFile(filepath.Join(dir, "out-m2-1.jsonl"), []byte(tc.member), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			sr := &scenarioRun{s: scenarioSpec{App: AppName, OutFormat: tc.format}, dir: dir, runs: []*outcome{first, last}}
			o := &oracle{sr: sr, recs: recs}
			o.checkOut()
			var got []string
			for _, v := range o.vs {
				if v.Invariant != InvDelivered {
					t.Errorf("invariant %d, want %d: %s", v.Invariant, InvDelivered, v.What)
				}
				got = append(got, v.What)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("violations %q, want %d naming %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %q does not say %q", got[i], w)
				}
			}
		})
	}
}

func lines(xs ...string) string {
	var b strings.Builder
	for _, x := range xs {
		b.WriteString(x + "\n")
	}
	return b.String()
}

// TestAnExitCodeAgreesWithTheStatusAndTheOutbox: a run's exit code is 0
// exactly when its status is settled and lossless and its --out outbox
// delivered everything it recorded and committed; an outbox that could not
// deliver makes exit 3 the agreeing one (seed 1796228915133128372: a disk
// full under --out).
func TestAnExitCodeAgreesWithTheStatusAndTheOutbox(t *testing.T) {
	status := func(settled, lossless bool, undelivered int64) *runStatus {
		st := &runStatus{Settled: settled, Lossless: lossless}
		if undelivered >= 0 {
			st.Outbox = &struct {
				Undelivered int64 `json:"undelivered"`
			}{undelivered}
		}
		return st
	}
	for _, tc := range []struct {
		name   string
		exit   int
		status *runStatus
		agree  bool
	}{
		{"settled lossless, no --out, exit 0", 0, status(true, true, -1), true},
		{"settled lossless, no --out, exit 3", 3, status(true, true, -1), false},
		{"settled lossless, all delivered, exit 0", 0, status(true, true, 0), true},
		{"settled lossless, 8 undelivered, exit 3", 3, status(true, true, 8), true},
		{"settled lossless, 8 undelivered, exit 0", 0, status(true, true, 8), false},
		{"not lossless, exit 3", 3, status(true, false, 0), true},
		{"not settled, exit 0", 0, status(false, true, 0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &oracle{}
			o.checkExit(&outcome{index: 1, exit: tc.exit, status: tc.status}, "run 1")
			if got := len(o.vs) == 0; got != tc.agree {
				t.Errorf("agree = %v (%v), want %v", got, o.vs, tc.agree)
			}
		})
	}
}

// fileRecording is a recording of a file run of epoch 7: a delivery of
// each line (its seq, at offset 10 times its number), then rows.
func fileRecording(lines []int64, rows ...row) *recording {
	rec := &recording{rows: []row{{kind: "START", processor: "p"}}}
	for i, n := range lines {
		seq := int64(i + 1)
		rec.rows = append(rec.rows,
			row{kind: "DELIVERY", processor: "p", source: "input", seq: seq, epoch: 7, offset: 10 * n},
			row{kind: "INLINE", processor: "p", source: "input", seq: seq})
	}
	rec.rows = append(rec.rows, rows...)
	return rec
}

// TestARecordedMoveBackLowersTheCommitsClaim (invariant 5 and a recorded
// move back, docs/GUARANTEES.md "Seek"): a run that committed lines 1-8,
// then was moved back by its operator to seq 3 (a CONTROL row of a seek,
// after below before) and ended before it read them again, claims no more
// than line 3: a later run delivering lines 4-8 breaks no claim; one
// delivering line 3 does; without the move back, line 4 does too. A
// COMMIT row of a seq delivered before the move back, written after its
// row (a commit made before it), raises the claim no more; the commit of
// a line read again after it does.
func TestARecordedMoveBackLowersTheCommitsClaim(t *testing.T) {
	commit := func(seq, line int64) row {
		return row{kind: "COMMIT", source: "input", seq: seq, epoch: 7, offset: 10 * line}
	}
	back := row{kind: "CONTROL", source: "input", detail: `{"group":"main","action":"seek","who":"torture","reason":"r","before":8,"after":3}`}
	forward := row{kind: "CONTROL", source: "input", detail: `{"group":"main","action":"seek","who":"torture","reason":"r","before":8,"after":8}`}
	for _, tc := range []struct {
		name  string
		first *recording
		again []int64 // the lines the later run delivers
		want  int     // violations of InvClaims
	}{
		{"after the target", fileRecording([]int64{1, 2, 3, 4, 5, 6, 7, 8}, commit(8, 8), back), []int64{4, 5, 6, 7, 8}, 0},
		{"the target itself", fileRecording([]int64{1, 2, 3, 4, 5, 6, 7, 8}, commit(8, 8), back), []int64{3, 4}, 1},
		{"no move back", fileRecording([]int64{1, 2, 3, 4, 5, 6, 7, 8}, commit(8, 8), forward), []int64{4}, 1},
		{"a commit made before it, written after it", fileRecording([]int64{1, 2, 3, 4, 5, 6, 7, 8}, commit(6, 6), back, commit(8, 8)), []int64{4, 5}, 0},
		{"a commit of skipped seqs, written after it", fileRecording([]int64{1, 2, 3, 4}, back, commit(8, 8)), []int64{4, 5}, 0},
		{"everything skipped, nothing read again", fileRecording(nil, commit(8, 8), back), []int64{4, 5}, 0},
		{"lines read again and committed", fileRecording([]int64{1, 2, 3, 4, 5, 6, 7, 8}, commit(8, 8), back,
			row{kind: "DELIVERY", processor: "p", source: "input", seq: 9, epoch: 7, offset: 40},
			row{kind: "INLINE", processor: "p", source: "input", seq: 9}, commit(9, 4)), []int64{4}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr := &scenarioRun{s: scenarioSpec{Runs: []runSpec{{}, {}}},
				runs: []*outcome{{index: 1, store: "run-1.csv"}, {index: 2, store: "run-2.csv"}}}
			o := &oracle{sr: sr, recs: map[string]*recording{"run-1.csv": tc.first, "run-2.csv": fileRecording(tc.again)}}
			o.checkClaims()
			if got := len(o.vs); got != tc.want {
				t.Errorf("violations %v, want %d", o.vs, tc.want)
			}
		})
	}
}

// TestTheOutputsOfLinesReadAgainAfterAMoveBackMayBeThereOncePerRow
// (invariant 8 and a recorded move back): a run moved back by its
// operator read offset 20 again and recorded its output twice; out.jsonl
// may hold it twice (and its envelope key twice), not three times; a run
// that recorded no move back holds each output once.
func TestTheOutputsOfLinesReadAgainAfterAMoveBackMayBeThereOncePerRow(t *testing.T) {
	envelope := func(offset int64, out string) string {
		return fmt.Sprintf(`{"key":{"feed":"input","epoch":7,"position":{"key":"","offset":%d},"index":1},"output":%s}`, offset, out)
	}
	back := row{kind: "CONTROL", source: "input", detail: `{"group":"main","action":"seek","who":"torture","reason":"r","before":2,"after":1}`}
	read := outRecording(outItem{offset: 10, outputs: []string{tallyOut(1)}}, outItem{offset: 20, outputs: []string{tallyOut(2)}},
		outItem{offset: 20, outputs: []string{tallyOut(2)}})
	moved := &recording{rows: append(slices.Clone(read.rows), back)}
	for _, tc := range []struct {
		name   string
		rec    *recording
		format string
		out    string
		want   int
	}{
		{"moved back: twice", moved, "", lines(tallyOut(1), tallyOut(2), tallyOut(2)), 0},
		{"moved back: three times", moved, "", lines(tallyOut(1), tallyOut(2), tallyOut(2), tallyOut(2)), 1},
		{"moved back: its envelope key twice", moved, "envelope", lines(envelope(10, tallyOut(1)), envelope(20, tallyOut(2)), envelope(20, tallyOut(2))), 0},
		{"moved back: its envelope key three times", moved, "envelope",
			lines(envelope(10, tallyOut(1)), envelope(20, tallyOut(2)), envelope(20, tallyOut(2)), envelope(20, tallyOut(2))), 2},
		{"no move back: twice", read, "", lines(tallyOut(1), tallyOut(2), tallyOut(2)), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, outFile), []byte(tc.out), 0o644); err != nil {
				t.Fatal(err)
			}
			sr := &scenarioRun{s: scenarioSpec{App: AppName, OutFormat: tc.format}, dir: dir, runs: []*outcome{{index: 1, store: "run-1.csv"}}}
			o := &oracle{sr: sr, recs: map[string]*recording{"run-1.csv": tc.rec}}
			o.checkOut()
			if len(o.vs) != tc.want {
				t.Errorf("violations %v, want %d", o.vs, tc.want)
			}
		})
	}
}

// kafkaRead is a record of a Kafka run: its partition and offset.
type kafkaRead struct {
	key    string
	offset int64
}

// kafkaRun is a recording of a Kafka run of epoch 5: a delivery of each
// record (seqs from first on, processed at a millisecond each from at),
// then rows.
func kafkaRun(at time.Time, first int64, reads []kafkaRead, rows ...row) *recording {
	rec := &recording{rows: []row{{kind: "START", processor: "p", instant: at}}}
	rec.rows = append(rec.rows, kafkaReads(at, first, reads...)...)
	rec.rows = append(rec.rows, rows...)
	return rec
}

// kafkaReads are the DELIVERY and INLINE rows of reads, seqs from first on.
func kafkaReads(at time.Time, first int64, reads ...kafkaRead) []row {
	var rows []row
	for i, rd := range reads {
		seq := first + int64(i)
		rows = append(rows,
			row{kind: "DELIVERY", processor: "p", source: "input", seq: seq, epoch: 5, key: rd.key, offset: rd.offset},
			row{kind: "INLINE", processor: "p", source: "input", seq: seq, instant: at.Add(time.Duration(i) * time.Millisecond)})
	}
	return rows
}

// TestARecordedKafkaMoveBackLowersEachPartitionsClaim (invariant 5 for
// Kafka and a recorded move back, docs/GUARANTEES.md "Seek"): a run read
// offsets 0-2 of partitions t/0 (seqs 1, 3, 5) and t/1 (seqs 2, 4, 6),
// committed both at 2, then was moved back by its operator to seq 3 (a
// CONTROL row of a seek, after below before): t/0's commit came down to
// offset 1 (seq 3), t/1's to offset 0 (seq 2), the last record of each at
// or before the target. A later run delivering the records after them
// breaks no claim; one delivering a target itself does; without the move
// back, any does. A COMMIT row of a seq delivered before the move back,
// written after its row (a commit made before it), is lowered too; the
// commit of a record read again after it is not. The run's own deliveries
// after the move back are lowered as a later run's.
func TestARecordedKafkaMoveBackLowersEachPartitionsClaim(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 6, 0, 0, 0, time.UTC)
	commit := func(seq int64, key string, offset int64) row {
		return row{kind: "COMMIT", source: "input", seq: seq, epoch: 5, key: key, offset: offset}
	}
	back := row{kind: "CONTROL", source: "input", detail: `{"group":"g","action":"seek","who":"torture","reason":"r","before":6,"after":3}`}
	forward := row{kind: "CONTROL", source: "input", detail: `{"group":"g","action":"seek","who":"torture","reason":"r","before":6,"after":6}`}
	read := []kafkaRead{{"t/0", 0}, {"t/1", 0}, {"t/0", 1}, {"t/1", 1}, {"t/0", 2}, {"t/1", 2}}
	later := t0.Add(10 * time.Second)
	for _, tc := range []struct {
		name  string
		first *recording
		again []kafkaRead // the records the later run delivers
		want  int         // violations of InvClaims
	}{
		{"after each partition's target", kafkaRun(t0, 1, read, commit(6, "t/0", 2), commit(6, "t/1", 2), back),
			[]kafkaRead{{"t/0", 2}, {"t/1", 1}, {"t/1", 2}}, 0},
		{"the target of the target's partition", kafkaRun(t0, 1, read, commit(6, "t/0", 2), commit(6, "t/1", 2), back),
			[]kafkaRead{{"t/0", 1}}, 1},
		{"the target of the other partition", kafkaRun(t0, 1, read, commit(6, "t/0", 2), commit(6, "t/1", 2), back),
			[]kafkaRead{{"t/1", 0}}, 1},
		{"no move back", kafkaRun(t0, 1, read, commit(6, "t/0", 2), commit(6, "t/1", 2), forward),
			[]kafkaRead{{"t/0", 2}}, 1},
		{"a commit made before it, written after it", kafkaRun(t0, 1, read, commit(3, "t/0", 1), back, commit(5, "t/0", 2)),
			[]kafkaRead{{"t/0", 2}}, 0},
		{"a commit of skipped seqs, written after it", kafkaRun(t0, 1, read[:2], back, commit(6, "t/0", 2)),
			[]kafkaRead{{"t/0", 1}, {"t/0", 2}}, 0},
		{"a record read again and committed", kafkaRun(t0, 1, read, append([]row{commit(6, "t/0", 2), back},
			append(kafkaReads(t0.Add(time.Second), 7, kafkaRead{"t/0", 2}), commit(7, "t/0", 2))...)...),
			[]kafkaRead{{"t/0", 2}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr := &scenarioRun{s: scenarioSpec{Runs: []runSpec{{}, {}}}, kafka: &kafkaInput{partitions: 2},
				runs: []*outcome{{index: 1, store: "run-1.csv"}, {index: 2, store: "run-2.csv"}}}
			o := &oracle{sr: sr, recs: map[string]*recording{"run-1.csv": tc.first, "run-2.csv": kafkaRun(later, 1, tc.again)}}
			o.checkClaims()
			if got := len(o.vs); got != tc.want {
				t.Errorf("violations %v, want %d", o.vs, tc.want)
			}
		})
	}
	// The records of t/1 up to the target were skipped by a forward seek
	// (seqs 2-4: DROPPED, no position): where t/1 came down to is not
	// known, so the run's own claim of it is lowered to nothing; an
	// earlier run's claim of it still holds (a move back never goes below
	// where the run began reading).
	skipped := func(rows ...row) *recording {
		return kafkaRun(t0.Add(time.Second), 1, []kafkaRead{{"t/0", 0}},
			append(append(kafkaReads(t0.Add(time.Second), 5, kafkaRead{"t/1", 3}, kafkaRead{"t/1", 4}), rows...),
				commit(6, "t/1", 4), row{kind: "CONTROL", source: "input", detail: `{"group":"g","action":"seek","who":"torture","reason":"r","before":6,"after":3}`})...)
	}
	for _, tc := range []struct {
		name  string
		again []kafkaRead
		want  int
	}{
		{"skipped up to the target: read again", []kafkaRead{{"t/1", 2}, {"t/1", 3}, {"t/1", 4}}, 0},
		{"skipped up to the target: an earlier run's claim", []kafkaRead{{"t/1", 1}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr := &scenarioRun{s: scenarioSpec{Runs: []runSpec{{}, {}, {}}}, kafka: &kafkaInput{partitions: 2},
				runs: []*outcome{{index: 1, store: "run-1.csv"}, {index: 2, store: "run-2.csv"}, {index: 3, store: "run-3.csv"}}}
			o := &oracle{sr: sr, recs: map[string]*recording{
				"run-1.csv": kafkaRun(t0.Add(-time.Minute), 1, []kafkaRead{{"t/1", 0}, {"t/1", 1}}, commit(2, "t/1", 1)),
				"run-2.csv": skipped(),
				"run-3.csv": kafkaRun(later, 1, tc.again),
			}}
			o.checkClaims()
			if got := len(o.vs); got != tc.want {
				t.Errorf("violations %v, want %d", o.vs, tc.want)
			}
		})
	}
	// The run itself reads t/0's offset 2 again after the move back.
	for _, tc := range []struct {
		name string
		ctl  row
		want int
	}{
		{"moved back", back, 0},
		{"not moved back", forward, 1},
	} {
		t.Run("its own run: "+tc.name, func(t *testing.T) {
			rec := kafkaRun(t0, 1, read, commit(6, "t/0", 2), tc.ctl)
			rec.rows = append(rec.rows, kafkaReads(t0.Add(time.Second), 7, kafkaRead{"t/0", 2})...)
			sr := &scenarioRun{s: scenarioSpec{Runs: []runSpec{{}}}, kafka: &kafkaInput{partitions: 2},
				runs: []*outcome{{index: 1, store: "run-1.csv"}}}
			o := &oracle{sr: sr, recs: map[string]*recording{"run-1.csv": rec}}
			o.checkClaims()
			if got := len(o.vs); got != tc.want {
				t.Errorf("violations %v, want %d", o.vs, tc.want)
			}
		})
	}
}
