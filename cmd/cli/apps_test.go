package cli_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/core"
)

// TestWithoutBuiltinAppsWorksInAnyOrderOfTheOptions: WithoutBuiltinApps
// leaves the built-in apps out whether it comes before or after WithApps,
// and keeps every app WithApps registered.
func TestWithoutBuiltinAppsWorksInAnyOrderOfTheOptions(t *testing.T) {
	mine := cli.WithApps(core.App{Name: "mine", New: func(map[string]string) (core.Processor, error) { return nil, nil }})
	other := cli.WithApps(core.App{Name: "other", New: func(map[string]string) (core.Processor, error) { return nil, nil }})
	for _, tc := range []struct {
		name string
		opts []cli.Option
		want []string
	}{
		{"builtins", nil, []string{"alerts", "ledger"}},
		{"with apps", []cli.Option{mine}, []string{"alerts", "ledger", "mine"}},
		{"without, then apps", []cli.Option{cli.WithoutBuiltinApps(), mine}, []string{"mine"}},
		{"apps, then without", []cli.Option{mine, cli.WithoutBuiltinApps()}, []string{"mine"}},
		{"apps, without, apps", []cli.Option{mine, cli.WithoutBuiltinApps(), other}, []string{"mine", "other"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cli.New(tc.opts...).AppNames(); !slices.Equal(got, tc.want) {
				t.Fatalf("apps %q, want %q", got, tc.want)
			}
		})
	}
}

// run --option configures the app; replay --option APP:KEY=VALUE gives the
// same option back: identical. Without it the replay diverges (alerts at
// the default threshold), and an option the app does not take is a usage
// error, in run and in replay.
func TestOptionsConfigureTheAppInRunAndReplay(t *testing.T) {
	dir := t.TempDir()
	in, st := filepath.Join(dir, "in.txt"), filepath.Join(dir, "r.csv")
	writeLines(t, in, "alice,5", "bob,7")
	ctx := t.Context()
	if code, out := execute(t, ctx, "run", "--app", "alerts", "--option", "threshold=5", "--read", "once-earliest", "--input", in, "--store", st); code != cli.ExitOK {
		t.Fatalf("run exit %d:\n%s", code, out)
	}
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--option", "alerts:threshold=5"}, cli.ExitOK},
		{[]string{"--app", "alerts", "--option", "threshold=5"}, cli.ExitOK},
		{nil, cli.ExitDifferent},
		{[]string{"--option", "alerts:colour=red"}, cli.ExitIncomplete}, // the processor cannot be built: not replayed
		{[]string{"--option", "nope:threshold=5"}, cli.ExitFailure},
		{[]string{"--option", "threshold"}, cli.ExitFailure},
	} {
		if code, out := execute(t, ctx, append([]string{"replay", st}, tc.args...)...); code != tc.want {
			t.Errorf("replay %q: exit %d, want %d:\n%s", tc.args, code, tc.want, out)
		}
	}
	st2 := filepath.Join(dir, "r2.csv")
	if code, out := execute(t, ctx, "run", "--app", "alerts", "--option", "colour=red", "--read", "once-earliest", "--input", in, "--store", st2); code != cli.ExitFailure {
		t.Errorf("run with an option alerts does not take: exit %d, want %d:\n%s", code, cli.ExitFailure, out)
	}
}
