package golden

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
	"github.com/blackbox-audit/blackbox/store/csvstore"
)

// The files of a case.
const (
	CaseFile  = "case.json" // the case's settings
	InputFile = "input.txt" // the input lines
	// Recording is the recording of a case run once; a restart case has
	// one recording per run instead: run1.csv, run2.csv.
	Recording = "recording.csv"
	// ReadyDir is the folder in a case folder that holds an update's new
	// recordings while they are moved into place: found by Check, it means
	// an update was killed after some of them were replaced (the case's
	// recordings are not from one update); the next Update finishes it.
	ReadyDir = ".golden-update-ready"
	// tempPrefix starts the temporary folders an update records into,
	// inside the case folder; the next Update removes a stale one.
	tempPrefix = ".golden-update-tmp-"
)

// Sentinel errors, for errors.Is.
var (
	// ErrCase: a case folder whose case.json or input.txt is missing or
	// invalid. The *CaseError names the case.
	ErrCase = errors.New("golden: bad case")
	// ErrRecord: re-recording a case failed (the engine, the recorder or
	// the store refused, or the run did not advance).
	ErrRecord = errors.New("golden: recording failed")
	// ErrBusy: another Update of the folder is running.
	ErrBusy = errors.New("golden: another update of the folder is running")
)

// CaseError is an error of one case: reading its files, or re-recording
// it. errors.Is matches ErrCase or ErrRecord and the cause.
// It is immutable and safe for concurrent use.
type CaseError struct {
	Case string // the case folder's name
	Err  error
}

func (e *CaseError) Error() string { return fmt.Sprintf("golden: case %s: %v", e.Case, e.Err) }

// Unwrap returns the cause.
func (e *CaseError) Unwrap() error { return e.Err }

// Case is one golden case: the settings of its case.json, read by Cases.
// A Case is a plain value.
type Case struct {
	// Name is the case folder's name (not in case.json).
	Name string `json:"-"`
	// Dir is the case folder (not in case.json).
	Dir string `json:"-"`
	// App names the app to run, one of the apps given to Update and Check.
	App string `json:"app"`
	// Processor names the processor in the recording; default App.
	Processor string `json:"processor,omitempty"`
	// Format is the recording's format: "csv" (the only one; default).
	Format string `json:"format,omitempty"`
	// QueueSize is the feed's queue size; default 16.
	QueueSize int `json:"queue_size,omitempty"`
	// Policy is the feed's overload policy, as engine.ParsePolicyKind reads
	// it: "PAUSE" (the file source's default), "DROP_AFTER_SPIN" (spin 0) or
	// "BLOCK_WITH_DEADLINE" (1s), or their short forms.
	Policy string `json:"policy,omitempty"`
	// Journal journals the feed: inputs are INDEXED rows and the items
	// JOURNAL rows; otherwise inputs are INLINE.
	Journal bool `json:"journal,omitempty"`
	// Options configure the app: given to its New (core.App) when the case
	// is recorded and when it is replayed.
	Options map[string]string `json:"options,omitempty"`
	// RestartAfter, if > 0, records two runs: run 1 reads the first
	// RestartAfter lines; run 2 starts from run 1's final state (its
	// snapshot) and reads the whole input from its start, so the first
	// RestartAfter lines are delivered again (a restart after a crash whose
	// source had committed nothing). Recordings run1.csv and run2.csv.
	RestartAfter int `json:"restart_after,omitempty"`
	// Drop makes the run lose lines, deterministically: the processor's
	// first input waits until the source has read the whole input, so the
	// queue holds the next QueueSize lines and the rest are dropped
	// (DROP_AFTER_SPIN with a spin of 0).
	Drop bool `json:"drop,omitempty"`
	// Note is a free comment.
	Note string `json:"note,omitempty"`
}

// processor is the processor's name in the recording.
func (c *Case) processor() string {
	if c.Processor != "" {
		return c.Processor
	}
	return c.App
}

