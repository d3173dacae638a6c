package replayer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/internal/apps"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
)

// lines exercises every kind of ledger line but "fail".
var lines = []string{"alice,100", "bob,-2000", "transfer,alice,bob,40", "oops", "tick", "carol,5", "alice,-7"}

func TestReplayIdentical(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  run
	}{
		{"inline", run{procs: []string{"ledger", "alerts"}}},
		{"journal", run{procs: []string{"ledger", "alerts"}, journal: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.run.memory(t, lines...)
			for name, r := range map[string]store.Reader{"memory": m, "csv": csvFile(t, m)} {
				rep := replay(t, r, replayer.Options{})
				if !rep.Identical || !rep.Complete || !rep.Lossless {
					t.Errorf("%s: not identical, complete and lossless:\n%s", name, text(t, rep))
				}
				got := map[string][2]int64{}
				for _, p := range rep.Processors {
					got[p.Processor] = [2]int64{p.Inputs, p.Outputs}
				}
				// ledger: 7 lines + 1 timer; outputs: 1+1+2+1 (rejected)+0+1+1 + summary.
				want := map[string][2]int64{"ledger": {8, 8}, "alerts": {7, 1}}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: inputs, outputs (-want +got):\n%s", name, diff)
				}
			}
		})
	}
}

func TestReplayStopsAtARecordedFailure(t *testing.T) {
	m := run{}.memory(t, "alice,1", "fail", "alice,2")
	rep := replay(t, m, replayer.Options{})
	p := rep.Processors[0]
	if !rep.Identical || rep.Complete || p.StopKind != replayer.StopFailed || p.StopIndex != 5 || p.Inputs != 1 {
		t.Fatalf("want identical, incomplete, stopped by the recorded failure at index 5 after 1 input:\n%s", text(t, rep))
	}
	if !strings.Contains(p.Stop, "recorded failure at index 5") || !strings.Contains(p.Stop, "fail line") {
		t.Errorf("stop reason %q", p.Stop)
	}
}

// divergence replays rows and checks the first divergence's index and kind.
func divergence(t *testing.T, rows []store.Entry, index int64, kind string) *replayer.Report {
	t.Helper()
	rep := replay(t, reopen(t, rows), replayer.Options{})
	var p *replayer.ProcessorReport
	for i := range rep.Processors {
		if rep.Processors[i].Processor == "ledger" {
			p = &rep.Processors[i]
		}
	}
	if rep.Identical || p.First == nil {
		t.Fatalf("want a divergence at index %d, got none:\n%s", index, text(t, rep))
	}
	if p.First.Index != index || p.First.Kind != kind {
		t.Fatalf("first divergence %s at index %d, want %s at %d:\n%s", p.First.Kind, p.First.Index, kind, index, text(t, rep))
	}
	if p.StopKind != replayer.StopDivergence || p.StopIndex != index {
		t.Errorf("stop %q (%s at %d), want a divergence stop at %d", p.Stop, p.StopKind, p.StopIndex, index)
	}
	return rep
}

