package torture

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/console"
	"github.com/blackbox-audit/blackbox/engine"
)

// TestTheOracleHoldsTheRecordingToTheWindowsAnswers: invariant 9 on a
// run's CONTROL and DROPPED rows against what the window answered: the
// rows of the actions applied, in order, and the window's end of a pause,
// pass; a row missing, one of a refused request, other positions, a
// release recorded as no loss or outside its range, a seek whose rows do
// not cover its plan, a run that says lossless after a release, fail.
func TestTheOracleHoldsTheRecordingToTheWindowsAnswers(t *testing.T) {
	until := time.Date(2026, 1, 1, 6, 0, 0, 500, time.UTC)
	req := func(reason string) console.Request {
		return console.Request{Feed: "input", Group: "main", Reason: reason}
	}
	pauseUntil := req("torture step 1: pause-until")
	pauseUntil.Until = &until
	applied := func(kind ctlKind, action console.Action, rq console.Request, before, after int64) ctlResult {
		return ctlResult{kind: kind, action: action, req: rq, code: http.StatusOK,
			ans: console.Answer{Action: action, Applied: true, Who: ctlWho, Before: before, After: after}}
	}
	seek := applied(ctlSeek, console.ActionSeek, req("torture step 5: seek"), 12, 15)
	seek.ans.Plan = &console.Plan{Feed: "input", Group: "main", Before: 12, After: 15, Loss: true, Unprocessed: 3, FirstSeq: 13, LastSeq: 15}
	results := []ctlResult{
		applied(ctlPauseUntil, console.ActionPause, pauseUntil, 2, 2),
		{kind: ctlBadToken, action: console.ActionPause, req: req("torture step 2: bad-token"), code: http.StatusUnauthorized},
		applied(ctlPause, console.ActionPause, req("torture step 3: pause"), 4, 4),
		applied(ctlRelease, console.ActionRelease, req("torture step 4: release"), 4, 12),
		seek,
		applied(ctlResume, console.ActionResume, req("torture step 6: resume"), 15, 15),
		applied(ctlKill, console.ActionKill, console.Request{Reason: "torture step 7: kill", Finish: true}, 0, 0),
	}
	control := func(action, who, reason string, before, after int64, extra string) row {
		return row{kind: "CONTROL", source: "input", detail: fmt.Sprintf(`{"group":"main","action":%q,"who":%q,"reason":%q,"before":%d,"after":%d%s}`,
			action, who, reason, before, after, extra)}
	}
	dropped := func(proc string, first, last int64, reason string) row {
		return row{kind: "DROPPED", processor: proc, source: "input", seq: first, n: last - first + 1,
			detail: fmt.Sprintf(`{"first":%d,"last":%d,"reason":%q,"approximate":false}`, first, last, reason)}
	}
	kill := row{kind: "CONTROL", detail: `{"action":"kill","who":"torture","reason":"torture step 7: kill","before":0,"after":0}`}
	good := []row{
		control("pause", ctlWho, "torture step 1: pause-until", 2, 2, `,"until":"2026-01-01T06:00:00.0000005Z"`),
		control("resume", console.Operator, "the pause ended (its deadline passed)", 3, 3, ""),
		control("pause", ctlWho, "torture step 3: pause", 4, 4, ""),
		control("release", ctlWho, "torture step 4: release", 4, 12, ""),
		dropped("p#w0", 5, 12, engine.ReleasedReason+"torture step 4: release"),
		dropped("p#w1", 5, 12, engine.ReleasedReason+"torture step 4: release"),
		control("seek", ctlWho, "torture step 5: seek", 12, 15, ""),
		dropped("p#w0", 13, 15, engine.SkippedReason+"torture step 5: seek"),
		control("resume", ctlWho, "torture step 6: resume", 15, 15, ""),
		kill,
	}
	with := func(i int, r row) []row { out := append([]row{}, good...); out[i] = r; return out }
	without := func(i int) []row { return append(append([]row{}, good[:i]...), good[i+1:]...) }
	for _, tc := range []struct {
		name     string
		rows     []row
		lossless bool
		want     int
	}{
		{"the rows of the answers", good, false, 0},
		{"an applied action not recorded", without(2), false, 1},
		{"the window's end of a pause not recorded", without(1), false, 1},
		{"a refused request recorded", append(append([]row{}, good...), control("pause", ctlWho, "torture step 2: bad-token", 15, 15, "")), false, 1},
		{"another operator", with(2, control("pause", "mallory", "torture step 3: pause", 4, 4, "")), false, 1},
		{"other positions", with(3, control("release", ctlWho, "torture step 4: release", 4, 11, "")), false, 1},
		{"another deadline", with(0, control("pause", ctlWho, "torture step 1: pause-until", 2, 2, `,"until":"2026-01-01T06:00:01Z"`)), false, 1},
		{"the window's end of a pause moves the position", with(1, control("resume", console.Operator, "the pause ended (its deadline passed)", 3, 4, "")), false, 1},
		{"a position backwards", with(8, control("resume", ctlWho, "torture step 6: resume", 0, 0, "")), false, 2}, // and not the answer's
		{"a release recorded, the run says lossless", good, true, 1},
		{"a release's drops outside its range", with(4, dropped("p#w0", 4, 12, engine.ReleasedReason+"torture step 4: release")), false, 1},
		{"a seek's drops short of its plan", with(7, dropped("p#w0", 13, 14, engine.SkippedReason+"torture step 5: seek")), false, 1},
		{"a drop no applied action took", with(7, dropped("p#w0", 13, 15, engine.SkippedReason+"torture step 2: bad-token")), false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &outcome{index: 1, store: "run-1.csv", status: &runStatus{Lossless: tc.lossless},
				ctl: &ctlRun{addr: "127.0.0.1:1", results: results, ended: []time.Time{until}, killed: true}}
			o := &oracle{}
			rec := &recording{rows: tc.rows}
			o.checkControlRows(r, "run 1", rec)
			o.checkOperatorLoss(r, "run 1", rec)
			if got := len(o.vs); got != tc.want {
				t.Errorf("violations %v, want %d", o.vs, tc.want)
			}
			for _, v := range o.vs {
				if v.Invariant != InvControl {
					t.Errorf("violation %v, want invariant %d", v, InvControl)
				}
			}
		})
	}
}

