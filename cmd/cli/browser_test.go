package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/incident"
)

// browser returns the path of a Chromium-based browser (Debian's chromium
// package, for one). With none, the test is skipped, unless it runs in CI
// (CI=true), where it fails: CI installs Chromium (.ci/run).
func browser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium, chromium-browser or google-chrome on PATH: CI must install one (.ci/run)")
	}
	t.Skip("no chromium, chromium-browser or google-chrome on PATH: install Debian's chromium package to run the browser test")
	return ""
}

// page is a headless browser tab. Every console message, uncaught
// exception and browser log entry the page causes is kept in messages.
type page struct {
	ctx context.Context
	mu  sync.Mutex
	log []string
}

func openBrowser(t *testing.T, exe string) *page {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("hide-scrollbars", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	p := &page{}
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(p.listen))
	t.Cleanup(cancel)
	p.ctx = ctx
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	return p
}

// listen keeps the page's console calls, exceptions and log entries. It
// runs on the tab's reading goroutine.
func (p *page) listen(ev any) {
	var m string
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		var args []string
		for _, a := range ev.Args {
			args = append(args, string(a.Value)+a.Description)
		}
		m = fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " "))
	case *runtime.EventExceptionThrown:
		m = "exception: " + (&chromedp.ExceptionError{ExceptionDetails: ev.ExceptionDetails}).Error()
	case *log.EventEntryAdded:
		if ev.Entry.Level != log.EntryLevelError && ev.Entry.Level != log.EntryLevelWarning {
			return
		}
		m = fmt.Sprintf("log %s (%s): %s %s", ev.Entry.Level, ev.Entry.Source, ev.Entry.Text, ev.Entry.URL)
	default:
		return
	}
	p.mu.Lock()
	p.log = append(p.log, m)
	p.mu.Unlock()
}

// messages returns what the page logged so far. Every event the browser
// sent before the answer to the last action has been seen.
func (p *page) messages() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

// overflowJS lists the elements whose right edge passes the viewport's
// width, and the document when it scrolls sideways.
const overflowJS = `(() => {
	const w = window.innerWidth, bad = [];
	const doc = document.documentElement;
	if (doc.scrollWidth > w) bad.push("document scrollWidth " + doc.scrollWidth + " > " + w);
	for (const el of document.querySelectorAll("body *")) {
		const r = el.getBoundingClientRect();
		if (r.right > w + 0.5) bad.push(el.tagName.toLowerCase() + (el.className && el.className.baseVal === undefined ? "." + el.className : "") + " right " + r.right);
	}
	return JSON.stringify(bad);
})()`

// show loads the file at path at width pixels wide and returns a full-page
// PNG screenshot and the elements overflowing the page.
func (p *page) show(t *testing.T, path string, width int64) (png []byte, overflow []string) {
	t.Helper()
	u := url.URL{Scheme: "file", Path: path}
	if err := chromedp.Do(p.ctx, chromedp.EmulateViewport(width, 900), chromedp.Navigate(u.String())); err != nil {
		t.Fatal(err)
	}
	js, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](overflowJS))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(js), &overflow); err != nil {
		t.Fatal(err)
	}
	png, err = chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	return png, overflow
}

// answersView is what the test compares of the six answers: as the page
// shows them (data-* attributes) and as explain --json gives them.
type answersView struct {
	Lost     bool       `json:"lost"`
	Complete bool       `json:"complete"`
	Pairs    []pairView `json:"pairs"`
	// RecordingLosses counts the losses of no one feed.
	RecordingLosses int `json:"recordingLosses"`
	// Kinds counts each run's rows per kind.
	Kinds []map[string]int64 `json:"kinds"`
}

type pairView struct {
	Feed         string     `json:"feed"`
	Processor    string     `json:"processor"`
	Last         []lastView `json:"last"`
	InFlight     []flight   `json:"inFlight"`
	Lag          []lagView  `json:"lag"`
	Redelivered  int        `json:"redelivered"`
	Skipped      int        `json:"skipped"`
	Again        int        `json:"again"`
	Undetermined int        `json:"undetermined"`
	Lost         int        `json:"lost"`
	LostItems    int64      `json:"lostItems"`
	Duplicates   int        `json:"duplicates"`
	Same         int        `json:"same"`
}