// TestReplayDoesNotReproduceAnEditedRecording: each edit of a recording is a
// divergence at the right row.
func TestReplayDoesNotReproduceAnEditedRecording(t *testing.T) {
	rec := rows(t, run{}.memory(t, "alice,100", "alice,50", "tick", "bob,3", "tick", "carol,1"))

	t.Run("output edited", func(t *testing.T) {
		rs := append([]store.Entry(nil), rec...)
		i := find(t, rs, "ledger", store.KindOutput, 2) // alice,50's posting
		rs[i].Payload = []byte(strings.Replace(string(rs[i].Payload), `"balance":150`, `"balance":151`, 1))
		rep := divergence(t, rs, rs[i-1].Index, replayer.KindOutput)
		d := rep.Processors[0].First
		if !strings.Contains(d.Diff, "151") || !strings.Contains(d.Diff, "150") || d.Input != `"alice,50"` {
			t.Errorf("divergence does not show the edit: input %s diff\n%s", d.Input, d.Diff)
		}
		if d.Delivery == nil || d.Delivery.Position.Offset != 2 {
			t.Errorf("delivery %+v, want offset 2", d.Delivery)
		}
	})

	t.Run("inputs reordered", func(t *testing.T) {
		// Swap the first two inputs (DELIVERY, INLINE, OUTPUT each) and
		// renumber: alice,50 first gives balance 50, not 150.
		a := find(t, rec, "ledger", store.KindDelivery, 1)
		b := find(t, rec, "ledger", store.KindDelivery, 2)
		c := find(t, rec, "ledger", store.KindDelivery, 3)
		rs := append([]store.Entry(nil), rec[:a]...)
		rs = append(rs, rec[b:c]...)
		rs = append(rs, rec[a:b]...)
		rs = append(rs, rec[c:]...)
		for k, idx := a, rec[a].Index; k < c; k, idx = k+1, idx+1 {
			rs[k].Index = idx
		}
		divergence(t, rs, rec[a+1].Index, replayer.KindOutput)
	})

	t.Run("timer removed", func(t *testing.T) {
		i := find(t, rec, "ledger", store.KindTimer, 1)
		second := rec[find(t, rec, "ledger", store.KindTimer, 2)].Index
		rs := remove(rec, i, i+2) // TIMER 1 and its OUTPUT
		if ps := reopen(t, rs).Problems(); len(ps) != 0 {
			t.Fatalf("the edit should leave a whole recording: %v", ps)
		}
		divergence(t, rs, second-2, replayer.KindTimer)
	})

	t.Run("clock reading removed", func(t *testing.T) {
		rs := append([]store.Entry(nil), rec...)
		i := find(t, rs, "ledger", store.KindInline, 4) // bob,3
		rs[i].Reads = nil
		divergence(t, rs, rs[i].Index, replayer.KindClock)
	})

	t.Run("clock reading added", func(t *testing.T) {
		rs := append([]store.Entry(nil), rec...)
		i := find(t, rs, "ledger", store.KindInline, 4)
		rs[i].Reads = append(rs[i].Reads, rs[i].Reads...)
		divergence(t, rs, rs[i].Index, replayer.KindClock)
	})

	t.Run("output removed", func(t *testing.T) {
		rs := append([]store.Entry(nil), rec...)
		i := find(t, rs, "ledger", store.KindOutput, 1)
		rs[i-1].N = 0
		rs = remove(rs, i, i+1)
		divergence(t, rs, rs[i-1].Index, replayer.KindCount)
	})
}

// TestReplayDeliveryChanged: a processor that skips by position decides
// otherwise under an edited DELIVERY.
func TestReplayDeliveryChanged(t *testing.T) {
	rec := rows(t, redelivered(t))
	i := find(t, rec, "ledger", store.KindDelivery, 2) // re-delivered, skipped live
	if rec[i+1].N != 0 {
		t.Fatalf("the fixture's second input should have been skipped live: %+v", rec[i+1])
	}
	for name, edit := range map[string]func(e *store.Entry){
		"epoch":  func(e *store.Entry) { e.Epoch = 2 },
		"offset": func(e *store.Entry) { e.Offset = 9 },
	} {
		t.Run(name, func(t *testing.T) {
			rs := append([]store.Entry(nil), rec...)
			edit(&rs[i])
			divergence(t, rs, rs[i+1].Index, replayer.KindCount)
		})
	}
}

// redelivered is run 2 of a ledger over a log of 5 lines, the state of a
// run 1 over the first 3 restored: lines 1-3 are delivered again and
// skipped (seed 5a), lines 4-5 applied.
func redelivered(t *testing.T) *store.Memory {
	t.Helper()
	state := filepath.Join(t.TempDir(), "ledger.json")
	all := []string{"alice,1", "bob,2", "transfer,alice,bob,1", "carol,3", "alice,4"}
	run{state: state}.memory(t, all[:3]...)
	return run{state: state}.memory(t, all...)
}

