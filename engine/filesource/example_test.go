package filesource_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/filesource"
)

// A once-read of a file: every line, with the byte offset after it, then
// END_OF_STREAM. The bytes after the last terminator are counted, not
// published.
func Example() {
	dir, _ := os.MkdirTemp("", "filesource-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "in.log")
	os.WriteFile(path, []byte("alpha\r\nbeta\ncaf\xe9\rpartial"), 0o644)

	src, err := filesource.New(path, filesource.Options{
		Read:   filesource.OnceEarliest,
		Logger: slog.New(slog.DiscardHandler), // warnings (here: the unterminated bytes)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	print := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		fmt.Printf("%+q at %d\n", ev, c.Delivery().Position.Offset)
		return nil
	})
	e, err := engine.New(engine.Config{
		Feeds:  []engine.FeedConfig{{Name: "in", Source: src, QueueSize: 16}}, // policy: the source's PAUSE
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "print", Processor: print}}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	e.Start(ctx)
	st, _ := e.WaitSettled(ctx)
	e.Stop(ctx)
	f := st.Feeds[0]
	fmt.Println(f.State, f.Policy, "unterminated:", f.Unterminated)
	// Output:
	// "alpha" at 7
	// "beta" at 12
	// "caf\ufffd" at 17
	// END_OF_STREAM PAUSE unterminated: 7
}

// ParseStrategy reads the names configuration files and flags use; an
// unknown name is an error wrapping ErrStrategy.
func ExampleParseStrategy() {
	for _, name := range []string{"latest", "Once_Latest", "newest"} {
		s, err := filesource.ParseStrategy(name)
		if errors.Is(err, filesource.ErrStrategy) {
			fmt.Printf("%s: unknown\n", name)
			continue
		}
		fmt.Printf("%s: %v\n", name, s)
	}
	// Output:
	// latest: latest
	// Once_Latest: once-latest
	// newest: unknown
}

// The pointer file's committed position is the engine's core.Position in
// the pointer's epoch: an application compares it with a delivery, or
// with the position its state saved, as it is. Here a committed run
// processes three lines and stops (the stop commits what every group
// processed); the pointer then holds the last line's position.
func ExamplePointer_Position() {
	dir, _ := os.MkdirTemp("", "filesource-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "in.log")
	os.WriteFile(path, []byte("a\nbb\nccc\n"), 0o644)

	src, err := filesource.New(path, filesource.Options{}) // Committed, the pointer at in.log.ptr
	if err != nil {
		fmt.Println(err)
		return
	}
	var last core.Delivery
	done := make(chan struct{})
	keep := core.ProcessorFunc(func(c *core.Cycle, ev any) error {
		last = *c.Delivery() // a copy: the engine reuses the Delivery
		if ev == "ccc" {
			close(done)
		}
		return nil
	})
	e, err := engine.New(engine.Config{
		Feeds:  []engine.FeedConfig{{Name: "in", Source: src, QueueSize: 16}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"}, Processors: []engine.ProcessorConfig{{Name: "keep", Processor: keep}}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	e.Start(ctx)
	<-done
	e.Stop(ctx)

	ptr, err := filesource.ReadPointer(src.PointerPath())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("last line at", last.Position, "pointer at", ptr.Position())
	fmt.Println("same epoch and position:", ptr.Epoch == last.Epoch && ptr.Position() == last.Position)
	fmt.Println("a state saved through the pointer holds the last line:", last.AlreadyApplied(ptr.Epoch, ptr.Position()))
	// Output:
	// last line at 9 pointer at 9
	// same epoch and position: true
	// a state saved through the pointer holds the last line: true
}