type lastView struct {
	Run    int   `json:"run"`
	Seq    int64 `json:"seq"`
	Offset int64 `json:"offset"`
}

type flight struct {
	Run   int  `json:"run"`
	Known bool `json:"known"`
	Count int  `json:"count"`
	// The maybe in flight input: the next run's first past the crash.
	MaybeRun int   `json:"maybeRun"`
	MaybeSeq int64 `json:"maybeSeq"`
}

type lagView struct {
	Run   int   `json:"run"`
	Known bool  `json:"known"`
	Items int64 `json:"items"`
	Bytes int64 `json:"bytes"`
}

// answersJS reads the answersView of the page.
const answersJS = `(() => {
	const all = (el, sel) => [...el.querySelectorAll(sel)];
	const num = v => v === undefined ? 0 : Number(v);
	const verdict = k => document.querySelector('[data-verdict="' + k + '"]').dataset.value === "true";
	return JSON.stringify({
		lost: verdict("lost"),
		complete: verdict("complete"),
		pairs: all(document, "article.pair").map(a => {
			const card = k => a.querySelector('[data-answer="' + k + '"]').dataset;
			const r = card("redelivered"), l = card("lost"), d = card("duplicates");
			return {
				feed: a.dataset.feed, processor: a.dataset.processor,
				last: all(a, '[data-answer="last-processed"] li').map(li => ({run: num(li.dataset.run), seq: num(li.dataset.seq), offset: num(li.dataset.offset)})),
				inFlight: all(a, '[data-answer="in-flight"] li').map(li => ({run: num(li.dataset.run), known: li.dataset.known === "true", count: num(li.dataset.count),
					maybeRun: num(li.dataset.maybeRun), maybeSeq: num(li.dataset.maybeSeq)})),
				lag: all(a, '[data-answer="commit-lag"] li').map(li => ({run: num(li.dataset.run), known: li.dataset.known !== "false", items: num(li.dataset.items), bytes: num(li.dataset.bytes)})),
				redelivered: num(r.count), skipped: num(r.skipped), again: num(r.appliedAgain), undetermined: num(r.undetermined),
				lost: num(l.count), lostItems: num(l.items),
				duplicates: num(d.count), same: num(d.same),
			};
		}),
		recordingLosses: num(document.getElementById("recording-losses").dataset.count),
		kinds: all(document, "p.kinds").map(p => Object.fromEntries(all(p, "[data-kind]").map(s => [s.dataset.kind, num(s.dataset.n)]))),
	});
})()`

// viewOf is the answersView of explain's findings.
func viewOf(f *incident.Findings) answersView {
	v := answersView{Lost: f.Lost, Complete: f.Complete, RecordingLosses: len(f.Losses), Pairs: []pairView{}, Kinds: []map[string]int64{}}
	for _, a := range f.Answers {
		p := pairView{Feed: a.Feed, Processor: a.Processor, Last: []lastView{}, InFlight: []flight{}, Lag: []lagView{},
			Redelivered: len(a.Redelivered), Lost: len(a.Lost), Duplicates: len(a.Duplicates)}
		for _, c := range a.Crashes {
			last := lastView{Run: c.Run}
			if in := c.LastProcessed; in != nil {
				last.Seq = in.Seq
				if in.Position != nil {
					last.Offset = in.Position.Offset
				}
			}
			p.Last = append(p.Last, last)
			fl := flight{Run: c.Run, Known: c.InFlightKnown}
			if c.InFlightKnown {
				fl.Count = len(c.InFlight)
			}
			if m := c.MaybeInFlight; m != nil {
				fl.MaybeRun, fl.MaybeSeq = m.Run, m.Seq
			}
			p.InFlight = append(p.InFlight, fl)
			lag := lagView{Run: c.Run}
			if c.Lag != nil {
				lag = lagView{Run: c.Run, Known: true, Items: c.Lag.Items, Bytes: c.Lag.Bytes}
			}
			p.Lag = append(p.Lag, lag)
		}
		for _, r := range a.Redelivered {
			switch r.Outcome {
			case incident.OutcomeSkipped:
				p.Skipped++
			case incident.OutcomeAppliedAgain:
				p.Again++
			default:
				p.Undetermined++
			}
		}
		for _, l := range a.Lost {
			p.LostItems += l.Count
		}
		for _, d := range a.Duplicates {
			if d.Same {
				p.Same++
			}
		}
		v.Pairs = append(v.Pairs, p)
	}
	for _, r := range f.Runs {
		k := map[string]int64{}
		for kind, n := range r.Counts {
			if n > 0 {
				k[kind] = n
			}
		}
		v.Kinds = append(v.Kinds, k)
	}
	return v
}

