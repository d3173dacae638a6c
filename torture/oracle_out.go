package torture

// The oracle's check of what the runs delivered to their --out files
// (invariant 8): every line an output some run recorded whole, every
// output recorded whole there exactly once.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// InvDelivered: every output delivered to an --out file is an OUTPUT row
// of a recording of the runs that deliver to it (of an item recorded
// whole: its input or timer and all its OUTPUT rows), and delivered there
// exactly once per source position; out.jsonl, which every run's outbox
// recovers, holds every output the runs recorded whole. Across the
// --out files of a Kafka group's members an output may be delivered by
// each (at-least-once: docs/TORTURE.md).
const InvDelivered = 8

// recordedOutput is one output of an item a recording holds whole, as the
// oracle's reader sees it. A plain value.
type recordedOutput struct {
	payload string
	free    bool // a timer's, or an input's without a DELIVERY: no source position
	feed    string
	epoch   int64
	key     string
	offset  int64
	k       int64 // its place among its item's outputs, from 1
	stream  string
	row     int64  // its OUTPUT row's index in its stream
	store   string // the recording's file
	// recording names the recording as a free output's envelope key
	// does: META's created instant (RFC 3339, UTC).
	recording string
}

// pos is the output's source position (feed, epoch, key, offset, k), ""
// for a free one.
func (r recordedOutput) pos() string {
	if r.free {
		return ""
	}
	return fmt.Sprintf("%s/%d/%s/%d#%d", r.feed, r.epoch, r.key, r.offset, r.k)
}

// wholeOutputs lists the outputs of the items rec holds whole, in storage
// order: an input (after its DELIVERY, which gives its position) or a
// timer, followed in its stream by as many OUTPUT rows as its n says. An
// item a kill cut (fewer OUTPUT rows) has no output an outbox may deliver.
func (rec *recording) wholeOutputs(store string) []recordedOutput {
	type item struct {
		n    int64
		outs []recordedOutput
		at   recordedOutput // the position its outputs share
	}
	type cursor struct {
		d  *row
		it *item
	}
	var out []recordedOutput
	cur := map[string]*cursor{}
	for i := range rec.rows {
		r := &rec.rows[i]
		if r.processor == "" {
			continue
		}
		c := cur[r.processor]
		if c == nil {
			c = &cursor{}
			cur[r.processor] = c
		}
		switch r.kind {
		case "DELIVERY":
			c.d, c.it = r, nil
		case "INLINE", "INDEXED", "TIMER":
			it := &item{n: r.n, at: recordedOutput{free: true, stream: r.processor, store: store, recording: recordingName(rec.created)}}
			if d := c.d; r.kind != "TIMER" && d != nil && d.source == r.source && d.seq == r.seq {
				it.at.free, it.at.feed, it.at.epoch, it.at.key, it.at.offset = false, r.source, d.epoch, d.key, d.offset
			}
			c.d, c.it = nil, nil
			if r.n > 0 {
				c.it = it
			}
		case "OUTPUT":
			it := c.it
			if it == nil || int64(len(it.outs)) >= it.n {
				c.it = nil
				continue
			}
			o := it.at
			o.payload, o.k, o.row = string(r.payload), r.seq, r.index
			it.outs = append(it.outs, o)
			if int64(len(it.outs)) == it.n {
				out = append(out, it.outs...)
				c.it = nil
			}
		default:
			c.d, c.it = nil, nil
		}
	}
	return out
}

// outLine is one line of an --out file: the output and, in the envelope
// format, its key.
type outLine struct {
	n       int // 1-based
	payload string
	key     *envelopeKey
}

// envelopeKey is the key of an envelope line (core.EffectKey).
type envelopeKey struct {
	Feed     string `json:"feed"`
	Epoch    int64  `json:"epoch"`
	Position struct {
		Key    string `json:"key"`
		Offset int64  `json:"offset"`
	} `json:"position"`
	Index int64 `json:"index"`
	// A free output's (a timer's): its recording (META's created
	// instant), stream and OUTPUT row.
	Recording string `json:"recording"`
	Stream    string `json:"stream"`
	Row       int64  `json:"row"`
}

// free is the key of a free output as byKey holds it (payload aside).
func (k *envelopeKey) free() string {
	return freeKey(k.Recording, k.Stream, k.Row)
}

func freeKey(recording, stream string, row int64) string {
	return recording + "|" + stream + "|" + strconv.FormatInt(row, 10)
}

