package incident

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/store"
)

var updateVerdicts = flag.Bool("update", false, "rewrite testdata/verdicts.sum from today's Explain")

// crash is scenario i of the random crashes: its recordings and the
// options (a pointer and a state on disk, or none) explain is given.
func crash(t *testing.T, i int) ([]Recording, Options) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(i), 2026))
	runs := crashScenario(rng)
	var opts Options
	if rng.IntN(2) == 0 {
		opts.Pointer = &Position{Epoch: 1, Offset: int64(rng.IntN(40))}
		opts.State = &core.DurableState{Applied: int64(rng.IntN(3)), Epoch: 1, Position: core.Position{Offset: int64(rng.IntN(40))}}
	}
	recs := make([]Recording, len(runs))
	for j, rows := range runs {
		m, err := store.OpenMemory(rows...)
		if err != nil {
			t.Fatal(err)
		}
		recs[j] = Recording{File: fmt.Sprintf("run%d.csv", j+1), Reader: m}
	}
	return recs, opts
}

// verdict is what explain answers on crash i: its Findings as JSON, or
// the error it refuses the recordings with (runs that are not consecutive).
func verdict(t *testing.T, i int) []byte {
	t.Helper()
	recs, opts := crash(t, i)
	f, err := Explain(recs, opts)
	if err != nil {
		return []byte("refused: " + err.Error())
	}
	b, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestExplainVerdictsAreFrozen reads testdata/verdicts.txt: the answers of
// explain, in full and as a person reads them, on the first random crashed
// runs and restarts (crashScenario), reviewed and frozen (go test
// ./incident -run TestExplainVerdictsAreFrozen -rewrite rewrites them after
// a change of answers, which its diff then shows).
func TestExplainVerdictsAreFrozen(t *testing.T) {
	datadriven.RunTest(t, "testdata/verdicts.txt", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "explain" {
			t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
		}
		var i int
		d.ScanArgs(t, "crash", &i)
		recs, opts := crash(t, i)
		f, err := Explain(recs, opts)
		if err != nil {
			return "refused: " + err.Error() + "\n"
		}
		var b strings.Builder
		if err := f.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	})
}