// TestFeedDeliveryReplayContext is the seed's FeedDeliveryReplayContextTest:
// a processor that restores (epoch, position) state and skips re-delivered
// lines makes the same decisions in its replay as live, the skips included.
func TestFeedDeliveryReplayContext(t *testing.T) {
	for _, journal := range []bool{false, true} {
		state := filepath.Join(t.TempDir(), "ledger.json")
		all := []string{"alice,1", "bob,2", "transfer,alice,bob,1", "carol,3", "alice,4"}
		run{state: state, journal: journal}.memory(t, all[:3]...)
		m := run{state: state, journal: journal}.memory(t, all...)
		// Live: the first three deliveries (transfer included) emitted nothing.
		var outs []int64
		for e, err := range m.Stream("ledger") {
			if err != nil {
				t.Fatal(err)
			}
			if e.Kind == store.KindIndexed || e.Kind == store.KindInline {
				outs = append(outs, e.N)
			}
		}
		if diff := cmp.Diff([]int64{0, 0, 0, 1, 1}, outs); diff != "" {
			t.Fatalf("journal=%v: live outputs per input (-want +got):\n%s", journal, diff)
		}
		for name, r := range map[string]store.Reader{"memory": m, "csv": csvFile(t, m)} {
			rep := replay(t, r, replayer.Options{})
			if !rep.Identical || !rep.Complete {
				t.Errorf("journal=%v %s: the replay does not make the live decisions:\n%s", journal, name, text(t, rep))
			}
		}
		// Without the delivery, the replay would apply the skipped lines.
		var rs []store.Entry
		for _, e := range rows(t, m) {
			if e.Kind != store.KindDelivery {
				rs = append(rs, e)
			}
		}
		var next int64
		for i := range rs {
			if rs[i].Processor == "ledger" {
				next++
				rs[i].Index = next
			}
		}
		rep := replay(t, reopen(t, rs), replayer.Options{})
		if rep.Identical {
			t.Errorf("journal=%v: a replay without deliveries must diverge", journal)
		}
	}
}

func TestReplayKeepGoingCountsEveryDivergence(t *testing.T) {
	rs := rows(t, run{}.memory(t, "alice,1", "alice,2", "alice,3"))
	for k := 1; k <= 3; k++ {
		i := find(t, rs, "ledger", store.KindOutput, k)
		rs[i].Payload = []byte(strings.Replace(string(rs[i].Payload), `"amount":`, `"amount":1`, 1))
	}
	rep := replay(t, reopen(t, rs), replayer.Options{KeepGoing: true})
	p := rep.Processors[0]
	if p.Divergences != 3 || p.Stop != "" || p.Inputs != 3 || p.First.Index != 3 {
		t.Fatalf("want 3 divergences, first at index 3, run to the end:\n%s", text(t, rep))
	}
	rep = replay(t, reopen(t, rs), replayer.Options{})
	if p := rep.Processors[0]; p.Divergences != 1 || p.Inputs != 1 {
		t.Fatalf("without KeepGoing, want a stop at the first divergence:\n%s", text(t, rep))
	}
}

func TestReplayLossIsReportedAndReplayGoesOn(t *testing.T) {
	rs := rows(t, run{}.memory(t, "alice,1", "alice,2"))
	i := find(t, rs, "ledger", store.KindDelivery, 2)
	detail, _ := json.Marshal(map[string]any{"first": 7, "last": 9, "reason": "queue full", "approximate": true})
	drop := store.Entry{Processor: "ledger", Index: rs[i].Index, Kind: store.KindDropped, Source: "input", Seq: 7, N: 3, Detail: string(detail)}
	rs = append(rs[:i], append([]store.Entry{drop}, rs[i:]...)...)
	for k := i + 1; k < len(rs); k++ {
		if rs[k].Processor == "ledger" {
			rs[k].Index++
		}
	}
	rep := replay(t, reopen(t, rs), replayer.Options{})
	want := []replayer.Loss{{Kind: replayer.LossDropped, Feed: "input", Index: drop.Index, Count: 3, First: 7, Last: 9, Reason: "queue full", Approximate: true}}
	if diff := cmp.Diff(want, rep.Processors[0].Losses); diff != "" {
		t.Errorf("losses (-want +got):\n%s", diff)
	}
	if !rep.Identical || !rep.Complete || rep.Lossless || rep.Processors[0].Inputs != 2 {
		t.Errorf("want identical, complete, not lossless, 2 inputs:\n%s", text(t, rep))
	}
}