// crashMarksJS lists the crash marks of every timeline: its processor
// stream and the run that crashed.
const crashMarksJS = `JSON.stringify([...document.querySelectorAll('svg [data-mark="crash"]')].map(m => m.closest("article.timeline").dataset.processor + " run " + m.dataset.run))`

// TestTheReportShowsExplainsAnswersAndFitsALaptopAndAPhone kills a recorded
// ledger run three times (crashtest), writes the report of the four runs,
// and opens it in headless Chromium: the page logs no error, its six
// answers and row counts are explain --json's, its timeline has one crash
// mark per kill, and at 1280 and 390 pixels wide no element passes the
// page's right edge. With -update, the 1280-pixel screenshot is written to
// docs/report.png.
func TestTheReportShowsExplainsAnswersAndFitsALaptopAndAPhone(t *testing.T) {
	exe := browser(t)
	dir := t.TempDir()
	const kills = 3
	out, code, _ := blackbox(t, dir, nil, "crashtest", "--lines", "2000", "--kills", fmt.Sprint(kills), "--dir", dir, "--format", "csv", "--json")
	if code != 0 {
		t.Fatalf("crashtest exited %d:\n%s", code, out)
	}
	var runs []string // named as a user in dir names them
	for i := 1; i <= kills+1; i++ {
		runs = append(runs, fmt.Sprintf("run-%d.csv", i))
	}
	list := strings.Join(runs, ",")
	out, code, _ = blackbox(t, dir, nil, "explain", list, "--json")
	var f incident.Findings
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		t.Fatalf("explain --json exited %d: %v\n%s", code, err, out)
	}
	if out, code, _ := blackbox(t, dir, nil, "report", list, "-o", "report.html"); code != 0 {
		t.Fatalf("report exited %d (explain found lost %v, complete %v):\n%s", code, f.Lost, f.Complete, out)
	}

	html := filepath.Join(dir, "report.html")
	p := openBrowser(t, exe)
	for _, width := range []int64{1280, 390} {
		png, overflow := p.show(t, html, width)
		for _, o := range overflow {
			t.Errorf("at %d pixels wide, an element overflows the page: %s", width, o)
		}
		if width == 1280 && *update {
			if err := os.WriteFile("../../docs/report.png", png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if width == 1280 {
			js, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](answersJS))
			if err != nil {
				t.Fatal(err)
			}
			var got answersView
			if err := json.Unmarshal([]byte(js), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(viewOf(&f), got); diff != "" {
				t.Errorf("the page's answers differ from explain --json's (-explain +page):\n%s", diff)
			}
			js, err = chromedp.Run(p.ctx, chromedp.Evaluate[string](crashMarksJS))
			if err != nil {
				t.Fatal(err)
			}
			var marks []string
			if err := json.Unmarshal([]byte(js), &marks); err != nil {
				t.Fatal(err)
			}
			var want []string
			for i := 1; i <= kills; i++ {
				want = append(want, fmt.Sprintf("ledger run %d", i))
			}
			if diff := cmp.Diff(want, marks); diff != "" {
				t.Errorf("crash marks (-one per kill +page):\n%s", diff)
			}
		}
	}
	for _, m := range p.messages() {
		t.Errorf("the page logged: %s", m)
	}
}