// TestControlStepsAreDrawnForTheirResidue: a seed of residue coverControl
// is a runs scenario of a file whose run before the last is sent control
// actions with its window's flags; the last run is sent none.
func TestControlStepsAreDrawnForTheirResidue(t *testing.T) {
	for k := range uint64(20) {
		seed := coverControl + k*coverEvery
		s := generate(seed, Limits{}, Only{})
		if s.Kind != "runs" || s.Source != "file" {
			t.Fatalf("seed %d: kind %s source %s, want a runs scenario of a file", seed, s.Kind, s.Source)
		}
		n := 0
		for i, run := range s.Runs {
			if len(run.Control) == 0 {
				continue
			}
			n++
			if i == len(s.Runs)-1 || !run.Follow || run.Fault.Kind != faultNone || run.End.Kind != endTerm {
				t.Errorf("seed %d run %d: %+v: want a followed run before the last, no fault, ended by SIGTERM", seed, i+1, run)
			}
			sr := &scenarioRun{s: s}
			args, _ := sr.args(i+1, run, false)
			if fmt.Sprint(args[len(args)-4:]) != "[--listen 127.0.0.1:0 --control-token-file tokens]" {
				t.Errorf("seed %d run %d: args %v: want the window and its token file", seed, i+1, args)
			}
		}
		if n != 1 {
			t.Errorf("seed %d: %d runs sent control actions, want 1", seed, n)
		}
	}
}

// TestAMoveBackIsRecordedAsOneAndLosesNothing (invariant 9 and a move
// back, docs/GUARANTEES.md "Seek"): the CONTROL row of a seek back, its
// after below its before, is the answer's and no position moving
// backwards; the run, which lost nothing, may say lossless; the next
// row's before counts on from the seek's before. A resume whose before
// is below the seek's before, or a release's row moving back, still fail.
func TestAMoveBackIsRecordedAsOneAndLosesNothing(t *testing.T) {
	req := func(reason string) console.Request {
		return console.Request{Feed: "input", Group: "main", Reason: reason}
	}
	applied := func(kind ctlKind, action console.Action, rq console.Request, before, after int64) ctlResult {
		return ctlResult{kind: kind, action: action, req: rq, code: http.StatusOK,
			ans: console.Answer{Action: action, Applied: true, Who: ctlWho, Before: before, After: after}}
	}
	back := applied(ctlSeekBack, console.ActionSeek, req("torture step 2: seek-back"), 20, 5)
	back.ans.Plan = &console.Plan{Feed: "input", Group: "main", Before: 20, After: 5, Redelivery: true, Processed: 15, FirstSeq: 6, LastSeq: 20}
	results := []ctlResult{
		applied(ctlPause, console.ActionPause, req("torture step 1: pause"), 20, 20),
		back,
		applied(ctlResume, console.ActionResume, req("torture step 3: resume"), 20, 20),
	}
	control := func(action, reason string, before, after int64) row {
		return row{kind: "CONTROL", source: "input", detail: fmt.Sprintf(`{"group":"main","action":%q,"who":%q,"reason":%q,"before":%d,"after":%d}`,
			action, ctlWho, reason, before, after)}
	}
	good := []row{control("pause", "torture step 1: pause", 20, 20), control("seek", "torture step 2: seek-back", 20, 5),
		control("resume", "torture step 3: resume", 20, 20)}
	for _, tc := range []struct {
		name string
		rows []row
		want int
	}{
		{"the rows of the answers", good, 0},
		{"a resume below the seek's before", []row{good[0], good[1], control("resume", "torture step 3: resume", 5, 5)}, 2}, // and not the answer's
		{"a release moving back", []row{good[0], control("release", "torture step 2: seek-back", 20, 5), good[2]}, 2},       // and not the answer's
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &outcome{index: 1, store: "run-1.csv", status: &runStatus{Lossless: true},
				ctl: &ctlRun{addr: "127.0.0.1:1", results: results}}
			o := &oracle{}
			rec := &recording{rows: tc.rows}
			o.checkControlRows(r, "run 1", rec)
			o.checkOperatorLoss(r, "run 1", rec)
			if got := len(o.vs); got != tc.want {
				t.Errorf("violations %v, want %d", o.vs, tc.want)
			}
		})
	}
}