// TestReplayStopsOneProcessorOnly: a panic, a missing journal row, an
// undecodable payload, a failed restore stop the processor concerned; the
// others are replayed.
func TestReplayStopsOneProcessorOnly(t *testing.T) {
	base := rows(t, run{procs: []string{"ledger", "alerts"}, journal: true}.memory(t, "alice,1", "bob,2000", "carol,3"))
	panicky := withApp(builtins(), core.App{Name: "ledger", New: func(map[string]string) (core.Processor, error) {
		l, err := apps.NewLedger(apps.LedgerOptions{})
		return panicLedger{l}, err
	}, Decode: apps.Decode})
	for _, tc := range []struct {
		name string
		edit func(rs []store.Entry) []store.Entry
		reg  []core.App
		want string
	}{
		{"panic", nil, panicky, "panicked in replay"},
		{"missing journal", func(rs []store.Entry) []store.Entry {
			var out []store.Entry
			for _, e := range rs {
				if e.Kind == store.KindJournal && e.Seq == 2 {
					continue
				}
				out = append(out, e)
			}
			return out
		}, nil, "journal row of feed \"input\" seq 2"},
		{"undecodable", func(rs []store.Entry) []store.Entry {
			for i := range rs {
				if rs[i].Kind == store.KindJournal && rs[i].Seq == 2 {
					rs[i].Payload = []byte(`42`)
				}
			}
			return rs
		}, nil, "does not decode"},
		{"bad snapshot", func(rs []store.Entry) []store.Entry {
			rs[find(t, rs, "ledger", store.KindStart, 1)].Payload = []byte(`[`)
			return rs
		}, nil, "restoring the START snapshot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := append([]store.Entry(nil), base...)
			if tc.edit != nil {
				rs = tc.edit(rs)
			}
			reg := tc.reg
			if reg == nil {
				reg = builtins()
			}
			rep, err := replayer.Replay(context.Background(), reopen(t, rs), reg, replayer.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range rep.Processors {
				switch p.Processor {
				case "ledger":
					if p.StopKind != replayer.StopError || !strings.Contains(p.Stop, tc.want) {
						t.Errorf("ledger stop %q (%s), want an error naming %q", p.Stop, p.StopKind, tc.want)
					}
				case "alerts":
					if p.Stop != "" && tc.name != "missing journal" && tc.name != "undecodable" {
						t.Errorf("alerts stopped: %s", p.Stop)
					}
				}
			}
			if rep.Complete {
				t.Error("a stopped replay is not complete")
			}
		})
	}
}

// A replay builds each app with the options given for it: alerts recorded
// with threshold 5 replays identical with threshold 5, diverges with the
// default threshold, and an option the app does not know stops it.
func TestReplayBuildsEachAppWithItsOptions(t *testing.T) {
	m := run{procs: []string{"alerts"}, options: map[string]string{"threshold": "5"}}.memory(t, "alice,1", "bob,7")
	for _, tc := range []struct {
		name    string
		options map[string]map[string]string
		want    string // identical, diverged or stopped
	}{
		{"the recorded options", map[string]map[string]string{"alerts": {"threshold": "5"}}, "identical"},
		{"options of another app only", map[string]map[string]string{"ledger": {"threshold": "5"}}, "diverged"},
		{"no options", nil, "diverged"},
		{"an unknown option", map[string]map[string]string{"alerts": {"colour": "red"}}, "stopped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := replayer.Replay(context.Background(), m, builtins(), replayer.Options{AppOptions: tc.options})
			if err != nil {
				t.Fatal(err)
			}
			got := "identical"
			switch {
			case rep.Processors[0].StopKind != "" && rep.Processors[0].StopKind != replayer.StopDivergence:
				got = "stopped"
			case !rep.Identical:
				got = "diverged"
			}
			if got != tc.want {
				t.Fatalf("replay %s, want %s:\n%+v", got, tc.want, rep.Processors[0])
			}
		})
	}
}

