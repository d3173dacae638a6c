package replayer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// TestAReplayThatChecksAsItGoesReportsWhatAReplayAfterTheCheckReports:
// over CSV and SQLite recordings, clean, edited, broken and damaged, Replay
// of a fresh reader (whose one pass over the streams checks the recording)
// gives the report a replay of a reader checked before (Problems asked
// first: the pass only reads) gives.
func TestAReplayThatChecksAsItGoesReportsWhatAReplayAfterTheCheckReports(t *testing.T) {
	two := rows(t, run{procs: []string{"ledger", "alerts"}, journal: true}.memory(t, "alice,1", "bob,2000", "tick", "carol,3", "dave,-5000"))
	edited := append([]store.Entry(nil), two...)
	i := find(t, edited, "ledger", store.KindOutput, 2)
	edited[i].Payload = []byte(strings.Replace(string(edited[i].Payload), `"balance":2000`, `"balance":2001`, 1))
	var noJournal []store.Entry
	for _, e := range two {
		if !(e.Kind == store.KindJournal && e.Seq == 2) {
			noJournal = append(noJournal, e)
		}
	}
	noOutput := remove(two, find(t, two, "alerts", store.KindOutput, 1), find(t, two, "alerts", store.KindOutput, 1)+1)
	cases := []struct {
		name string
		rows []store.Entry
		opts replayer.Options
		// damage edits the CSV file's lines (header first); nil: none.
		damage func(lines []string) []string
	}{
		{"identical", two, replayer.Options{}, nil},
		{"an output edited", edited, replayer.Options{}, nil},
		{"an output edited, keep going", edited, replayer.Options{KeepGoing: true}, nil},
		{"a journal row missing", noJournal, replayer.Options{}, nil},
		{"an OUTPUT row missing", noOutput, replayer.Options{}, nil},
		{"one app for every processor", two, replayer.Options{App: "ledger"}, nil},
		{"a malformed line", two, replayer.Options{}, func(ls []string) []string {
			for i, l := range ls {
				if strings.HasPrefix(l, "ledger,5,") {
					ls[i] = "ledger,5,OUTPUT,not,a,row"
					break
				}
			}
			return ls
		}},
		{"a torn last line", two, replayer.Options{}, func(ls []string) []string {
			last := ls[len(ls)-1]
			ls[len(ls)-1] = last[:len(last)/2]
			return ls
		}},
	}
	for _, tc := range cases {
		for _, b := range []struct {
			name string
			be   storetest.Backend
		}{{"csv", storetest.CSV}, {"sqlite", storetest.SQLite}} {
			if tc.damage != nil && b.name != "csv" {
				continue
			}
			t.Run(tc.name+"/"+b.name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "r")
				r := storetest.Reopen(t, b.be, path, reopen(t, tc.rows))
				if tc.damage != nil {
					r.Close()
					data, err := os.ReadFile(path)
					if err != nil {
						t.Fatal(err)
					}
					ls := tc.damage(strings.Split(strings.TrimSuffix(string(data), "\n"), "\n"))
					out := strings.Join(ls, "\n")
					if tc.name != "a torn last line" {
						out += "\n"
					}
					if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
						t.Fatal(err)
					}
					if r, err = b.be.Open(path); err != nil {
						t.Fatal(err)
					}
					defer r.Close()
				}
				r.Problems() // the check: the replay's pass then only reads
				want, werr := replayer.Replay(context.Background(), r, builtins(), tc.opts)
				again, err := b.be.Open(path) // a fresh store: nothing checked yet
				if err != nil {
					t.Fatal(err)
				}
				defer again.Close()
				got, gerr := replayer.Replay(context.Background(), again, builtins(), tc.opts)
				if fmt.Sprint(werr) != fmt.Sprint(gerr) {
					t.Fatalf("errors: checked first %v, checking as it goes %v", werr, gerr)
				}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("reports (-checked first +checking as it goes):\n%s", d)
				}
				if tc.name != "identical" && tc.name != "one app for every processor" && want.Identical && want.Complete {
					t.Errorf("case %q is identical and complete: it proves nothing", tc.name)
				}
			})
		}
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.ReaderAt
	n atomic.Int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

// TestAReplayOfACSVRecordingReadsItOnce: opening a CSV recording and
// replaying it, its integrity check included, reads its bytes once (and
// the few blocks Open reads: the header, the META row, the end).
func TestAReplayOfACSVRecordingReadsItOnce(t *testing.T) {
	lines := make([]string, 5000)
	for i := range lines {
		lines[i] = fmt.Sprintf("acct%d,%d", i%50, i)
	}
	var buf bytes.Buffer
	m := run{}.memory(t, lines...)
	path := filepath.Join(t.TempDir(), "r.csv")
	storetest.Reopen(t, storetest.CSV, path, m).Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	buf.Write(data)
	cr := &countingReader{r: bytes.NewReader(buf.Bytes())}
	r, err := csvstore.NewReader(cr, int64(buf.Len()), path)
	if err != nil {
		t.Fatal(err)
	}
	rep := replay(t, r, replayer.Options{})
	if !rep.Identical || !rep.Complete || rep.Processors[0].Inputs != int64(len(lines)) {
		t.Fatalf("replay:\n%s", text(t, rep))
	}
	size, read := int64(buf.Len()), cr.n.Load()
	if slack := int64(3 * 64 << 10); read > size+slack {
		t.Errorf("opening and replaying a recording of %d bytes read %d bytes (%.2f times it), want at most %d more than once",
			size, read, float64(read)/float64(size), slack)
	}
	t.Logf("%d bytes, %d read", size, read)
}

// TestAOnePassReplayCancelledMidwayReportsItsProcessorsCancelled: a
// context cancelled while the pass runs stops every processor, with the
// report so far and an error wrapping context.Canceled.
func TestAOnePassReplayCancelledMidwayReportsItsProcessorsCancelled(t *testing.T) {
	lines := make([]string, 2*replayer.ProgressEvery+5)
	for i := range lines {
		lines[i] = fmt.Sprintf("acct%d,%d", i%7, i)
	}
	r := csvFile(t, run{procs: []string{"ledger", "alerts"}}.memory(t, lines...))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls int
	rep, err := replayer.Replay(ctx, r, builtins(), replayer.Options{Progress: func(string, int64) { calls++; cancel() }})
	if !errors.Is(err, context.Canceled) || rep == nil || rep.Complete {
		t.Fatalf("cancelled: err %v report %+v", err, rep)
	}
	if calls == 0 || calls > 2 || len(rep.Processors) != 2 { // each processor may reach its first progress call before the next look at ctx
		t.Fatalf("%d progress calls, %d processors, want 1 or 2 and 2", calls, len(rep.Processors))
	}
	for _, pr := range rep.Processors {
		if pr.StopKind != replayer.StopCancelled || pr.Inputs >= int64(len(lines)) {
			t.Errorf("processor %s: stop %q (%s) after %d inputs, want cancelled before the end", pr.Processor, pr.StopKind, pr.Stop, pr.Inputs)
		}
	}
}
