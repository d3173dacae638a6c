package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
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

// claim is one row of the table: ours beside a floor or peer, and their
// ratio ours/floor. For costs (ns) the ratio must be at most bar; for rates
// at least bar. A bar of 0 makes the row information only.
type claim struct {
	what      string
	ours      figure
	floor     figure
	floorName string
	cost      bool // ours and floor are costs (lower is better): bar is a maximum
	bar       float64
}

var claims = []claim{
	{"publish to dispatch (ns/item)", figure{"engine BenchmarkPublish", "ns/op"}, figure{"engine BenchmarkChannelHandoff", "ns/op"}, "buffered Go channel hand-off", true, 1.5},
	{"TryPublish under PAUSE (ns/item)", figure{"engine BenchmarkTryPublishPause", "ns/op"}, figure{"engine BenchmarkChannelHandoff", "ns/op"}, "buffered Go channel hand-off", true, 0},
	{"file source (lines/s)", figure{"engine/filesource BenchmarkSource/once-earliest", "lines/s"}, figure{"engine/filesource BenchmarkScanner/buffer-0", "lines/s"}, "bufio.Scanner line count", false, 0.5},
	{"file source vs a plain string hand-off (lines/s)", figure{"engine/filesource BenchmarkSource/once-earliest", "lines/s"}, figure{"engine/filesource BenchmarkPlainHandoff", "lines/s"}, "bufio.Scanner, a string per line, batches over a channel", false, 0},
	{"CSV recording (rows/s)", figure{"store/csvstore BenchmarkAppend", "rows/s"}, figure{"store/csvstore BenchmarkFloorEncodingCSV", "rows/s"}, "encoding/csv, one write per input", false, 0.5},
	{"SQLite recording (rows/s)", figure{"store/sqlitestore BenchmarkAppend", "rows/s"}, figure{"store/sqlitestore BenchmarkFloorInsert", "rows/s"}, "bare prepared INSERT, one tx per input", false, 0.5},
	{"replay from CSV (inputs/s)", figure{"replayer BenchmarkReplayCSV", "inputs/s"}, figure{"replayer BenchmarkRecordCSV", "inputs/s"}, "the recording run (CSV)", false, 2},
	{"replay from SQLite (inputs/s)", figure{"replayer BenchmarkReplaySQLite", "inputs/s"}, figure{"replayer BenchmarkRecordSQLite", "inputs/s"}, "the recording run (SQLite)", false, 2},
	{"Kafka source: consume, process, commit (records/s)", figure{"engine/kafkasource BenchmarkConsumeProcessCommit/source", "records/s"}, figure{"engine/kafkasource BenchmarkConsumeProcessCommit/bare-franz-go", "records/s"}, "bare franz-go loop on the same kfake topic: PollFetches, process, CommitRecords", false, 0.5},
	{"Kafka source with CSV recording (records/s)", figure{"engine/kafkasource BenchmarkConsumeProcessCommit/source+csv", "records/s"}, figure{"engine/kafkasource BenchmarkConsumeProcessCommit/bare-franz-go", "records/s"}, "the same bare franz-go loop", false, 0},
	{"engine end to end (msgs/s)", figure{"bench/peers BenchmarkEngine", "msgs/s"}, figure{"bench/peers BenchmarkWatermillGoChannel", "msgs/s"}, "Watermill gochannel", false, 20},
	{"per-item cost at 1M vs 10K (ns/item)", figure{"engine BenchmarkScaleItems/items=1000000", "ns/item"}, figure{"engine BenchmarkScaleItems/items=10000", "ns/item"}, "the same at 10K items", true, 1.3},
}

// info rows: figures without a floor.
var infos = []struct {
	what string
	f    figure
}{
	{"per-item cost at 10K items (ns/item)", figure{"engine BenchmarkScaleItems/items=10000", "ns/item"}},
	{"per-item cost at 100K items (ns/item)", figure{"engine BenchmarkScaleItems/items=100000", "ns/item"}},
	{"per-item cost at 1M items (ns/item)", figure{"engine BenchmarkScaleItems/items=1000000", "ns/item"}},
	{"1 group (items/s)", figure{"engine BenchmarkGroups/groups=1", "items/s"}},
	{"2 groups (items/s, each to every group)", figure{"engine BenchmarkGroups/groups=2", "items/s"}},
	{"4 groups (items/s, each to every group)", figure{"engine BenchmarkGroups/groups=4", "items/s"}},
	{"16 groups (items/s, each to every group)", figure{"engine BenchmarkGroups/groups=16", "items/s"}},
	{"CSV bytes per input", figure{"replayer BenchmarkRecordCSV", "bytes/input"}},
	{"SQLite bytes per input", figure{"replayer BenchmarkRecordSQLite", "bytes/input"}},
	{"resident memory recording 1M inputs (MB)", figure{"replayer BenchmarkRecordCSV", "peak-rss-MB"}},
	{"resident memory replaying 1M inputs, CSV (MB)", figure{"replayer BenchmarkReplayCSV", "peak-rss-MB"}},
	{"resident memory replaying 1M inputs, SQLite (MB)", figure{"replayer BenchmarkReplaySQLite", "peak-rss-MB"}},
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

func render(w io.Writer, res results, cpu, command string) (failed int) {
	fmt.Fprintf(w, "| figure | blackbox | floor or peer | floor | ratio | bar | holds |\n|---|---|---|---|---|---|---|\n")
	for _, c := range claims {
		ours, ok1 := res.get(c.ours)
		floor, ok2 := res.get(c.floor)
		if !ok1 || !ok2 {
			fmt.Fprintf(w, "| %s | %s | %s | %s | - | - | not measured |\n", c.what, val(ours, ok1), c.floorName, val(floor, ok2))
			failed++
			continue
		}
		ratio := ours / floor
		bar, holds := "-", "info"
		switch {
		case c.bar == 0:
		case c.cost:
			bar = fmt.Sprintf("<= %.1fx", c.bar)
			holds = yes(ratio <= c.bar)
		default:
			bar = fmt.Sprintf(">= %.1fx", c.bar)
			holds = yes(ratio >= c.bar)
		}
		if holds == "NO" {
			failed++
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %.2fx | %s | %s |\n", c.what, human(ours), c.floorName, human(floor), ratio, bar, holds)
	}
	fmt.Fprintf(w, "\n| scaling and memory | value |\n|---|---|\n")
	for _, in := range infos {
		v, ok := res.get(in.f)
		fmt.Fprintf(w, "| %s | %s |\n", in.what, val(v, ok))
	}
	fmt.Fprintf(w, "\nMeasured %s on %s (%d CPUs, %s/%s), medians of the -count runs, with:\n\n    %s\n",
		time.Now().UTC().Format("2006-01-02"), cpu, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, command)
	return failed
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
	out := flag.String("o", "", "write the table into this Markdown file between the BEGIN/END markers")
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
	var b strings.Builder
	failed := render(&b, res, cpu, *command)
	fmt.Print(b.String())
	if *out != "" {
		if err := splice(*out, b.String()); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(2)
		}
	}
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "report: %d bar(s) not met or not measured\n", failed)
	}
}

const begin, end = "<!-- BEGIN TABLE -->", "<!-- END TABLE -->"

// splice replaces the text between the markers of path with table.
func splice(path, table string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(old)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %s ... %s markers", path, begin, end)
	}
	s = s[:i+len(begin)] + "\n" + table + s[j:]
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