func TestReplayUnknownApp(t *testing.T) {
	m := run{procs: []string{"ledger", "alerts"}}.memory(t, "alice,1")
	_, err := replayer.Replay(context.Background(), m, []core.App{apps.LedgerApp()}, replayer.Options{})
	if !errors.Is(err, replayer.ErrUnknownApp) || !strings.Contains(err.Error(), `"alerts"`) {
		t.Fatalf("err = %v, want ErrUnknownApp naming alerts", err)
	}
	_, err = replayer.Replay(context.Background(), m, builtins(), replayer.Options{App: "nope"})
	if !errors.Is(err, replayer.ErrUnknownApp) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("err = %v, want ErrUnknownApp naming nope", err)
	}
	// The override replays every processor with one app: alerts as a
	// ledger diverges.
	rep, err := replayer.Replay(context.Background(), m, builtins(), replayer.Options{App: "ledger"})
	if err != nil || rep.Identical {
		t.Fatalf("replaying alerts as a ledger: err %v, identical %v", err, rep != nil && rep.Identical)
	}
}

func TestReplayIntegrityProblemsMakeItIncomplete(t *testing.T) {
	rs := rows(t, run{}.memory(t, "alice,1", "alice,2"))
	rs = slices.DeleteFunc(rs, func(e store.Entry) bool { return e.Kind == store.KindEnd }) // a killed run (COMMIT rows may follow END)
	rep := replay(t, reopen(t, rs), replayer.Options{})
	if !rep.Identical || rep.Complete || len(rep.Problems) != 1 || !errors.Is(&rep.Problems[0], store.ErrUnfinished) {
		t.Fatalf("want identical, incomplete with one unfinished problem:\n%s", text(t, rep))
	}
	if rep.Processors[0].Inputs != 2 || len(rep.Processors[0].Problems) != 1 {
		t.Errorf("the unfinished stream is replayed to its last row and names its problem:\n%s", text(t, rep))
	}
}

func TestReplayProgressAndCancel(t *testing.T) {
	ls := make([]string, 2*replayer.ProgressEvery+5)
	for i := range ls {
		ls[i] = "a,1"
	}
	m := run{queue: 4096}.memory(t, ls...)
	var calls []int64
	rep := replay(t, m, replayer.Options{Progress: func(p string, n int64) { calls = append(calls, n) }})
	if diff := cmp.Diff([]int64{replayer.ProgressEvery, 2 * replayer.ProgressEvery}, calls); diff != "" || !rep.Identical {
		t.Errorf("progress calls (-want +got):\n%s", diff)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := replayer.Replay(ctx, m, builtins(), replayer.Options{})
	if !errors.Is(err, context.Canceled) || rep == nil || rep.Complete || rep.Processors[0].StopKind != replayer.StopCancelled {
		t.Fatalf("cancelled: err %v report %+v", err, rep)
	}
}

func TestReportJSONAndText(t *testing.T) {
	rs := rows(t, run{}.memory(t, "alice,1", "fail"))
	i := find(t, rs, "ledger", store.KindOutput, 1)
	rs[i].Payload = []byte(strings.Replace(string(rs[i].Payload), `"balance":1`, `"balance":2`, 1))
	rep := replay(t, reopen(t, rs), replayer.Options{})
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"identical", "complete", "lossless", "processors", "problems"} {
		if _, ok := back[k]; !ok {
			t.Errorf("JSON has no %q: %s", k, b)
		}
	}
	got := text(t, rep)
	if again := text(t, replay(t, reopen(t, rs), replayer.Options{})); again != got {
		t.Errorf("text differs between two replays:\n%s\n---\n%s", got, again)
	}
	for _, want := range []string{"replay: DIVERGED, INCOMPLETE, lossless", `first divergence at index 3 (output): feed "input" seq 1`,
		`input: "alice,1"`, `-`, `"balance"`} {
		if !strings.Contains(got, want) {
			t.Errorf("text lacks %q:\n%s", want, got)
		}
	}
}

