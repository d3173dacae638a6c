package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/store"
)

// verifyReport is the JSON of `blackbox verify`.
type verifyReport struct {
	Complete bool            `json:"complete"`
	Problems []store.Problem `json:"problems"`
}

func (c *CLI) verifyCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify STORE",
		Short: "Check a recording's integrity (no app needed)",
		Long: `Check a recording's integrity: torn last lines, orphan rows, gaps, unfinished
streams (no END: the process did not stop cleanly), missing journal rows,
malformed rows; and what its rows prove: seqs a COMMIT row covers (or a
clean end published) with no row in a processor of the feed (missing-input),
and recorded failures (a FAILED row: its stream is not reproducible past it,
so replay stops there). replay, diff and explain call a recording complete
by the same rules. No app is needed. Losses (DROPPED and LOST rows) do not
make a recording incomplete: replay and explain report them.

Exit: 0 complete; 2 not a readable recording; 3 not complete.`,
		Args: exactArgs("STORE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, _, err := openStore(args[0])
			if err != nil {
				return err
			}
			defer r.Close()
			rep := verifyReport{Problems: r.Problems()}
			if rep.Problems == nil {
				rep.Problems = []store.Problem{}
			}
			rep.Complete = len(rep.Problems) == 0
			out := cmd.OutOrStdout()
			if asJSON {
				if err := WriteJSON(out, rep); err != nil {
					return err
				}
			} else {
				for _, p := range rep.Problems {
					fmt.Fprintln(out, problemText(args[0], p))
				}
				if rep.Complete {
					fmt.Fprintf(out, "%s: complete\n", args[0])
				} else {
					fmt.Fprintf(out, "%s: not complete: %s\n", args[0], store.CountKinds(rep.Problems))
				}
			}
			if !rep.Complete {
				return exit(ExitIncomplete, nil)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"complete":bool,"problems":[...]}`)
	return cmd
}

// problemText is one problem on one line, naming the file.
func problemText(path string, p store.Problem) string {
	p.File = path
	return p.Error()
}

// inspectSummary is the JSON of `blackbox inspect`.
type inspectSummary struct {
	Path      string            `json:"path"`
	Format    string            `json:"format"`
	Recording string            `json:"recording"`
	Created   *time.Time        `json:"created"`
	Apps      map[string]string `json:"apps"`
	Options   map[string]string `json:"options"`
	Rows      int64             `json:"rows"`
	Journal   int64             `json:"journal"`
	Commits   int64             `json:"commits"` // COMMIT rows: the positions the source committed
	// Workers are the processors run on several workers: each worker's
	// instance is a stream of its own (core.ParseWorkerStream), listed
	// in Processors too.
	Workers    []workersSummary   `json:"workers,omitempty"`
	Processors []processorSummary `json:"processors"`
	Complete   bool               `json:"complete"`
	Problems   []store.Problem    `json:"problems"`
	Listed     []rowJSON          `json:"listed,omitempty"`

	listed []store.Entry
}

// workersSummary is a processor run on several workers, in `inspect`:
// its workers' streams in worker order.
type workersSummary struct {
	Processor string   `json:"processor"`
	Workers   int      `json:"workers"`
	Streams   []string `json:"streams"`
}

// workersOf groups the worker streams among streams by processor, in the
// order each processor is first met.
func workersOf(streams []string) []workersSummary {
	var out []workersSummary
	at := map[string]int{}
	for _, s := range streams {
		p, _, ok := core.ParseWorkerStream(s)
		if !ok {
			continue
		}
		i, seen := at[p]
		if !seen {
			i = len(out)
			at[p] = i
			out = append(out, workersSummary{Processor: p})
		}
		out[i].Streams = append(out[i].Streams, s)
		out[i].Workers++
	}
	for _, w := range out {
		slices.SortFunc(w.Streams, func(x, y string) int {
			_, wx, _ := core.ParseWorkerStream(x)
			_, wy, _ := core.ParseWorkerStream(y)
			return wx - wy
		})
	}
	return out
}

// text is "ledger: 4 workers (ledger#w0 ... ledger#w3)"; the streams are
// listed whole unless they are workers 0 to n-1, n > 2.
func (w workersSummary) text() string {
	names := strings.Join(w.Streams, " ")
	if _, last, _ := core.ParseWorkerStream(w.Streams[len(w.Streams)-1]); w.Workers > 2 && last == w.Workers-1 {
		names = w.Streams[0] + " ... " + w.Streams[len(w.Streams)-1]
	}
	return fmt.Sprintf("%s: %s (%s)", w.Processor, count(int64(w.Workers), "worker"), names)
}

// processorSummary is one processor's stream in `inspect`.
type processorSummary struct {
	Processor string           `json:"processor"`
	App       string           `json:"app"`
	Rows      map[string]int64 `json:"rows"`
	Inputs    int64            `json:"inputs"`
	Outputs   int64            `json:"outputs"`
	First     *time.Time       `json:"first"`
	Last      *time.Time       `json:"last"`
	Losses    []lossJSON       `json:"losses"`
	Lost      []lostJSON       `json:"lost"` // LOST rows: input the feed's source lost
	Failures  []failureJSON    `json:"failures"`
	Ended     bool             `json:"ended"`
	// Killed: its END says an operator killed the run, and why (store.End).
	Killed string `json:"killed,omitempty"`
}

// lostJSON is a LOST row in `inspect`: its index and what it says.
type lostJSON struct {
	Index int64 `json:"index"`
	store.Lost
}

type lossJSON struct {
	Index       int64  `json:"index"`
	Feed        string `json:"feed"`
	Count       int64  `json:"count"`
	FirstSeq    int64  `json:"firstSeq"`
	LastSeq     int64  `json:"lastSeq"`
	Reason      string `json:"reason"`
	Approximate bool   `json:"approximate"`
}

// newLoss reads a DROPPED row: its detail is the JSON the recorder writes
// ({"first","last","reason","approximate"}); another detail is the reason.
func newLoss(e store.Entry) lossJSON {
	l := lossJSON{Index: e.Index, Feed: e.Source, Count: e.N, FirstSeq: e.Seq, LastSeq: e.Seq + e.N - 1, Reason: e.Detail}
	var d struct {
		First, Last int64
		Reason      string
		Approximate bool
	}
	if json.Unmarshal([]byte(e.Detail), &d) == nil && d.Last >= d.First && d.First > 0 {
		l.FirstSeq, l.LastSeq, l.Reason, l.Approximate = d.First, d.Last, d.Reason, d.Approximate
	}
	return l
}

type failureJSON struct {
	Index  int64  `json:"index"`
	Source string `json:"source"`
	Detail string `json:"detail"`
}

// rowJSON is one row in the JSON of `inspect`.
type rowJSON struct {
	Processor string   `json:"processor"`
	Index     int64    `json:"index"`
	Kind      string   `json:"kind"`
	Source    string   `json:"source,omitempty"`
	Seq       int64    `json:"seq,omitempty"`
	Instant   string   `json:"instant,omitempty"`
	Epoch     int64    `json:"epoch,omitempty"`
	Key       string   `json:"key,omitempty"`
	Offset    int64    `json:"offset,omitempty"`
	N         int64    `json:"n,omitempty"`
	Payload   string   `json:"payload,omitempty"`
	Detail    string   `json:"detail,omitempty"`
	Reads     []string `json:"reads,omitempty"`
}

func toRowJSON(e store.Entry) rowJSON {
	r := rowJSON{Processor: e.Processor, Index: e.Index, Kind: string(e.Kind), Source: e.Source, Seq: e.Seq,
		Epoch: e.Epoch, Key: e.Key, Offset: e.Offset, N: e.N, Payload: string(e.Payload), Detail: e.Detail}
	if !e.Instant.IsZero() {
		r.Instant = store.FormatInstant(e.Instant)
	}
	for _, t := range e.Reads {
		r.Reads = append(r.Reads, store.FormatInstant(t))
	}
	return r
}

// rowText is one row on one line: processor, index, kind and the fields
// the row uses.
func rowText(e store.Entry) string {
	r := toRowJSON(e)
	var b strings.Builder
	who := r.Processor
	if who == "" {
		who = "-"
	}
	fmt.Fprintf(&b, "%s %d %s", who, r.Index, r.Kind)
	add := func(k, v string) { fmt.Fprintf(&b, " %s=%s", k, v) }
	if r.Source != "" {
		add("source", r.Source)
	}
	if r.Seq != 0 {
		add("seq", fmt.Sprint(r.Seq))
	}
	if r.Instant != "" {
		add("instant", r.Instant)
	}
	if r.Epoch != 0 {
		add("epoch", fmt.Sprint(r.Epoch))
	}
	if r.Key != "" {
		add("key", r.Key)
	}
	if r.Offset != 0 {
		add("offset", fmt.Sprint(r.Offset))
	}
	if r.N != 0 {
		add("n", fmt.Sprint(r.N))
	}
	if len(r.Reads) > 0 {
		add("reads", strings.Join(r.Reads, ";"))
	}
	if r.Payload != "" {
		add("payload", r.Payload)
	}
	if r.Detail != "" {
		add("detail", fmt.Sprintf("%q", r.Detail))
	}
	return b.String()
}

func (c *CLI) inspectCmd() *cobra.Command {
	var (
		processor, kind string
		limit           int
		asJSON          bool
	)
	cmd := &cobra.Command{
		Use:   "inspect STORE",
		Short: "Summarise a recording and list its rows",
		Long: `Summarise a recording: its META (format, creation time, apps), the
processors run on several workers with their workers' streams (NAME#wK), per
processor stream the rows of each kind, inputs, outputs, first and last
instants, losses (DROPPED), the source's losses (LOST), failures (FAILED),
whether it ended cleanly; and its problems. With --processor, --kind or
--limit it also lists the rows that match, in storage order (--limit 0: all
of them; --processor NAME of a processor run on workers: the rows of all its
workers' streams).

Exit: 0 when the recording could be read (even if it is not complete: use
verify for that verdict); 2 a usage or I/O error.`,
		Args: exactArgs("STORE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return usagef("--limit must not be negative, got %d", limit)
			}
			k := store.Kind(strings.ToUpper(kind))
			if kind != "" && !k.Valid() {
				var names []string
				for _, v := range store.Kinds {
					names = append(names, string(v))
				}
				return usagef("unknown --kind %q (want one of %s)", kind, strings.Join(names, ", "))
			}
			r, format, err := openStore(args[0])
			if err != nil {
				return err
			}
			defer r.Close()
			list := processor != "" || kind != "" || cmd.Flags().Changed("limit")
			if processor != "" && !slices.ContainsFunc(r.Processors(), func(s string) bool { return ofProcessor(s, processor) }) {
				return usagef("%s has no processor %q (it has: %s)", args[0], processor, strings.Join(r.Processors(), ", "))
			}
			sum, err := summarise(args[0], format, r, list, processor, k, limit)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return WriteJSON(out, sum)
			}
			printSummary(out, sum, list)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&processor, "processor", "", "list the rows of this processor stream (a processor run on workers: of all its workers' streams)")
	f.StringVar(&kind, "kind", "", "list the rows of this kind (META, START, DELIVERY, INDEXED, INLINE, TIMER, OUTPUT, DROPPED, FAILED, END, JOURNAL, COMMIT, LOST)")
	f.IntVar(&limit, "limit", 0, "list at most this many rows (0: no limit)")
	f.BoolVar(&asJSON, "json", false, "print the summary (and the listed rows) as JSON")
	return cmd
}

// ofProcessor reports whether stream is processor's own or one of its
// workers'.
func ofProcessor(stream, processor string) bool {
	p, _, ok := core.ParseWorkerStream(stream)
	return stream == processor || ok && p == processor
}

// summarise reads every row once (streaming), counting, and keeps the rows
// to list.
func summarise(path, format string, r store.Reader, list bool, processor string, kind store.Kind, limit int) (*inspectSummary, error) {
	meta := r.Meta()
	sum := &inspectSummary{Path: path, Format: format, Recording: meta.Format, Apps: meta.Apps, Options: meta.Options,
		Problems: r.Problems()}
	if !meta.Created.IsZero() {
		t := meta.Created
		sum.Created = &t
	}
	if sum.Apps == nil {
		sum.Apps = map[string]string{}
	}
	if sum.Options == nil {
		sum.Options = map[string]string{}
	}
	if sum.Problems == nil {
		sum.Problems = []store.Problem{}
	}
	sum.Complete = len(sum.Problems) == 0
	sum.Workers = workersOf(r.Processors())
	procs := map[string]*processorSummary{}
	for _, name := range r.Processors() {
		ps := &processorSummary{Processor: name, App: meta.Apps[name], Rows: map[string]int64{},
			Losses: []lossJSON{}, Lost: []lostJSON{}, Failures: []failureJSON{}}
		procs[name] = ps
		sum.Processors = append(sum.Processors, *ps)
	}
	if sum.Processors == nil {
		sum.Processors = []processorSummary{}
	}
	for e, err := range r.Rows() {
		if err != nil {
			continue // unreadable rows are among the Problems
		}
		sum.Rows++
		if list && (processor == "" || ofProcessor(e.Processor, processor)) && (kind == "" || e.Kind == kind) &&
			(limit == 0 || len(sum.Listed) < limit) {
			sum.Listed = append(sum.Listed, toRowJSON(e))
			e.Payload, e.Reads = bytes.Clone(e.Payload), slices.Clone(e.Reads)
			sum.listed = append(sum.listed, e)
		}
		switch e.Kind {
		case store.KindJournal:
			sum.Journal++
		case store.KindCommit:
			sum.Commits++
		}
		ps := procs[e.Processor]
		if ps == nil {
			continue
		}
		ps.Rows[string(e.Kind)]++
		switch {
		case e.Kind.IsInput():
			ps.Inputs++
		case e.Kind == store.KindOutput:
			ps.Outputs++
		case e.Kind == store.KindDropped:
			ps.Losses = append(ps.Losses, newLoss(e))
		case e.Kind == store.KindLost:
			ps.Lost = append(ps.Lost, lostJSON{Index: e.Index, Lost: store.LostOf(e)})
		case e.Kind == store.KindFailed:
			ps.Failures = append(ps.Failures, failureJSON{Index: e.Index, Source: e.Source, Detail: e.Detail})
		case e.Kind == store.KindEnd:
			ps.Ended = true
			if end, err := store.EndOf(e); err == nil { // else Problems lists it
				ps.Killed = end.Killed
			}
		}
		if !e.Instant.IsZero() {
			t := e.Instant
			if ps.First == nil || t.Before(*ps.First) {
				ps.First = &t
			}
			if ps.Last == nil || t.After(*ps.Last) {
				ps.Last = &t
			}
		}
	}
	for i := range sum.Processors {
		sum.Processors[i] = *procs[sum.Processors[i].Processor]
	}
	if list && sum.Listed == nil {
		sum.Listed = []rowJSON{}
	}
	return sum, nil
}

func instant(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return store.FormatInstant(*t)
}

func printSummary(w io.Writer, s *inspectSummary, list bool) {
	fmt.Fprintf(w, "%s: %s recording (%s), created %s\n", s.Path, s.Format, s.Recording, instant(s.Created))
	fmt.Fprintf(w, "rows: %d (journal %d, commits %d)\n", s.Rows, s.Journal, s.Commits)
	for _, ws := range s.Workers {
		fmt.Fprintln(w, ws.text())
	}
	for _, p := range s.Processors {
		app := p.App
		if app == "" {
			app = "?"
		}
		ended := "ended cleanly"
		switch {
		case !p.Ended:
			ended = "no END (unfinished)"
		case p.Killed != "":
			ended = fmt.Sprintf("ended by a kill (%q)", p.Killed)
		}
		fmt.Fprintf(w, "processor %s (app %s): %s, %s, %s\n", p.Processor, app, count(p.Inputs, "input"),
			count(p.Outputs, "output"), ended)
		var kinds []string
		for _, k := range store.Kinds {
			if n := p.Rows[string(k)]; n > 0 {
				kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
			}
		}
		fmt.Fprintf(w, "  rows:     %s\n", strings.Join(kinds, ", "))
		fmt.Fprintf(w, "  instants: %s .. %s\n", instant(p.First), instant(p.Last))
		var lost int64
		for _, l := range p.Losses {
			lost += l.Count
		}
		fmt.Fprintf(w, "  losses:   %s in %s\n", count(lost, "item"), count(int64(len(p.Losses)), "DROPPED row"))
		for _, l := range p.Losses {
			exact := "exact"
			if l.Approximate {
				exact = "approximate"
			}
			fmt.Fprintf(w, "    index %d: %s of feed %s, seq %d..%d, %s (%s)\n", l.Index, count(l.Count, "item"), l.Feed,
				l.FirstSeq, l.LastSeq, l.Reason, exact)
		}
		if len(p.Lost) > 0 {
			fmt.Fprintf(w, "  lost:     %s (the source's losses)\n", count(int64(len(p.Lost)), "LOST row"))
			for _, l := range p.Lost {
				fmt.Fprintf(w, "    index %d: %s\n", l.Index, l.Lost)
			}
		}
		fmt.Fprintf(w, "  failures: %d\n", len(p.Failures))
		for _, f := range p.Failures {
			fmt.Fprintf(w, "    index %d: %s: %s\n", f.Index, f.Source, f.Detail)
		}
	}
	if s.Complete {
		fmt.Fprintln(w, "problems: none")
	} else {
		fmt.Fprintf(w, "problems: %s\n", store.CountKinds(s.Problems))
		for _, p := range s.Problems {
			fmt.Fprintf(w, "  %s\n", problemText(s.Path, p))
		}
	}
	if list {
		fmt.Fprintf(w, "listed rows: %d\n", len(s.Listed))
		for _, e := range s.listed {
			fmt.Fprintf(w, "  %s\n", rowText(e))
		}
	}
}