// TestAMoveBackIsDrawnForSomeControlRuns: about half the control runs
// draw a move back (from a stream of their own): a pause that waits for
// a few items, one or two seeks back, then a resume.
func TestAMoveBackIsDrawnForSomeControlRuns(t *testing.T) {
	n := 0
	for k := range uint64(40) {
		seed := coverControl + k*coverEvery
		for _, run := range generate(seed, Limits{}, Only{}).Runs {
			for i, st := range run.Control {
				if st.Kind != ctlSeekBack || run.Control[i-1].Kind == ctlSeekBack {
					continue
				}
				n++
				rest := run.Control[i+1:]
				if len(rest) > 0 && rest[0].Kind == ctlSeekBack {
					rest = rest[1:]
				}
				if p := run.Control[i-1]; p.Kind != ctlPause || !p.Await || st.Back < 1 || len(rest) == 0 || rest[0].Kind != ctlResume {
					t.Errorf("seed %d: steps %v: want a pause after some items, one or two seeks back, a resume", seed, run.Control)
				}
			}
		}
	}
	if n < 10 || n > 30 {
		t.Errorf("%d of 40 control runs draw a move back, want about half", n)
	}
}

// TestKafkaControlRunsDrawAMoveBack: a third of the Kafka runs scenarios
// (no backlog, no operation on the topic) send a run before the last
// control actions with its window's flags, and each draws a move back: a
// pause that waits for a few items, maybe a seek back to seq 1 (refused
// when another partition has no record at or before it), one or two seeks
// back, then a resume or a kill (the kill after the seek, before any
// resume); over the seeds each of these is drawn, on topics of one
// partition and of several.
func TestKafkaControlRunsDrawAMoveBack(t *testing.T) {
	got := map[string]int{}
	controlled := 0
	const seeds = 300
	for seed := uint64(1); seed <= seeds; seed++ {
		s := generate(seed, Limits{}, Only{Kind: "runs", Source: "kafka"})
		for i, run := range s.Runs {
			if len(run.Control) == 0 {
				continue
			}
			controlled++
			if s.Backlog || i == len(s.Runs)-1 || run.Member || run.Fault.Kind != faultNone {
				t.Errorf("seed %d run %d: %+v: want a run before the last, no backlog, member or fault", seed, i+1, run)
			}
			sr := &scenarioRun{s: s, kafka: &kafkaInput{topic: "t", group: "g"}}
			if args, _ := sr.args(i+1, run, false); fmt.Sprint(args[len(args)-4:]) != "[--listen 127.0.0.1:0 --control-token-file tokens]" {
				t.Errorf("seed %d run %d: args %v: want the window and its token file", seed, i+1, args)
			}
			at := slices.IndexFunc(run.Control, func(st ctlStep) bool { return st.Kind == ctlPause && st.Await })
			if at < 0 {
				t.Errorf("seed %d: steps %v: no pause after some items", seed, run.Control)
				continue
			}
			rest := run.Control[at+1:]
			if rest[0].Back == ctlBackToFirst {
				got["seek back to seq 1"]++
				rest = rest[1:]
			}
			n := 0
			for len(rest) > 0 && rest[0].Kind == ctlSeekBack && rest[0].Back >= 1 && rest[0].Back <= 30 {
				n, rest = n+1, rest[1:]
			}
			switch {
			case n < 1 || n > 2 || len(rest) == 0:
				t.Errorf("seed %d: steps %v: want one or two seeks back, then a resume or a kill", seed, run.Control)
			case rest[0].Kind == ctlKill && len(rest) == 1:
				got["kill after the seek"]++
			case rest[0].Kind == ctlResume:
				got["resume"]++
			default:
				t.Errorf("seed %d: steps %v: after the seeks back %v, want a resume, or a kill last", seed, run.Control, rest)
			}
			if s.Partitions > 1 {
				got["several partitions"]++
			} else {
				got["one partition"]++
			}
		}
	}
	if controlled < seeds/6 || controlled > seeds/2 {
		t.Errorf("%d of %d Kafka runs scenarios send a run control actions, want about a third", controlled, seeds)
	}
	for _, k := range []string{"seek back to seq 1", "kill after the seek", "resume", "several partitions", "one partition"} {
		if got[k] == 0 {
			t.Errorf("no Kafka control run draws %s (%v)", k, got)
		}
	}
}