// recordings lists the recordings Update writes for the case.
func (c *Case) recordings() []string {
	if c.RestartAfter > 0 {
		return []string{"run1.csv", "run2.csv"}
	}
	return []string{Recording}
}

// Cases reads every case of dir: each sub-folder holding a case.json, in
// name order. Folders without one are skipped.
func Cases(dir string) ([]*Case, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("golden: %w", err)
	}
	var cs []*Case
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		cdir := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(filepath.Join(cdir, CaseFile))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		cerr := func(err error) error { return &CaseError{Case: e.Name(), Err: err} }
		if err != nil {
			return nil, cerr(err)
		}
		c := &Case{}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(c); err != nil {
			return nil, cerr(fmt.Errorf("%w: %s: %v", ErrCase, CaseFile, err))
		}
		c.Name, c.Dir = e.Name(), cdir
		if err := c.check(); err != nil {
			return nil, cerr(err)
		}
		cs = append(cs, c)
	}
	return cs, nil
}

func (c *Case) check() error {
	switch {
	case c.App == "":
		return fmt.Errorf("%w: %s names no app", ErrCase, CaseFile)
	case c.Format != "" && c.Format != "csv":
		return fmt.Errorf("%w: format %q (only csv)", ErrCase, c.Format)
	case c.QueueSize < 0 || c.RestartAfter < 0:
		return fmt.Errorf("%w: negative queue_size or restart_after", ErrCase)
	case c.Drop && c.RestartAfter > 0:
		return fmt.Errorf("%w: drop and restart_after in one case", ErrCase)
	}
	if c.Policy == "" {
		return nil
	}
	kind, err := engine.ParsePolicyKind(c.Policy)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCase, err)
	}
	if c.Drop && kind != engine.DropAfterSpinKind {
		return fmt.Errorf("%w: drop needs policy DROP_AFTER_SPIN, not %s", ErrCase, c.Policy)
	}
	return nil
}

// app finds the case's app among apps.
func (c *Case) app(apps []core.App) (core.App, error) {
	a, ok := core.FindApp(apps, c.App)
	if !ok {
		return core.App{}, fmt.Errorf("%w %q (known: %s)", replayer.ErrUnknownApp, c.App, core.AppNames(apps))
	}
	return a, nil
}

// Verify replays every recording of every case of dir with apps and
// reports, one line per recording, whether it still reproduces; each
// recording that does not is followed by its replay report. ok is true when
// every recording replays identical, with no integrity problem and no stop
// other than a recorded failure (a FAILED row: the stream is not
// reproducible past it, by design); losses (DROPPED rows) are expected
// and reported. err is for unreadable cases and recordings.
func Verify(dir string, apps ...core.App) (ok bool, report string, err error) {
	cs, err := Cases(dir)
	if err != nil {
		return false, "", err
	}
	var b strings.Builder
	ok = true
	for _, c := range cs {
		res, err := verifyCase(c, apps)
		if err != nil {
			return false, b.String(), err
		}
		for _, r := range res {
			b.WriteString(r.line())
			if !r.ok {
				ok = false
				b.WriteString(r.text)
			}
		}
	}
	if len(cs) == 0 {
		fmt.Fprintf(&b, "%s: no golden case (a folder with a %s)\n", dir, CaseFile)
	}
	return ok, b.String(), nil
}

// Check replays every recording of every golden case of dir (see Verify)
// and fails t, one error per recording that no longer reproduces, with the
// replay's report: the first divergence, its input and the diff. Call it
// from a test; re-record with Update (a -update flag) after a deliberate
// change.
func Check(t testing.TB, dir string, apps ...core.App) {
	t.Helper()
	cs, err := Cases(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) == 0 {
		t.Errorf("golden: %s holds no case", dir)
	}
	for _, c := range cs {
		res, err := verifyCase(c, apps)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		for _, r := range res {
			if !r.ok {
				t.Errorf("golden: case %s, %s no longer reproduces (%s; re-record with -update if the change is deliberate):\n%s",
					c.Name, r.file, r.why, r.text)
			}
		}
	}
}

