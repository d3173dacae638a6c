// Command e2e measures the blackbox binary end to end, as a user runs it:
// it writes the inputs, runs the binary on them (each run a child process:
// its wall time and its peak resident memory, from the kernel's rusage of
// the child) and prints the figures as Go benchmark lines, for
// bench/report (make bench).
//
// Rows (-lines, 300,000 by default):
//
//   - alerts: run --read once-earliest to CSV and to SQLite, then replay of
//     each recording (lines/s, peak RSS);
//   - ledger: run --read committed --state (its batched saves at their
//     defaults) to CSV and to SQLite, each without and with --out (the
//     outbox), the four in turn, -repeat rounds (lines/s, peak RSS);
//   - the most RSS of those rows;
//   - the per-line cost of alerts to CSV at each of -scale's line counts
//     (ns/line, the run of an empty input taken off: what a line costs,
//     not the process start): the median of -repeat runs, the counts
//     taken in turn, so that a slow phase of a shared machine does not
//     fall on one count only.
//
// Usage:
//
//	go run ./bench/e2e -bin PATH [-lines N] [-scale 10000,100000,1000000] [-dir DIR]
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// result is one run of the binary: its wall time and peak RSS.
type result struct {
	wall  time.Duration
	rssMB float64
}

// run runs bin with args in dir; a failed run is fatal (its output shown).
func run(dir, bin string, args ...string) result {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	if err != nil {
		fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		fatalf("no rusage of the child on this system")
	}
	return result{wall: wall, rssMB: float64(ru.Maxrss) / 1024} // Linux: Maxrss in KiB
}

// cpuName is the processor's model name from /proc/cpuinfo, as go test
// prints it; "" where there is none.
func cpuName() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
	os.Exit(2)
}

// write writes n lines made by line(i) to dir/name.
func write(dir, name string, n int, line func(i int) string) string {
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		fatalf("%v", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := range n {
		w.WriteString(line(i))
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		fatalf("%v", err)
	}
	if err := f.Close(); err != nil {
		fatalf("%v", err)
	}
	return p
}

// sensor is an alerts line: 100 sensors, values 0..999 (threshold 100 by
// default: about a tenth raise an alert).
func sensor(i int) string { return "sensor-" + strconv.Itoa(i%100) + "," + strconv.Itoa((i*7919)%1000) }

// account is a ledger line: 1,000 accounts, small signed amounts.
func account(i int) string {
	return "acct-" + strconv.Itoa((i*31)%1000) + "," + strconv.Itoa((i*7919)%2001-1000)
}

// row prints one benchmark line: name, then value-unit pairs.
func row(name string, pairs ...any) {
	var b strings.Builder
	fmt.Fprintf(&b, "BenchmarkE2E/%s \t       1", name)
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(&b, "\t%12.2f %s", pairs[i], pairs[i+1])
	}
	fmt.Println(b.String())
}