// panicLedger is a ledger that panics on every input.
type panicLedger struct{ *apps.Ledger }

func (panicLedger) OnEvent(*core.Cycle, any) error { panic("boom") }

// TestAReplayOfZeroStreamsIsNeverComplete: a recording that holds META and
// no processor stream (a run killed right after it began, or one whose
// streams were all lost) proves nothing.
func TestAReplayOfZeroStreamsIsNeverComplete(t *testing.T) {
	meta := store.EncodeMeta(store.Meta{Created: t0, Apps: map[string]string{"ledger": "ledger"}})
	m := reopen(t, []store.Entry{meta})
	for name, r := range map[string]store.Reader{"memory": m, "csv": csvFile(t, m)} {
		rep := replay(t, r, replayer.Options{})
		if rep.Complete || len(rep.Processors) != 0 {
			t.Errorf("%s: complete %v over %d processors, want not complete:\n%s", name, rep.Complete, len(rep.Processors), text(t, rep))
		}
	}
}

// TestAFailedCompletionAfterItsInputIsReplayedAndReported: a completion
// callback's FAILED row comes after its input's rows (written ahead of the
// completions); the replay compares that input, then stops naming the
// failed completion, and the report is not complete.
func TestAFailedCompletionAfterItsInputIsReplayedAndReported(t *testing.T) {
	rs := rows(t, run{}.memory(t, "alice,1", "alice,2"))
	in := find(t, rs, "ledger", store.KindInline, 1)
	at := in + 1 + int(rs[in].N) // after its OUTPUT rows
	failed := store.Entry{Processor: "ledger", Index: rs[at-1].Index + 1, Kind: store.KindFailed, Source: rs[in].Source,
		Seq: rs[in].Seq, Instant: t0, Detail: "completion: saving the state: disk full"}
	edited := append(append(append([]store.Entry(nil), rs[:at]...), failed), rs[at:]...)
	for k := at + 1; k < len(edited); k++ {
		if edited[k].Processor == "ledger" {
			edited[k].Index++
		}
	}
	rep := replay(t, reopen(t, edited), replayer.Options{})
	p := rep.Processors[0]
	if !rep.Identical || rep.Complete || p.StopKind != replayer.StopFailed || p.StopIndex != failed.Index ||
		p.Inputs != 1 || p.Outputs != rs[in].N {
		t.Fatalf("want identical, not complete, 1 input and its %d outputs compared, stopped by the FAILED row at %d:\n%s",
			rs[in].N, failed.Index, text(t, rep))
	}
	want := fmt.Sprintf("a completion callback of the input at index %d", rs[in].Index)
	if !strings.Contains(p.Stop, want) || !strings.Contains(p.Stop, "disk full") {
		t.Errorf("stop reason %q, want it to name %q and the detail", p.Stop, want)
	}
}

// No nil context: Replay and Diff refuse one with ErrUsage instead of
// replaying (or comparing) under context.Background().
func TestReplayAndDiffRefuseANilContext(t *testing.T) {
	m := run{}.memory(t, lines...)
	var nilCtx context.Context
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Replay", func() error { _, err := replayer.Replay(nilCtx, m, builtins(), replayer.Options{}); return err }},
		{"Diff", func() error {
			_, err := replayer.Diff(nilCtx, []store.Reader{m}, []store.Reader{m}, replayer.DiffOptions{})
			return err
		}},
	} {
		if err := tc.call(); !errors.Is(err, replayer.ErrUsage) {
			t.Errorf("%s(nil ctx): %v, want ErrUsage", tc.name, err)
		}
	}
}