// TestExplainVerdictsOfTwoThousandCrashesAreFrozen compares Explain's
// verdicts (their Findings as indented JSON, or the error it refuses the
// recordings with) on 2,000 random crashed runs and restarts with the
// SHA-256 sums in testdata/verdicts.sum, frozen when they were proven equal
// to the answers of the Explain before (which kept every input a struct
// behind a pointer). A change of answers shows as the crashes whose sum
// changed; -update rewrites the sums.
func TestExplainVerdictsOfTwoThousandCrashesAreFrozen(t *testing.T) {
	const file, n = "testdata/verdicts.sum", 2000
	var got bytes.Buffer
	for i := range n {
		fmt.Fprintf(&got, "%d %x\n", i, sha256.Sum256(verdict(t, i)))
	}
	if *updateVerdicts {
		if err := os.WriteFile(file, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	wantSums := map[int]string{}
	sc := bufio.NewScanner(bytes.NewReader(want))
	for line := 1; sc.Scan(); line++ {
		num, sum, ok := strings.Cut(sc.Text(), " ")
		i, err := strconv.Atoi(num)
		if !ok || err != nil {
			t.Fatalf("%s:%d: not \"CRASH SHA256\": %q", file, line, sc.Text())
		}
		wantSums[i] = sum
	}
	if len(wantSums) != n {
		t.Fatalf("%s holds %d sums, want %d", file, len(wantSums), n)
	}
	changed := 0
	sc = bufio.NewScanner(&got)
	for sc.Scan() {
		num, sum, _ := strings.Cut(sc.Text(), " ")
		i, _ := strconv.Atoi(num)
		if wantSums[i] != sum {
			if changed++; changed <= 5 {
				t.Errorf("crash %d: Explain's verdict changed (frozen sum %s):\n%s", i, wantSums[i], verdict(t, i))
			}
		}
	}
	if changed > 5 {
		t.Errorf("... and %d more crashes whose Findings changed", changed-5)
	}
}

// crashScenario writes the rows of runs of random processors over random
// feeds: each run resumes at a random earlier position (so that it delivers
// inputs again), writes inputs with zero to two outputs (the same bytes or
// not as before), FAILED completions and inputs, DROPPED ranges, JOURNAL
// rows and INDEXED inputs, timers and COMMIT rows, and ends with END or
// crashes (no END, the last input's outputs cut).
func crashScenario(rng *rand.Rand) [][]store.Entry {
	t0 := time.Date(2024, 3, 1, 8, 0, 0, 0, time.UTC)
	streams := [][]string{{"p"}, {"p", "q"}, {"q#w0", "q#w1"}, {"p", "q#w0", "q#w1"}}[rng.IntN(4)]
	feeds := []string{"in", "in2"}[:1+rng.IntN(2)]
	keys := []string{"", "k1"}[:1+rng.IntN(2)]
	runs := make([][]store.Entry, 1+rng.IntN(4))
	progress := 0 // the offset, in lines, the runs got to
	for r := range runs {
		apps := map[string]string{}
		for _, s := range streams {
			apps[s] = "app"
		}
		rows := []store.Entry{store.EncodeMeta(store.Meta{Created: t0, Apps: apps, Streams: streams})}
		next := map[string]int64{"": 2}
		add := func(e store.Entry) {
			if _, ok := next[e.Processor]; !ok {
				next[e.Processor] = 1
			}
			e.Index = next[e.Processor]
			next[e.Processor]++
			rows = append(rows, e)
		}
		for _, s := range streams {
			add(store.Entry{Processor: s, Kind: store.KindStart, Instant: t0})
		}
		from := 0
		if progress > 0 {
			from = rng.IntN(progress + 1)
		}
		seq := map[string]int64{}
		inputs := map[string]int64{}
		n := rng.IntN(30)
		for i := range n {
			off := int64(from + i + 1)
			feed := feeds[rng.IntN(len(feeds))]
			key := keys[rng.IntN(len(keys))]
			proc := streams[rng.IntN(len(streams))]
			seq[feed]++
			if rng.IntN(12) == 0 {
				seq[feed] += int64(rng.IntN(3)) // a gap in the seqs
			}
			s := seq[feed]
			switch rng.IntN(14) {
			case 0:
				add(store.Entry{Processor: proc, Kind: store.KindDropped, Source: feed, Seq: s, N: 1 + int64(rng.IntN(3)), Offset: off, Detail: "drop"})
				continue
			case 1:
				add(store.Entry{Processor: proc, Kind: store.KindFailed, Source: feed, Seq: s, Detail: "fail"})
				continue
			case 2:
				add(store.Entry{Processor: proc, Kind: store.KindTimer, Instant: t0})
			case 3:
				add(store.Entry{Kind: store.KindCommit, Source: feed, Seq: max(1, s-int64(rng.IntN(3))), Epoch: 1, Key: key, Offset: off - int64(rng.IntN(3))})
			case 4:
				add(store.Entry{Kind: store.KindJournal, Source: feed, Seq: s + 1, Payload: []byte("in flight")})
			}
			indexed := rng.IntN(5) == 0
			if indexed {
				add(store.Entry{Kind: store.KindJournal, Source: feed, Seq: s, Payload: fmt.Appendf(nil, "line %d", off)})
			}
			if rng.IntN(8) != 0 {
				add(store.Entry{Processor: proc, Kind: store.KindDelivery, Source: feed, Seq: s, Epoch: 1, Key: key, Offset: off})
			}
			outs := int64(rng.IntN(3))
			kind := store.KindInline
			if indexed {
				kind = store.KindIndexed
			}
			add(store.Entry{Processor: proc, Kind: kind, Source: feed, Seq: s, N: outs, Instant: t0.Add(time.Duration(off) * time.Second),
				Payload: fmt.Appendf(nil, "line %d", off)})
			inputs[proc]++
			written := outs
			if i == n-1 && rng.IntN(3) == 0 {
				written = int64(rng.IntN(int(outs) + 1)) // the crash cut its outputs
			}
			for k := range written {
				add(store.Entry{Processor: proc, Kind: store.KindOutput, Source: "out", Seq: k + 1,
					Payload: fmt.Appendf(nil, "out %d %d", off, rng.IntN(2))})
			}
			if rng.IntN(15) == 0 {
				add(store.Entry{Processor: proc, Kind: store.KindFailed, Source: feed, Seq: s, Detail: "completion"})
			}
			progress = max(progress, int(off))
		}
		if rng.IntN(2) == 0 {
			for _, s := range streams {
				add(store.Entry{Processor: s, Kind: store.KindEnd, Instant: t0, N: inputs[s]})
			}
		}
		runs[r] = rows
	}
	return runs
}
