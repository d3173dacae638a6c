package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/core"
)

// Upper is a processor of your own: it emits each line in upper case.
type Upper struct{}

// OnEvent handles one line of the input file.
func (Upper) OnEvent(c *core.Cycle, ev any) error {
	c.Emit("upper", strings.ToUpper(ev.(string)))
	return nil
}

// upperApp registers Upper as the app "upper": a constructor (Upper takes
// no options), and the decoder of its recorded inputs (a file feed's items
// are lines, recorded as JSON strings).
var upperApp = core.App{
	Name: "upper",
	New: func(options map[string]string) (core.Processor, error) {
		for k := range options {
			return nil, fmt.Errorf("%w: upper takes no option %q", core.ErrOption, k)
		}
		return Upper{}, nil
	},
	Decode: func(payload []byte) (any, error) {
		var line string
		err := json.Unmarshal(payload, &line)
		return line, err
	},
}

// Build a blackbox binary that knows your processor: register it as an App,
// then record a run of it and replay the recording. In your main package:
//
//	func main() { os.Exit(cli.Main(os.Args[1:], cli.WithApps(upperApp))) }
func Example_ownProcessor() {
	dir, err := os.MkdirTemp("", "blackbox-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	input, store := filepath.Join(dir, "input.txt"), filepath.Join(dir, "run.csv")
	if err := os.WriteFile(input, []byte("hello\nworld\n"), 0o644); err != nil {
		panic(err)
	}
	ctx := context.Background()
	clock := cli.WithClock(core.NewStepClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Second))

	run := cli.New(cli.WithApps(upperApp), clock, cli.WithStdout(io.Discard))
	code := run.Execute(ctx, []string{"run", "--app", "upper", "--input", input, "--store", store, "--read", "once-earliest"})
	fmt.Println("run exit", code)

	replay := cli.New(cli.WithApps(upperApp), clock, cli.WithStdout(os.Stdout))
	code = replay.Execute(ctx, []string{"replay", store})
	fmt.Println("replay exit", code)
	// Output:
	// run exit 0
	// replay: identical, complete, lossless
	// processor "upper" (app "upper"): 2 inputs replayed, 2 outputs compared, identical
	// replay exit 0
}
