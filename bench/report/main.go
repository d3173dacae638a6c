package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// sample is every value of one metric of one benchmark, across -count runs.
type sample map[string][]float64 // unit -> values

// results maps "pkg BenchmarkName" (without the -GOMAXPROCS suffix) to its
// metrics.
type results map[string]sample

var (
	pkgLine   = regexp.MustCompile(`^pkg: (\S+)`)
	benchLine = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+\d+\s+(.*)$`)
)

func parse(r io.Reader, res results, cpu *string) error {
	pkg := ""
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if m := pkgLine.FindStringSubmatch(line); m != nil {
			pkg = m[1]
			continue
		}
		if strings.HasPrefix(line, "cpu: ") {
			*cpu = strings.TrimSpace(strings.TrimPrefix(line, "cpu: "))
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		key := shortPkg(pkg) + " " + m[1]
		s := res[key]
		if s == nil {
			s = sample{}
			res[key] = s
		}
		f := strings.Fields(m[3])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			s[f[i+1]] = append(s[f[i+1]], v)
		}
	}
	return sc.Err()
}

func shortPkg(p string) string {
	p = strings.TrimPrefix(p, "github.com/blackbox-audit/blackbox/")
	if p == "github.com/blackbox-audit/blackbox" {
		return "."
	}
	return p
}

// median of the values, the figure we report: the machine is shared and
// noisy, and the median of several counts resists one slow run.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// figure names one metric of one benchmark.
type figure struct{ bench, unit string }

func (r results) get(f figure) (float64, bool) {
	if f.bench == fixedBench {
		v, err := strconv.ParseFloat(f.unit, 64)
		return v, err == nil
	}
	s, ok := r[f.bench]
	if !ok {
		return 0, false
	}
	v, ok := s[f.unit]
	if !ok || len(v) == 0 {
		return 0, false
	}
	return median(v), true
}

// paired is the median of the ratios ours/floor taken run by run: the
// i-th value of ours over the i-th of floor, each pair measured by one run
// of the benchmark binary (bench/run.sh runs them COUNT=1 at a time). It is
// false when the two were not measured as often.
func (r results) paired(ours, floor figure) (float64, bool) {
	o, f := r[ours.bench][ours.unit], r[floor.bench][floor.unit]
	if len(o) == 0 || len(o) != len(f) {
		return 0, false
	}
	ratios := make([]float64, len(o))
	for i := range o {
		ratios[i] = o[i] / f[i]
	}
	return median(ratios), true
}

// claim is one row of the table: ours beside a floor or peer, and their
// ratio ours/floor. For costs (ns) the ratio must be at most bar; for rates
// at least bar. A bar of 0 makes the row information only. The ratio is of
// the two medians, or, for a paired claim, the median of the ratios of
// each run (results.paired).
type claim struct {
	what      string
	ours      figure
	floor     figure
	floorName string
	cost      bool // ours and floor are costs (lower is better): bar is a maximum
	bar       float64
	paired    bool
}

// fixedBench names a floor that is a constant (fixed): an absolute bar,
// a rate to reach or a memory ceiling, with bar 1.
const fixedBench = "(fixed)"

// fixed is a floor of value v.
func fixed(v float64) figure { return figure{fixedBench, strconv.FormatFloat(v, 'g', -1, 64)} }

var claims = []claim{
	{"publish to dispatch (ns/item)", figure{"engine BenchmarkPublish", "ns/op"}, figure{"engine BenchmarkChannelHandoff", "ns/op"}, "buffered Go channel hand-off", true, 1.5, false},
	{"TryPublish under PAUSE (ns/item)", figure{"engine BenchmarkTryPublishPause", "ns/op"}, figure{"engine BenchmarkChannelHandoff", "ns/op"}, "buffered Go channel hand-off", true, 0, false},
	{"file source (lines/s)", figure{"engine/filesource BenchmarkSource/once-earliest", "lines/s"}, figure{"engine/filesource BenchmarkScanner/buffer-0", "lines/s"}, "bufio.Scanner line count (its default buffer)", false, 0.8, false},
	{"file source vs a 256 KiB-buffer scanner (lines/s)", figure{"engine/filesource BenchmarkSource/once-earliest", "lines/s"}, figure{"engine/filesource BenchmarkScanner/buffer-262144", "lines/s"}, "bufio.Scanner line count with a 256 KiB buffer (one read per 256 KiB, as the source reads)", false, 0, false},
	{"file source vs a plain string hand-off (lines/s)", figure{"engine/filesource BenchmarkSource/once-earliest", "lines/s"}, figure{"engine/filesource BenchmarkPlainHandoff", "lines/s"}, "bufio.Scanner, a string per line, batches over a channel", false, 0, false},
	{"CSV recording (rows/s)", figure{"store/csvstore BenchmarkAppend", "rows/s"}, figure{"store/csvstore BenchmarkFloorEncodingCSV", "rows/s"}, "encoding/csv, one write per input", false, 0.5, false},
	{"SQLite recording (rows/s)", figure{"store/sqlitestore BenchmarkAppend", "rows/s"}, figure{"store/sqlitestore BenchmarkFloorInsert", "rows/s"}, "bare multi-row INSERT of the input's rows, one tx per input", false, 0.5, false},
	// Group commit (issue 17): the recorder behind an engine against a
	// bare writer of the same rows in the same batches, both figures from
	// the same benchmark run.
	{"CSV recording, batched (rows/s)", figure{"recorder BenchmarkThroughput/record/csv", "rows/s"}, figure{"recorder BenchmarkThroughput/record/csv", "floor-rows/s"}, "encoding/csv writing the same rows in the same batches, one write per batch", false, 0.5, true},
	{"SQLite recording, batched (rows/s)", figure{"recorder BenchmarkThroughput/record/sqlite", "rows/s"}, figure{"recorder BenchmarkThroughput/record/sqlite", "floor-rows/s"}, "bare multi-row INSERT of the same rows in the same batches, one tx per batch", false, 0.8, true},
	// Issue 30: a PostgreSQL run against the SQLite recording of the same
	// input, recorder and engine alike (fsync off on both sides).
	{"PostgreSQL recording vs SQLite, batched (items/s)", figure{"recorder BenchmarkThroughput/record/postgres", "items/s"}, figure{"recorder BenchmarkThroughput/record/sqlite", "items/s"}, "the SQLite recording of the same input (its items/s)", false, 1, false},
	{"replay from CSV (inputs/s)", figure{"replayer BenchmarkReplayCSV", "inputs/s"}, figure{"replayer BenchmarkRecordCSV", "inputs/s"}, "the recording run (CSV)", false, 2, false},
	{"replay from SQLite (inputs/s)", figure{"replayer BenchmarkReplaySQLite", "inputs/s"}, figure{"replayer BenchmarkRecordSQLite", "inputs/s"}, "the recording run (SQLite)", false, 2, false},
	// Replay against a raw read of the same rows (issue 17): both figures
	// from the same benchmark run, on the same recording.
	{"replay from CSV vs a raw read (inputs/s)", figure{"replayer BenchmarkReplayCSV", "inputs/s"}, figure{"replayer BenchmarkReplayCSV", "floor-inputs/s"}, "encoding/csv merely reading the same recording's rows", false, 0.25, false},
	{"engine end to end (msgs/s)", figure{"bench/peers BenchmarkEngine", "msgs/s"}, figure{"bench/peers BenchmarkWatermillGoChannel", "msgs/s"}, "Watermill gochannel", false, 20, false},
	{"Kafka source: consume, process, commit (records/s)", figure{"engine/kafkasource BenchmarkConsumeProcessCommit/source", "records/s"}, figure{"engine/kafkasource BenchmarkConsumeProcessCommit/bare-franz-go", "records/s"}, "bare franz-go loop on the same kfake topic: PollFetches, process, CommitRecords", false, 0.8, false},
	{"Kafka source with CSV recording (records/s)", figure{"engine/kafkasource BenchmarkConsumeProcessCommit/source+csv", "records/s"}, figure{"engine/kafkasource BenchmarkConsumeProcessCommit/bare-franz-go", "records/s"}, "the same bare franz-go loop", false, 0, false},
	{"Kafka source with CSV recording vs a bare loop writing the same rows (records/s)", figure{"engine/kafkasource BenchmarkConsumeProcessCommit/source+csv", "records/s"}, figure{"engine/kafkasource BenchmarkConsumeProcessCommit/bare-franz-go+csv", "records/s"}, "the same bare franz-go loop writing the rows the recorder writes with encoding/csv, one write per poll", false, 0.5, false},
	// Issue 31: what the outbox adds to an output's latency, the ledger
	// saving its state every 100ms: the worst output against the save
	// interval (one interval, plus the save's own write and fsync and a
	// commit poll: within 10% of it).
	// Issue 31: the outbox's cost in-process, the same committed ledger
	// run to CSV without and with the outbox, alternated each iteration.
	{"outbox cost, ledger --state to CSV, in-process (lines/s)", figure{"outbox BenchmarkCost", "outbox-lines/s"}, figure{"outbox BenchmarkCost", "floor-lines/s"}, "the same run without the outbox, alternated with it in each iteration", false, 0.9, true},
	{"output latency the outbox adds, the worst output (ms)", figure{"outbox BenchmarkLatency", "added-max-ms"}, figure{"outbox BenchmarkLatency", "interval-ms"}, "one state-save interval of the ledger (its default)", true, 1.1, false},
	{"per-item cost at 1M vs 10K (ns/item)", figure{"engine BenchmarkScaleItems/items=1000000", "ns/item"}, figure{"engine BenchmarkScaleItems/items=10000", "ns/item"}, "the same at 10K items", true, 1.3, false},
}

// workerClaims are the rows of the parallel workers (issue #16), paired
// run by run: a group of one worker costs at most 1.1x the group before
// workers on the publish-to-dispatch benchmark (BASELINE in bench/run.sh);
// with a processor that waits 1 ms per item N workers reach 0.8 x N times
// one worker's throughput, unordered (by key the rows are information: how
// evenly the keys hash over the workers sets the figure); with a CPU-bound
// one 2 workers reach 1.6x one worker on the 2 cores.
func workerClaims() []claim {
	cs := []claim{{
		what:      "publish to dispatch, 1 worker (ns/item)",
		ours:      figure{"engine BenchmarkPublish", "ns/op"},
		floor:     figure{"baseline/engine BenchmarkPublish", "ns/op"},
		floorName: "the same benchmark before parallel workers",
		cost:      true,
		bar:       1.1,
		paired:    true,
	}}
	one := figure{"engine BenchmarkWorkersIO/order=none/workers=1", "items/s"}
	for _, order := range []string{"none", "key"} {
		for _, n := range []int{2, 4, 8, 16, 32, 64} {
			c := claim{
				what:      fmt.Sprintf("1 ms wait per item, %d workers, order %s (items/s)", n, order),
				ours:      figure{fmt.Sprintf("engine BenchmarkWorkersIO/order=%s/workers=%d", order, n), "items/s"},
				floor:     one,
				floorName: "1 worker",
				paired:    true,
			}
			if order == "none" {
				c.bar = 0.8 * float64(n)
			}
			cs = append(cs, c)
		}
	}
	return append(cs, claim{
		what:      "the machine: 64 plain goroutines waiting 1 ms per item (items/s)",
		ours:      figure{"engine BenchmarkWorkersIOFloor/goroutines=64", "items/s"},
		floor:     figure{"engine BenchmarkWorkersIOFloor/goroutines=1", "items/s"},
		floorName: "1 plain goroutine",
		paired:    true,
	}, claim{
		what:      "CPU-bound (about 2 us per item), 2 workers (items/s)",
		ours:      figure{"engine BenchmarkWorkersCPU/workers=2", "items/s"},
		floor:     figure{"engine BenchmarkWorkersCPU/workers=1", "items/s"},
		floorName: "1 worker",
		bar:       1.6,
		paired:    true,
	}, claim{
		what:      "the machine: the same loops on 2 plain goroutines (items/s)",
		ours:      figure{"engine BenchmarkWorkersCPUFloor/goroutines=2", "items/s"},
		floor:     figure{"engine BenchmarkWorkersCPUFloor/goroutines=1", "items/s"},
		floorName: "1 plain goroutine",
		paired:    true,
	}, claim{
		what:      "CPU-bound, 2 workers against 2 plain goroutines (items/s)",
		ours:      figure{"engine BenchmarkWorkersCPU/workers=2", "items/s"},
		floor:     figure{"engine BenchmarkWorkersCPUFloor/goroutines=2", "items/s"},
		floorName: "2 plain goroutines",
		paired:    true,
	})
}

// e2eClaims are the rows of the blackbox binary run end to end over the
// same input (bench/e2e, issue 17): the ledger with its state saved in
// batches reaches a rate (the bar; the target is twice it), alerts replay
// at least twice its recording's rate, every row's peak resident memory
// under 50 MB, and the per-line cost flat from 10K to 1M lines.
func e2eClaims() []claim {
	e := func(name, unit string) figure { return figure{"bench/e2e BenchmarkE2E/" + name, unit} }
	return []claim{
		{what: "alerts run to SQLite (lines/s)", ours: e("alerts-record-sqlite", "lines/s"), floor: fixed(100_000), floorName: "the bar: 100K lines/s (issue 31)", bar: 1},
		{what: "ledger --state to CSV (lines/s)", ours: e("ledger-state-csv", "lines/s"), floor: fixed(100_000), floorName: "the bar: 100K lines/s", bar: 1},
		{what: "ledger --state to SQLite (lines/s)", ours: e("ledger-state-sqlite", "lines/s"), floor: fixed(50_000), floorName: "the bar: 50K lines/s (issue 31)", bar: 1},
		{what: "ledger --state --out to CSV (lines/s)", ours: e("ledger-state-out-csv", "lines/s"), floor: e("ledger-state-csv", "lines/s"), floorName: "the same run without --out, in the same round (the outbox's cost: at most 10%, issue 31)", bar: 0.9, paired: true},
		{what: "ledger --state --out to SQLite (lines/s)", ours: e("ledger-state-out-sqlite", "lines/s"), floor: e("ledger-state-sqlite", "lines/s"), floorName: "the same run without --out, in the same round (the outbox's cost: at most 10%, issue 31)", bar: 0.9, paired: true},
		{what: "alerts replay from SQLite, the rate (lines/s)", ours: e("alerts-replay-sqlite", "lines/s"), floor: fixed(300_000), floorName: "the bar: 300K lines/s (issue 31)", bar: 1},
		{what: "alerts replay from CSV (lines/s)", ours: e("alerts-replay-csv", "lines/s"), floor: e("alerts-record-csv", "lines/s"), floorName: "its recording run (CSV)", bar: 2},
		{what: "alerts replay from SQLite (lines/s)", ours: e("alerts-replay-sqlite", "lines/s"), floor: e("alerts-record-sqlite", "lines/s"), floorName: "its recording run (SQLite)", bar: 2},
		{what: "peak resident memory, the most of the rows (MB)", ours: e("max-rss", "peak-rss-MB"), floor: fixed(50), floorName: "the ceiling: 50 MB", cost: true, bar: 1},
		{what: "per-line cost at 1M vs 10K lines (ns/line)", ours: e("scale/lines=1000000", "ns/line"), floor: e("scale/lines=10000", "ns/line"), floorName: "the same at 10K lines", cost: true, bar: 1.2},
	}
}

// e2eInfos: every end-to-end row's figures.
func e2eInfos() []info {
	var is []info
	for _, r := range []struct{ name, what string }{
		{"alerts-record-csv", "alerts run --read once-earliest to CSV"},
		{"alerts-replay-csv", "alerts replay from CSV"},
		{"alerts-record-sqlite", "alerts run --read once-earliest to SQLite"},
		{"alerts-replay-sqlite", "alerts replay from SQLite"},
		{"ledger-state-csv", "ledger run --state to CSV"},
		{"ledger-state-sqlite", "ledger run --state to SQLite"},
		{"ledger-state-out-csv", "ledger run --state --out to CSV"},
		{"ledger-state-out-sqlite", "ledger run --state --out to SQLite"},
	} {
		is = append(is, info{r.what + " (lines/s)", figure{"bench/e2e BenchmarkE2E/" + r.name, "lines/s"}},
			info{r.what + " (peak RSS, MB)", figure{"bench/e2e BenchmarkE2E/" + r.name, "peak-rss-MB"}})
	}
	for _, n := range []string{"10000", "100000", "1000000"} {
		is = append(is, info{"alerts to CSV, per-line cost at " + n + " lines (ns/line, the process start taken off)", figure{"bench/e2e BenchmarkE2E/scale/lines=" + n, "ns/line"}})
	}
	return append(is, info{"the process start: alerts over an empty input (ms)", figure{"bench/e2e BenchmarkE2E/scale/lines=10000", "start-ms"}},
		info{"alerts run to CSV, the recording's bytes written (MB/s)", figure{"bench/e2e BenchmarkE2E/alerts-record-csv-bytes", "MB/s"}},
		info{"the physical limit: the disk's sequential write, as many bytes, 1 MiB writes and fsync (MB/s)", figure{"bench/e2e BenchmarkE2E/physical/disk-write", "MB/s"}},
		info{"the physical limit: wc -l over the same 300,000 lines (lines/s)", figure{"bench/e2e BenchmarkE2E/physical/wc-l", "lines/s"}})
}

// info is a row of a figure without a floor.
type info struct {
	what string
	f    figure
}

// infos: the main table's figures without a floor.
var infos = []info{
	{"per-item cost at 10K items (ns/item)", figure{"engine BenchmarkScaleItems/items=10000", "ns/item"}},
	{"per-item cost at 100K items (ns/item)", figure{"engine BenchmarkScaleItems/items=100000", "ns/item"}},
	{"per-item cost at 1M items (ns/item)", figure{"engine BenchmarkScaleItems/items=1000000", "ns/item"}},
	{"1 group (items/s)", figure{"engine BenchmarkGroups/groups=1", "items/s"}},
	{"2 groups (items/s, each to every group)", figure{"engine BenchmarkGroups/groups=2", "items/s"}},
	{"4 groups (items/s, each to every group)", figure{"engine BenchmarkGroups/groups=4", "items/s"}},
	{"16 groups (items/s, each to every group)", figure{"engine BenchmarkGroups/groups=16", "items/s"}},
	{"output latency the outbox adds, the median output (ms)", figure{"outbox BenchmarkLatency", "added-p50-ms"}},
	{"output latency the outbox adds, the 99th percentile (ms)", figure{"outbox BenchmarkLatency", "added-p99-ms"}},
	{"inputs per Append, CSV recording (group commit)", figure{"recorder BenchmarkThroughput/record/csv", "inputs/append"}},
	{"inputs per Append, SQLite recording (group commit)", figure{"recorder BenchmarkThroughput/record/sqlite", "inputs/append"}},
	{"CSV bytes per input", figure{"replayer BenchmarkRecordCSV", "bytes/input"}},
	{"SQLite bytes per input", figure{"replayer BenchmarkRecordSQLite", "bytes/input"}},
	{"resident memory recording 1M inputs (MB)", figure{"replayer BenchmarkRecordCSV", "peak-rss-MB"}},
	{"resident memory replaying 1M inputs, CSV (MB)", figure{"replayer BenchmarkReplayCSV", "peak-rss-MB"}},
	{"resident memory replaying 1M inputs, SQLite (MB)", figure{"replayer BenchmarkReplaySQLite", "peak-rss-MB"}},
}

// workerInfos: the workers' figures without a floor.
var workerInfos = []info{
	{"the CPU-bound processor's busy loop alone, one goroutine (ns/item)", figure{"engine BenchmarkWorkersCPULoop", "ns/op"}},
}

func human(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fK", v/1e3)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

// render writes one table: the claims, then the info rows under the
// heading infoHead, then how they were measured. It returns how many bars
// were not met or not measured.
func render(w io.Writer, res results, cs []claim, infoHead string, is []info, cpu, command string) (failed int) {
	fmt.Fprintf(w, "| figure | blackbox | floor or peer | floor | ratio | bar | holds |\n|---|---|---|---|---|---|---|\n")
	for _, c := range cs {
		ours, ok1 := res.get(c.ours)
		floor, ok2 := res.get(c.floor)
		ratio, ok3 := ours/floor, true
		if c.paired {
			ratio, ok3 = res.paired(c.ours, c.floor)
		}
		if !ok1 || !ok2 || !ok3 {
			fmt.Fprintf(w, "| %s | %s | %s | %s | - | - | not measured |\n", c.what, val(ours, ok1), c.floorName, val(floor, ok2))
			failed++
			continue
		}
		bar, holds := "-", "info"
		switch {
		case c.bar == 0:
		case c.cost:
			bar = "<= " + barText(c.bar)
			holds = yes(ratio <= c.bar)
		default:
			bar = ">= " + barText(c.bar)
			holds = yes(ratio >= c.bar)
		}
		if holds == "NO" {
			failed++
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %.2fx | %s | %s |\n", c.what, human(ours), c.floorName, human(floor), ratio, bar, holds)
	}
	fmt.Fprintf(w, "\n| %s | value |\n|---|---|\n", infoHead)
	for _, in := range is {
		v, ok := res.get(in.f)
		fmt.Fprintf(w, "| %s | %s |\n", in.what, val(v, ok))
	}
	fmt.Fprintf(w, "\nMeasured %s on %s (%d CPUs, %s/%s), medians of the -count runs (a paired ratio: the median of each run's ratio), with:\n\n    %s\n",
		time.Now().UTC().Format("2006-01-02"), cpu, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, command)
	return failed
}

// barText writes a bar with one decimal, two when it needs them (0.25x).
func barText(b float64) string {
	if math.Round(b*10) == b*10 {
		return fmt.Sprintf("%.1fx", b)
	}
	return fmt.Sprintf("%.2fx", b)
}

func val(v float64, ok bool) string {
	if !ok {
		return "not measured"
	}
	return human(v)
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

func main() {
	out := flag.String("o", "", "write the tables into this Markdown file, each between its BEGIN/END markers (TABLE, WORKERS, E2E)")
	command := flag.String("command", "make bench", "the command that produced the input, for the record")
	flag.Parse()
	res := results{}
	cpu := "unknown cpu"
	for _, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(2)
		}
		err = parse(f, res, &cpu)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "report: %s: %v\n", name, err)
			os.Exit(2)
		}
	}
	failed := 0
	for _, t := range []struct {
		marker   string
		claims   []claim
		infoHead string
		infos    []info
	}{
		{"TABLE", claims, "scaling and memory", infos},
		{"WORKERS", workerClaims(), "workers", workerInfos},
		{"E2E", e2eClaims(), "the binary end to end", e2eInfos()},
	} {
		var b strings.Builder
		failed += render(&b, res, t.claims, t.infoHead, t.infos, cpu, *command)
		fmt.Print(b.String(), "\n")
		if *out != "" {
			if err := splice(*out, t.marker, b.String()); err != nil {
				fmt.Fprintln(os.Stderr, "report:", err)
				os.Exit(2)
			}
		}
	}
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "report: %d bar(s) not met or not measured\n", failed)
	}
}

// splice replaces the text of path between the markers
// <!-- BEGIN name --> and <!-- END name --> with table. The file is
// replaced whole (a temporary file, synced, renamed over it).
func splice(path, name, table string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	begin, end := "<!-- BEGIN "+name+" -->", "<!-- END "+name+" -->"
	s := string(old)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %s ... %s markers", path, begin, end)
	}
	s = s[:i+len(begin)] + "\n" + table + s[j:]
	tmp, err := os.CreateTemp(filepath.Dir(path), ".report-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(s); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		defer d.Close()
		return d.Sync()
	}
	return nil
}