// recordingName is how an envelope key names a recording: META's created
// instant, RFC 3339 in UTC ("" when it has none).
func recordingName(created time.Time) string {
	if created.IsZero() {
		return ""
	}
	return created.UTC().Format(time.RFC3339Nano)
}

// pos is the key's source position as recordedOutput.pos writes it, ""
// for a free output's key (stream and row).
func (k *envelopeKey) pos() string {
	if k.Feed == "" {
		return ""
	}
	return fmt.Sprintf("%s/%d/%s/%d#%d", k.Feed, k.Epoch, k.Position.Key, k.Position.Offset, k.Index)
}

// envelope is an envelope line.
type envelope struct {
	Key    *envelopeKey    `json:"key"`
	Output json.RawMessage `json:"output"`
}

// unwrapLine is the output of an --out line: the line itself (format
// value), or its "output" (format envelope) and its key; ok false when
// the line is not what its format says.
func unwrapLine(b []byte, format string) (payload []byte, key *envelopeKey, ok bool) {
	if format != "envelope" {
		return b, nil, json.Valid(b)
	}
	var e envelope
	if json.Unmarshal(b, &e) != nil || e.Key == nil || len(e.Output) == 0 {
		return nil, nil, false
	}
	return e.Output, e.Key, true
}

// readOut reads an --out file's lines in the scenario's format. torn is
// the bytes after the last line break; bad lists the lines that are not
// of the format.
func readOut(path, format string) (lines []outLine, torn []byte, bad []string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil, err
	}
	if i := bytes.LastIndexByte(b, '\n'); i < len(b)-1 {
		torn, b = b[i+1:], b[:i+1]
	}
	for i, l := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		if len(b) == 0 {
			break
		}
		p, k, ok := unwrapLine(l, format)
		if !ok {
			bad = append(bad, fmt.Sprintf("line %d %.80q", i+1, l))
			continue
		}
		lines = append(lines, outLine{n: i + 1, payload: string(p), key: k})
	}
	return lines, torn, bad, nil
}

// outSet is one --out file and the recordings of the runs that deliver to
// it.
type outSet struct {
	file string
	runs []*outcome
	// recovered: the file's outbox is opened again by a later run, which
	// finishes a batch a crash cut and delivers what the runs recorded
	// whole and did not deliver (out.jsonl); a second member's file is
	// its one run's.
	recovered bool
}

// outSets are the scenario's --out files: out.jsonl, which every run
// delivers to, and each second member's own.
func (o *oracle) outSets() []outSet {
	main := outSet{file: outFile, recovered: true}
	var sets []outSet
	for _, r := range o.sr.runs {
		if !r.refused && o.recs[r.store] != nil {
			main.runs = append(main.runs, r)
		}
		if m := r.member; m != nil {
			set := outSet{file: fmt.Sprintf("out-m2-%d.jsonl", r.index)}
			if o.recs[m.store] != nil {
				set.runs = append(set.runs, m)
			}
			sets = append(sets, set)
		}
	}
	return append([]outSet{main}, sets...)
}

// checkOut checks every --out file of the scenario (invariant 8).
func (o *oracle) checkOut() {
	for _, set := range o.outSets() {
		o.checkOutFile(set)
	}
}

// outputKey is what identifies an output in an --out file: the line's
// identity (outputID), or for an output that identifies no line (a
// timer's) its bytes.
func (o *oracle) outputKey(payload string) string {
	if id := outputID(o.sr.s.App, []byte(payload)); id != "" {
		return id
	}
	return "=" + payload
}