// result is the verdict on one recording.
type result struct {
	c    *Case
	file string
	ok   bool
	why  string
	text string // the replay report
}

func (r *result) line() string {
	if r.ok {
		return fmt.Sprintf("ok   %s/%s%s\n", r.c.Name, r.file, r.why)
	}
	return fmt.Sprintf("FAIL %s/%s: %s\n", r.c.Name, r.file, r.why)
}

func verifyCase(c *Case, apps []core.App) ([]result, error) {
	if _, err := c.app(apps); err != nil {
		return nil, &CaseError{Case: c.Name, Err: err}
	}
	var res []result
	if _, err := os.Stat(filepath.Join(c.Dir, ReadyDir)); err == nil {
		res = append(res, result{c: c, file: ReadyDir, why: "golden: an interrupted update replaced only some of the case's recordings: run the update again"})
	}
	files := c.recordings()
	for _, f := range files {
		path := filepath.Join(c.Dir, f)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			res = append(res, result{c: c, file: f, why: "golden: no recording: run the update to record it"})
			continue
		}
		r, err := csvstore.Open(path)
		if err != nil {
			return nil, &CaseError{Case: c.Name, Err: err}
		}
		if why := optionsChanged(c, apps, r.Meta()); why != "" {
			r.Close()
			res = append(res, result{c: c, file: f, why: why})
			continue
		}
		rep, err := replayer.Replay(context.Background(), r, apps, replayer.Options{AppOptions: map[string]map[string]string{c.App: c.Options}})
		r.Close()
		if err != nil {
			return nil, &CaseError{Case: c.Name, Err: err}
		}
		res = append(res, judge(c, f, rep))
	}
	return res, nil
}

// optionsChanged says why a recording of c does not hold c's options (those
// a recording holds: core.App.RecordedOptions), "" if it does or holds none
// (a recording of an earlier version).
func optionsChanged(c *Case, apps []core.App, m store.Meta) string {
	app, _ := core.FindApp(apps, c.App)
	want := app.RecordedOptions(c.Options)
	for _, s := range slices.Sorted(maps.Keys(m.AppOptions)) {
		if got := m.AppOptions[s]; !maps.Equal(got, want) {
			return fmt.Sprintf("golden: the case's options are %s, its recording's %s: run the update to record it again", replayer.OptionsText(want), replayer.OptionsText(got))
		}
	}
	return ""
}

// Judge decides whether a replay of a golden recording passes: identical,
// no integrity problem but its recorded failures (store.ProblemFailed: a
// case may fail a line on purpose), and no stop but at a recorded failure.
func judge(c *Case, file string, rep *replayer.Report) result {
	r := result{c: c, file: file, ok: true}
	var notes, why []string
	if !rep.Identical {
		why = append(why, "diverged")
	}
	if ps := damage(rep.Problems); len(ps) > 0 {
		why = append(why, fmt.Sprintf("%d integrity problems", len(ps)))
	}
	for _, p := range rep.Processors {
		switch p.StopKind {
		case "":
		case replayer.StopFailed:
			notes = append(notes, fmt.Sprintf("%s stops at its recorded failure (index %d)", p.Processor, p.StopIndex))
		default:
			if p.StopKind != replayer.StopDivergence {
				why = append(why, fmt.Sprintf("%s stopped: %s", p.Processor, p.Stop))
			}
		}
		var lost int64
		for _, l := range p.Losses {
			lost += l.Count
		}
		if lost > 0 {
			notes = append(notes, fmt.Sprintf("%s lost %d items (recorded)", p.Processor, lost))
		}
	}
	if len(why) > 0 {
		r.ok, r.why = false, strings.Join(why, "; ")
		var b strings.Builder
		_ = rep.WriteText(&b)
		r.text = b.String()
		return r
	}
	if len(notes) > 0 {
		r.why = ": " + strings.Join(notes, "; ")
	}
	return r
}