func main() {
	bin := flag.String("bin", "", "the blackbox binary (required)")
	lines := flag.Int("lines", 300_000, "input lines of the record, replay and ledger rows")
	scale := flag.String("scale", "10000,100000,1000000", "line counts of the per-line cost rows")
	dirFlag := flag.String("dir", "", "the working directory (default: a new temporary one, removed at the end)")
	repeat := flag.Int("repeat", 3, "rounds of the ledger rows and of each per-line cost row (medians are reported)")
	flag.Parse()
	if *bin == "" {
		fatalf("-bin is required")
	}
	b, err := filepath.Abs(*bin)
	if err != nil {
		fatalf("%v", err)
	}
	dir := *dirFlag
	if dir == "" {
		if dir, err = os.MkdirTemp("", "blackbox-e2e-"); err != nil {
			fatalf("%v", err)
		}
		defer os.RemoveAll(dir)
	}
	fmt.Printf("goos: %s\ngoarch: %s\n", runtime.GOOS, runtime.GOARCH)
	if cpu := cpuName(); cpu != "" {
		fmt.Println("cpu:", cpu)
	}
	fmt.Println("pkg: github.com/blackbox-audit/blackbox/bench/e2e")
	n := float64(*lines)
	perSec := func(r result) float64 { return n / r.wall.Seconds() }
	most := 0.0
	report := func(name string, r result) {
		most = max(most, r.rssMB)
		row(name, perSec(r), "lines/s", r.rssMB, "peak-rss-MB")
	}

	sensors := write(dir, "sensors.txt", *lines, sensor)
	for _, f := range []struct{ name, store string }{{"csv", "alerts.csv"}, {"sqlite", "alerts.db"}} {
		rec := run(dir, b, "run", "--app", "alerts", "--input", sensors, "--store", f.store, "--read", "once-earliest")
		report("alerts-record-"+f.name, rec)
		if f.name == "csv" {
			// The physical limits beside it: wc -l over the same input, and
			// the disk writing as many bytes as the recording holds.
			fi, err := os.Stat(filepath.Join(dir, f.store))
			if err != nil {
				fatalf("%v", err)
			}
			mb := float64(fi.Size()) / (1 << 20)
			row("alerts-record-csv-bytes", mb/rec.wall.Seconds(), "MB/s", mb, "MB")
			wc := run(dir, "wc", "-l", sensors)
			row("physical/wc-l", perSec(wc), "lines/s")
			row("physical/disk-write", diskWrite(dir, fi.Size()), "MB/s")
		}
		report("alerts-replay-"+f.name, run(dir, b, "replay", f.store))
	}
	// The ledger with --state, then the same with --out: every output
	// delivered through the outbox, once its input is recorded and
	// committed (issues 26 and 31). The two alternate, -repeat rounds of
	// each pair, so that bench/report pairs each round's runs (the outbox's
	// cost is their ratio) and a slow phase of a shared machine falls on
	// both sides of a pair.
	ledger := write(dir, "ledger.txt", *lines, account)
	for round := range max(1, *repeat) {
		for _, f := range []struct{ name, ext string }{{"csv", ".csv"}, {"sqlite", ".db"}} {
			for _, out := range []bool{false, true} {
				name := "ledger-state-" + f.name
				if out {
					name = "ledger-state-out-" + f.name
				}
				base := fmt.Sprintf("%s-%d", name, round)
				args := []string{"run", "--app", "ledger", "--input", ledger, "--store", base + f.ext,
					"--read", "committed", "--pointer", base + ".ptr", "--state", base + ".json"}
				if out {
					args = append(args, "--out", base+".jsonl")
				}
				report(name, run(dir, b, args...))
				for _, sfx := range []string{f.ext, ".ptr", ".json", ".jsonl", ".jsonl.outbox"} {
					os.Remove(filepath.Join(dir, base+sfx))
				}
			}
		}
	}
	row("max-rss", most, "peak-rss-MB")

	// The per-line cost: each count's run less the run of an empty input
	// (the process start, the store's creation), over its lines; the
	// medians of -repeat rounds, each round running every count in turn.
	empty := write(dir, "empty.txt", 0, sensor)
	var counts []int
	for _, s := range strings.Split(*scale, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || k <= 0 {
			fatalf("-scale: %q is not a positive line count", s)
		}
		counts = append(counts, k)
		write(dir, fmt.Sprintf("scale-%d.txt", k), k, sensor)
	}
	var starts []time.Duration
	walls := make([][]time.Duration, len(counts))
	rss := make([]float64, len(counts))
	for round := range max(1, *repeat) {
		starts = append(starts, run(dir, b, "run", "--app", "alerts", "--input", empty, "--store", fmt.Sprintf("empty-%d.csv", round), "--read", "once-earliest").wall)
		for i, k := range counts {
			store := fmt.Sprintf("scale-%d-%d.csv", k, round)
			r := run(dir, b, "run", "--app", "alerts", "--input", fmt.Sprintf("scale-%d.txt", k), "--store", store, "--read", "once-earliest")
			walls[i] = append(walls[i], r.wall)
			rss[i] = max(rss[i], r.rssMB)
			os.Remove(filepath.Join(dir, store))
		}
	}
	start := median(starts)
	for i, k := range counts {
		row(fmt.Sprintf("scale/lines=%d", k), float64(median(walls[i])-start)/float64(k), "ns/line", rss[i], "peak-rss-MB", float64(start.Milliseconds()), "start-ms")
	}
}

// diskWrite is the disk's sequential write rate in dir, MB/s: n bytes
// written to a new file in 1 MiB writes, then fsync, the best of 3.
func diskWrite(dir string, n int64) float64 {
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte('a' + i%26)
	}
	best := 0.0
	for range 3 {
		path := filepath.Join(dir, "disk-write.tmp")
		f, err := os.Create(path)
		if err != nil {
			fatalf("%v", err)
		}
		start := time.Now()
		for left := n; left > 0; left -= int64(len(buf)) {
			if _, err := f.Write(buf[:min(int64(len(buf)), left)]); err != nil {
				fatalf("%v", err)
			}
		}
		if err := f.Sync(); err != nil {
			fatalf("%v", err)
		}
		best = max(best, float64(n)/(1<<20)/time.Since(start).Seconds())
		f.Close()
		os.Remove(path)
	}
	return best
}

// median of ds (the upper one of an even count).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
