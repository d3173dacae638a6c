package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/store/csvstore"
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

// run --option configures the app and the recording holds the option: a
// replay with no option, or the same one given again, is identical; one
// given another value overrides the recorded one (the report says so) and
// diverges; an option the app does not take is a usage error, in run and
// in replay.
func TestOptionsConfigureTheAppInRunAndReplay(t *testing.T) {
	dir := t.TempDir()
	in, st := filepath.Join(dir, "in.txt"), filepath.Join(dir, "r.csv")
	writeLines(t, in, "alice,5", "bob,7")
	ctx := t.Context()
	if code, out := execute(t, ctx, "run", "--app", "alerts", "--option", "threshold=5", "--read", "once-earliest", "--input", in, "--store", st); code != cli.ExitOK {
		t.Fatalf("run exit %d:\n%s", code, out)
	}
	const overridden = "option threshold=1000 given: overrides the recorded threshold=5"
	for _, tc := range []struct {
		args     []string
		want     int
		override bool // the report names the override
	}{
		{nil, cli.ExitOK, false},
		{[]string{"--option", "alerts:threshold=5"}, cli.ExitOK, false},
		{[]string{"--app", "alerts", "--option", "threshold=5"}, cli.ExitOK, false},
		{[]string{"--option", "alerts:threshold=1000"}, cli.ExitDifferent, true},
		{[]string{"--option", "alerts:colour=red"}, cli.ExitIncomplete, false}, // the processor cannot be built: not replayed
		{[]string{"--option", "nope:threshold=5"}, cli.ExitFailure, false},
		{[]string{"--option", "threshold"}, cli.ExitFailure, false},
	} {
		code, out := execute(t, ctx, append([]string{"replay", st}, tc.args...)...)
		if code != tc.want {
			t.Errorf("replay %q: exit %d, want %d:\n%s", tc.args, code, tc.want, out)
		}
		if got := strings.Contains(out, overridden); got != tc.override {
			t.Errorf("replay %q: report names the override: %v, want %v:\n%s", tc.args, got, tc.override, out)
		}
	}
	st2 := filepath.Join(dir, "r2.csv")
	if code, out := execute(t, ctx, "run", "--app", "alerts", "--option", "colour=red", "--read", "once-earliest", "--input", in, "--store", st2); code != cli.ExitFailure {
		t.Errorf("run with an option alerts does not take: exit %d, want %d:\n%s", code, cli.ExitFailure, out)
	}
}

// counterApp counts the lines it is given, per account (the first field)
// with option scope=key, all together with scope=all (the default): its key
// depends on its options, and with scope=all it cannot run on several
// workers (core.ErrNoSplit).
func counterApp() core.App {
	scope := func(o map[string]string) (string, error) {
		switch s := o["scope"]; s {
		case "", "all":
			return "all", nil
		case "key":
			return s, nil
		default:
			return "", fmt.Errorf("%w: scope %q", core.ErrOption, s)
		}
	}
	account := func(item any) string { a, _, _ := strings.Cut(item.(string), ","); return a }
	return core.App{Name: "counter",
		Decode: func(b []byte) (any, error) { var s string; err := json.Unmarshal(b, &s); return s, err },
		KeyFor: func(o map[string]string) (func(any) string, error) {
			s, err := scope(o)
			if err != nil {
				return nil, err
			}
			if s == "all" {
				return nil, fmt.Errorf("%w: scope=all counts every account's lines together", core.ErrNoSplit)
			}
			return account, nil
		},
		New: func(o map[string]string) (core.Processor, error) {
			s, err := scope(o)
			if err != nil {
				return nil, err
			}
			counts := map[string]int{}
			return core.ProcessorFunc(func(c *core.Cycle, ev any) error {
				k := "all"
				if s == "key" {
					k = account(ev)
				}
				counts[k]++
				c.Emit("counts", fmt.Sprintf("%s=%d", k, counts[k]))
				return nil
			}), nil
		}}
}

// TestARunRefusesWorkersItsAppCannotBeSplitOn: an app's key sees its
// options (core.App.KeyFor): with scope=key the counter runs on 4
// key-ordered workers; with scope=all it cannot be split, and a run on
// several workers, in any order, is refused before any work (exit 2, no
// file created); on one worker it runs.
func TestARunRefusesWorkersItsAppCannotBeSplitOn(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"key, 4 workers", []string{"--option", "scope=key", "--workers", "4"}, cli.ExitOK},
		{"all, 4 workers", []string{"--option", "scope=all", "--workers", "4"}, cli.ExitFailure},
		{"default, 4 workers unordered", []string{"--workers", "4", "--order", "none"}, cli.ExitFailure},
		{"all, 1 worker", []string{"--option", "scope=all"}, cli.ExitOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			in, st := filepath.Join(dir, "in.txt"), filepath.Join(dir, "r.csv")
			writeLines(t, in, "alice,1", "bob,2", "alice,3", "carol,4")
			before := listing(t, dir)
			var out bytes.Buffer
			args := append([]string{"run", "--app", "counter", "--read", "once-earliest", "--input", in, "--store", st}, tc.args...)
			code := newCLI(&out, cli.WithApps(counterApp())).Execute(t.Context(), args)
			if code != tc.want {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.want, out.String())
			}
			if code != cli.ExitOK {
				if !strings.Contains(out.String(), "cannot run on several workers") {
					t.Errorf("the refusal does not say why:\n%s", out.String())
				}
				if after := listing(t, dir); !slices.Equal(after, before) {
					t.Errorf("a refused run left files: %q, before %q", after, before)
				}
			}
		})
	}
}

// TestARunRecordsItsOptionsButNeverItsStateFile: the recording's META holds
// the options of --option, never the state file nor how it is saved
// (--state, --state-every: live side effects a replay must not be given),
// and the run replays identical with no option.
func TestARunRecordsItsOptionsButNeverItsStateFile(t *testing.T) {
	dir := t.TempDir()
	in, st := filepath.Join(dir, "in.txt"), filepath.Join(dir, "r.csv")
	writeLines(t, in, "alice,5", "bob,7")
	ctx := t.Context()
	if code, out := execute(t, ctx, "run", "--app", "ledger", "--state", filepath.Join(dir, "ledger.json"), "--state-every", "5",
		"--read", "once-earliest", "--input", in, "--store", st); code != cli.ExitOK {
		t.Fatalf("run exit %d:\n%s", code, out)
	}
	r, err := csvstore.Open(st)
	if err != nil {
		t.Fatal(err)
	}
	got := r.Meta().AppOptions
	r.Close()
	if want := map[string]map[string]string{"ledger": {}}; !maps.EqualFunc(got, want, maps.Equal) {
		t.Errorf("META appOptions %v, want %v", got, want)
	}
	if code, out := execute(t, ctx, "replay", st); code != cli.ExitOK {
		t.Errorf("replay exit %d:\n%s", code, out)
	}
}