// checkOutFile checks one --out file against the outputs its runs
// recorded whole: each line is one of them (with its key, in the envelope
// format); none is there more often than the positions that recorded it
// (exactly once per source position); and, for out.jsonl, every one is
// there (the last run's outbox recovered what the others left), but for
// those the last run reports pending.
func (o *oracle) checkOutFile(set outSet) {
	path := filepath.Join(o.sr.dir, set.file)
	format := o.sr.s.outFormat()
	lines, torn, bad, err := readOut(path, format)
	if os.IsNotExist(err) {
		if set.recovered && o.anyRecordedOutput(set) {
			o.fail(InvDelivered, "%s does not exist, but the runs recorded outputs", set.file)
		}
		return
	}
	if err != nil {
		o.fail(InvDelivered, "reading %s: %v", set.file, err)
		return
	}
	if len(torn) > 0 && set.recovered {
		// A batch's write a crash cut is finished by the next run's
		// outbox; the last run ended by itself.
		o.fail(InvDelivered, "%s ends in a torn line %.80q (a batch no later run finished)", set.file, torn)
	}
	if len(bad) > 0 {
		o.fail(InvDelivered, "%s: %d lines are not %s lines: %s", set.file, len(bad), format, strings.Join(head(bad, 3), "; "))
	}
	// What the runs recorded whole: by output, the positions that hold it
	// (a free output counts once per recording row).
	recorded := map[string]map[string]recordedOutput{} // outputKey -> where -> one
	byPayload := map[string]bool{}
	byKey := map[string]bool{} // payload|pos, payload|stream|row
	// A run moved back by its operator (a recorded move back) read lines
	// again in the run, and their outputs are emitted again: each row of
	// a position it recorded more than once counts (again: the rows past
	// the first, by output and by envelope key).
	again, againKey := map[string]int{}, map[string]int{}
	for _, r := range set.runs {
		rows := map[string]int{} // the run's rows of each output at each position
		moved := o.recs[r.store].movedBack()
		for _, ro := range o.recs[r.store].wholeOutputs(r.store) {
			k := o.outputKey(ro.payload)
			where := ro.pos()
			if moved && !ro.free {
				if rows[k+"|"+where]++; rows[k+"|"+where] > 1 {
					again[k]++
					againKey[where]++
				}
			}
			if ro.free {
				where = fmt.Sprintf("%s:%s@%d", ro.store, ro.stream, ro.row)
				// A key may name the recording or not (the outbox named
				// none at first).
				byKey[ro.payload+"|"+freeKey(ro.recording, ro.stream, ro.row)] = true
				byKey[ro.payload+"|"+freeKey("", ro.stream, ro.row)] = true
			} else {
				byKey[ro.payload+"|"+where] = true
			}
			if recorded[k] == nil {
				recorded[k] = map[string]recordedOutput{}
			}
			recorded[k][where] = ro
			byPayload[ro.payload] = true
		}
	}
	var unrecorded, keyTwice []string
	delivered := map[string][]int{} // outputKey -> its line numbers
	keys := map[string]int{}        // envelope: a key (positioned, or free naming its recording) -> its first line
	seen := map[string]int{}        // envelope: a key -> how many lines had it
	for _, l := range lines {
		k := o.outputKey(l.payload)
		delivered[k] = append(delivered[k], l.n)
		switch {
		case !byPayload[l.payload]:
			unrecorded = append(unrecorded, fmt.Sprintf("line %d %.80q", l.n, l.payload))
			continue
		case l.key == nil:
		case l.key.pos() == "" && !byKey[l.payload+"|"+l.key.free()],
			l.key.pos() != "" && !byKey[l.payload+"|"+l.key.pos()]:
			unrecorded = append(unrecorded, fmt.Sprintf("line %d %.80q: its key %s (recording %q, stream %q, row %d) names no recorded output of it",
				l.n, l.payload, orDefault(l.key.pos(), "(free)"), l.key.Recording, l.key.Stream, l.key.Row))
		default:
			k := l.key.pos()
			if k == "" && l.key.Recording != "" {
				k = "free " + l.key.free()
			}
			if k == "" {
				break // a free key naming no recording: rows repeat across recordings
			}
			if first, ok := keys[k]; ok && seen[k] > againKey[k] {
				keyTwice = append(keyTwice, fmt.Sprintf("lines %d and %d: key %s", first, l.n, k))
			} else if !ok {
				keys[k] = l.n
			}
			seen[k]++
		}
	}
	// How many times each output may be there: an output identified with
	// a line once (it has one source position: no operation of the
	// harness resets a position space so that a line is read again at
	// another); one without an identity (a timer's) at most once per
	// recording row that holds it (least: how many times it must be).
	want := func(k string) int {
		if !strings.HasPrefix(k, "=") {
			return min(len(recorded[k]), 1) + again[k]
		}
		return len(recorded[k]) + again[k]
	}
	// A timer's output is owed once per firing the outbox did not
	// suppress: a timer fired again after an input read again gives way to
	// the earlier run's firing after that input, whatever it emits now
	// (another total, the state having moved), and the harness cannot
	// tell which input a firing followed. So a timer's output is held to
	// at most once per recording row, and not owed.
	least := func(k string) int {
		if strings.HasPrefix(k, "=") {
			return 0
		}
		return min(want(k), 1)
	}
	type dup struct {
		first int
		what  string
	}
	var twice []dup
	for k, ns := range delivered {
		if w := want(k); len(ns) > max(w, 1) {
			twice = append(twice, dup{ns[0], fmt.Sprintf("%s %d times (lines %s), recorded at %d positions %v", k, len(ns),
				strings.Join(head(intStrings(ns), 4), ", "), len(recorded[k]), head(slices.Sorted(maps.Keys(recorded[k])), 3))})
		}
	}
	slices.SortFunc(twice, func(a, b dup) int { return a.first - b.first })
	if len(unrecorded) > 0 {
		o.fail(InvDelivered, "%s: %d lines are no output a run recorded whole: %s", set.file, len(unrecorded), strings.Join(head(unrecorded, 5), "; "))
	}
	if len(twice) > 0 {
		var ws []string
		for _, d := range head(twice, 5) {
			ws = append(ws, d.what)
		}
		o.fail(InvDelivered, "%s: %d outputs delivered more than once: %s", set.file, len(twice), strings.Join(ws, "; "))
	}
	if len(keyTwice) > 0 {
		o.fail(InvDelivered, "%s: %d envelope keys delivered more than once: %s", set.file, len(keyTwice), strings.Join(head(keyTwice, 5), "; "))
	}
	if !set.recovered {
		return
	}
	// out.jsonl: every output recorded whole is there, but those the last
	// run left pending (recorded, not committed when it stopped).
	var last []*outcome
	pending := 0
	if n := len(set.runs); n > 0 {
		last = set.runs[n-1:]
		pending = pendingOf(last[0].output)
	}
	// A run whose recording broke (a write that failed, "the recording is
	// broken") leaves none of the failed write's rows in its file when the
	// store takes them back (csvstore truncates a failed Append; SQLite
	// rolls back), but may leave them when that fails too: rows the
	// recorder never counted written, whose items were never dispatched
	// (the write-ahead order) and which the outbox never saw. What only
	// such a recording holds is not owed (at most once still holds). A run
	// killed before it says so gets no such excuse: the rows its file
	// holds are those of Appends that succeeded, which its outbox saw
	// (seed 1796298290547820258 failed here while csvstore left a failed
	// write's whole rows in place).
	broken := map[string]bool{}
	for _, r := range set.runs {
		if strings.Contains(r.output, "the recording is broken") {
			broken[r.store] = true
		}
	}
	var missing []string
	left := 0
	for _, k := range slices.Sorted(maps.Keys(recorded)) {
		if !slices.ContainsFunc(slices.Collect(maps.Values(recorded[k])), func(ro recordedOutput) bool { return !broken[ro.store] }) {
			continue
		}
		short := least(k) - len(delivered[k])
		for _, ro := range recorded[k] {
			if short > 0 && len(last) == 1 && ro.store == last[0].store && left < pending {
				short--
				left++
			}
		}
		if short <= 0 {
			continue
		}
		var at []string
		for _, ro := range recorded[k] {
			at = append(at, fmt.Sprintf("%s %s row %d", ro.store, ro.stream, ro.row))
		}
		slices.Sort(at)
		missing = append(missing, fmt.Sprintf("%s delivered %d of %d times (recorded by %s)", k, len(delivered[k]), least(k), strings.Join(head(at, 2), ", ")))
	}
	if len(missing) > 0 {
		o.fail(InvDelivered, "%s: %d outputs the runs recorded whole were not delivered: %s", set.file, len(missing), strings.Join(head(missing, 5), "; "))
	}
}

// anyRecordedOutput reports whether a run of set recorded an output whole.
func (o *oracle) anyRecordedOutput(set outSet) bool {
	for _, r := range set.runs {
		if len(o.recs[r.store].wholeOutputs(r.store)) > 0 {
			return true
		}
	}
	return false
}

var pendingRE = regexp.MustCompile(`, (\d+) pending`)

// pendingOf reads the outputs a run reports pending (recorded, not
// committed) from its summary line ("outputs   FILE: N lines appended,
// ..., P pending ...").
func pendingOf(output string) int {
	for _, l := range strings.Split(output, "\n") {
		if !strings.HasPrefix(l, "outputs ") {
			continue
		}
		if m := pendingRE.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	return 0
}

func intStrings(ns []int) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = strconv.Itoa(n)
	}
	return out
}
