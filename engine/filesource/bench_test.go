package filesource

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

var benchMB = flag.Int("filesource.mb", 200, "size in MB of the benchmark input (100-byte lines)")

// benchFile is a file of 100-byte lines, generated once and cached in the
// temporary directory.
func benchFile(b *testing.B) (string, int) {
	b.Helper()
	lines := *benchMB * 1_000_000 / 100
	path := filepath.Join(os.TempDir(), fmt.Sprintf("blackbox-filesource-bench-%dmb.log", *benchMB))
	if fi, err := os.Stat(path); err == nil && fi.Size() == int64(lines)*100 {
		return path, lines
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	pad := make([]byte, 100-1-8-1)
	for i := range pad {
		pad[i] = 'a' + byte(i%26)
	}
	for i := 0; i < lines; i++ {
		fmt.Fprintf(w, "%08d %s\n", i, pad)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	return path, lines
}

func reportLines(b *testing.B, lines int) {
	b.ReportMetric(float64(lines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSource: lines/s read and published by the source and dispatched
// to a no-op processor (PAUSE, a 1,024-line queue), one pass over the file
// per iteration. Compare with BenchmarkScanner in the same run.
func BenchmarkSource(b *testing.B) {
	path, lines := benchFile(b)
	noop := core.ProcessorFunc(func(*core.Cycle, any) error { return nil })
	for _, strategy := range []Strategy{OnceEarliest, Committed} {
		b.Run(strategy.String(), func(b *testing.B) {
			ptr := filepath.Join(b.TempDir(), "bench.ptr")
			b.SetBytes(int64(lines) * 100)
			for i := 0; i < b.N; i++ {
				os.Remove(ptr)
				src, err := New(path, Options{Read: strategy, Pointer: ptr})
				if err != nil {
					b.Fatal(err)
				}
				e, err := engine.New(engine.Config{
					Feeds:  []engine.FeedConfig{{Name: "in", Source: src, QueueSize: 1024}},
					Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "p", Processor: noop}}}},
				})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				if err := e.Start(ctx); err != nil {
					b.Fatal(err)
				}
				st, err := e.WaitSettled(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := e.Stop(ctx); err != nil {
					b.Fatal(err)
				}
				if n := st.Feeds[0].Sequence; n != int64(lines) {
					b.Fatalf("published %d lines, want %d", n, lines)
				}
			}
			reportLines(b, lines)
		})
	}
}

// BenchmarkScanner: a bufio.Scanner line count of the same file, with its
// default buffer and with the source's 256 KiB.
func BenchmarkScanner(b *testing.B) {
	path, lines := benchFile(b)
	for _, size := range []int{0, defaultBufSize} {
		b.Run(fmt.Sprintf("buffer-%d", size), func(b *testing.B) {
			b.SetBytes(int64(lines) * 100)
			for i := 0; i < b.N; i++ {
				readPass(b, path, lines, func(f *os.File) (int, error) {
					sc := bufio.NewScanner(f)
					if size > 0 {
						sc.Buffer(make([]byte, size), size)
					}
					n := 0
					for sc.Scan() {
						n++
					}
					return n, sc.Err()
				})
			}
			reportLines(b, lines)
		})
	}
}

// BenchmarkLineReader: the source's reading and splitting alone (decoded
// lines, no engine).
func BenchmarkLineReader(b *testing.B) {
	path, lines := benchFile(b)
	b.SetBytes(int64(lines) * 100)
	for i := 0; i < b.N; i++ {
		readPass(b, path, lines, func(f *os.File) (int, error) {
			l := newLineReader(f, 0, 0)
			n := 0
			var texts []any
			var ends []core.Position
			for {
				for {
					texts, ends = l.lines(false, publishBatch, texts[:0], ends[:0])
					if len(texts) == 0 {
						break
					}
					n += len(texts)
				}
				got, err := l.fill()
				if err != nil || got == 0 {
					return n, err
				}
			}
		})
	}
	reportLines(b, lines)
}

// BenchmarkPlainHandoff: the source's work done the plainest way, as a
// reference: bufio.Scanner, each line's text as a string in an any, in
// batches of 128 over a buffered channel to a goroutine that counts them.
func BenchmarkPlainHandoff(b *testing.B) {
	path, lines := benchFile(b)
	b.SetBytes(int64(lines) * 100)
	for i := 0; i < b.N; i++ {
		readPass(b, path, lines, func(f *os.File) (int, error) {
			ch := make(chan []any, 8)
			done := make(chan int)
			go func() {
				n := 0
				for batch := range ch {
					for _, v := range batch {
						if v != nil {
							n++
						}
					}
				}
				done <- n
			}()
			sc := bufio.NewScanner(f)
			batch := make([]any, 0, publishBatch)
			for sc.Scan() {
				batch = append(batch, sc.Text())
				if len(batch) == publishBatch {
					ch <- batch
					batch = make([]any, 0, publishBatch)
				}
			}
			ch <- batch
			close(ch)
			return <-done, sc.Err()
		})
	}
	reportLines(b, lines)
}

// readPass opens the benchmark file, has count read it, and fails unless
// count read every line without error.
func readPass(b *testing.B, path string, lines int, count func(*os.File) (int, error)) {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if n, err := count(f); err != nil || n != lines {
		b.Fatalf("%d lines of %d, %v", n, lines, err)
	}
}