// TestALossRecordedPastAReplaysStopIsStillALoss: a stream whose replay
// stops at a FAILED row, with a LOST row after it (a source's loss the
// run recorded later), is not lossless: the replay stops replaying, not
// reading what the stream says was lost. It said lossless.
func TestALossRecordedPastAReplaysStopIsStillALoss(t *testing.T) {
	rs := rows(t, run{}.memory(t, "alice,1", "alice,2", "bob,3"))
	in := find(t, rs, "ledger", store.KindInline, 1)
	at := in + 1 + int(rs[in].N)
	failed := store.Entry{Processor: "ledger", Kind: store.KindFailed, Source: rs[in].Source, Seq: rs[in].Seq, Instant: t0,
		Detail: "completion: saving the state: disk full"}
	lost := store.Lost{Feed: rs[in].Source, Seq: rs[in].Seq + 1, Reason: "oversized", Items: 1, From: 40, To: 900}.Entry("ledger", 0)
	edited := insert(rs, find(t, rs, "ledger", store.KindEnd, 1), lost)
	edited = insert(edited, at, failed)
	rep := replay(t, reopen(t, edited), replayer.Options{})
	p := rep.Processors[0]
	if p.StopKind != replayer.StopFailed || rep.Lossless || len(p.Losses) != 1 {
		t.Fatalf("want stopped by the FAILED row, not lossless, the LOST row past it reported:\n%s", text(t, rep))
	}
}

// TestATimerDivergencePastAMissingInputIsIncomplete: the rows of an input
// before a timer are gone (the COMMIT row covers its seq), so the timer's
// replayed summary differs from the recorded one: the processor's state at
// the timer is not in the recording, so its replay stops there as
// incomplete, not diverged. A timer whose recorded summary was edited,
// with the missing input after it in the stream (a later input of the feed
// has a lower seq), still diverges. Both readers: a Memory (Stream per
// processor) and a CSV file (one pass over the streams).
func TestATimerDivergencePastAMissingInputIsIncomplete(t *testing.T) {
	rec := rows(t, run{}.memory(t, "bob,5", "bob,6", "tick", "bob,7", "bob,9"))
	timer := find(t, rec, "ledger", store.KindTimer, 1)
	if rec[timer-1].Kind != store.KindInline || rec[timer-1].Seq != 3 {
		t.Fatalf("the timer should fire right after the tick (seq 3), not after %s seq %d", rec[timer-1].Kind, rec[timer-1].Seq)
	}
	before := find(t, rec, "ledger", store.KindDelivery, 2) // bob,6: DELIVERY, INLINE, OUTPUT
	last := find(t, rec, "ledger", store.KindDelivery, 5)   // bob,9
	edited := append([]store.Entry(nil), rec...)
	edited[timer+1].Payload = []byte(strings.Replace(string(edited[timer+1].Payload), `"total":11`, `"total":999`, 1))
	tests := []struct {
		name      string
		rows      []store.Entry
		identical bool
		stop      string
	}{
		{"an input before the timer missing", remove(rec, before, before+3), true, replayer.StopIncomplete},
		{"an input after the timer missing, the timer edited", remove(edited, last, last+3), false, replayer.StopDivergence},
	}
	stop := func(keep bool, want string) string {
		if keep && want == replayer.StopDivergence {
			return "" // going on past every divergence
		}
		return want
	}
	for _, tc := range tests {
		for _, r := range []struct {
			name string
			r    store.Reader
		}{{"memory", reopen(t, tc.rows)}, {"csv", csvFile(t, reopen(t, tc.rows))}} {
			for _, keep := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/keep-going=%v", tc.name, r.name, keep), func(t *testing.T) {
					rep := replay(t, r.r, replayer.Options{KeepGoing: keep})
					p := rep.Processors[0]
					if len(rep.Problems) != 1 || rep.Problems[0].Kind != store.ProblemMissingInput {
						t.Fatalf("want one missing-input problem, got %v", rep.Problems)
					}
					if rep.Identical != tc.identical || rep.Complete || p.StopKind != stop(keep, tc.stop) {
						t.Errorf("got identical %v, complete %v, stop %q; want identical %v, not complete, stop %q:\n%s",
							rep.Identical, rep.Complete, p.StopKind, tc.identical, stop(keep, tc.stop), text(t, rep))
					}
				})
			}
		}
	}
}
