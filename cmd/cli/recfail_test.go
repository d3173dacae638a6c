package cli_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/core"
)

// unsnappable is a processor whose state cannot be snapshotted: the
// recorder cannot write its stream's START row.
type unsnappable struct{}

func (unsnappable) OnEvent(*core.Cycle, any) error { return nil }
func (unsnappable) Snapshot() ([]byte, error)      { return nil, errors.New("state not serialisable") }
func (unsnappable) Restore([]byte) error           { return nil }

// TestARunWhoseRecordingCannotBeWrittenStopsAndExitsThreeNamingTheStore:
// when the recorder cannot write (here the START row of the app's stream),
// `run` does not wait for a settled feed that will never come, with or
// without --follow: it stops at once and exits 3 with an error naming the
// recording.
func TestARunWhoseRecordingCannotBeWrittenStopsAndExitsThreeNamingTheStore(t *testing.T) {
	for _, follow := range []bool{false, true} {
		t.Run(map[bool]string{false: "once", true: "follow"}[follow], func(t *testing.T) {
			dir := t.TempDir()
			in, st := filepath.Join(dir, "in.txt"), filepath.Join(dir, "r.csv")
			writeLines(t, in, "a", "b")
			var out bytes.Buffer
			c := newCLI(&out, cli.WithApps(core.App{Name: "unsnap",
				New:    func(map[string]string) (core.Processor, error) { return unsnappable{}, nil },
				Decode: func(b []byte) (any, error) { return string(b), nil },
			}))
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			args := []string{"run", "--app", "unsnap", "--input", in, "--store", st}
			if follow {
				args = append(args, "--follow")
			}
			code := c.Execute(ctx, args)
			if ctx.Err() != nil {
				t.Fatalf("run waited until its context ended:\n%s", out.String())
			}
			if code != cli.ExitIncomplete || !strings.Contains(out.String(), st+": ") ||
				!strings.Contains(out.String(), "state not serialisable") {
				t.Errorf("exit %d, want %d naming %s and the cause:\n%s", code, cli.ExitIncomplete, st, out.String())
			}
			if !strings.Contains(out.String(), "lossless: no") {
				t.Errorf("the summary does not say the run is not lossless:\n%s", out.String())
			}
		})
	}
}
