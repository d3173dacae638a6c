package cli_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/core"
)

// TestAUsersBinarySaysItsNameAndListsOnlyWhatItCanRun: a binary of its own
// (WithName, its own app, no built-in apps) names itself in its usage,
// help and errors, never blackbox; it has no demo (which runs the built-in
// ledger), and crashtest asks for --app; a binary with the built-in apps
// has demo.
func TestAUsersBinarySaysItsNameAndListsOnlyWhatItCanRun(t *testing.T) {
	mine := []cli.Option{cli.WithName("wc"), cli.WithoutBuiltinApps(), cli.WithApps(counterApp())}
	for _, tc := range []struct {
		name     string
		opts     []cli.Option
		args     []string
		code     int
		has, not []string
	}{
		{"help", mine, []string{"--help"}, cli.ExitOK, []string{"wc [command]", "wc records everything", "  run "}, []string{"blackbox", "demo"}},
		{"run help", mine, []string{"run", "--help"}, cli.ExitOK, []string{"wc run --app NAME"}, []string{"blackbox "}},
		{"a usage error", mine, []string{"run", "--nope"}, cli.ExitFailure, []string{"wc: unknown flag: --nope", "Run 'wc run --help' for usage."},
			[]string{"blackbox"}},
		{"demo", mine, []string{"demo"}, cli.ExitFailure, []string{`wc: unknown command "demo" for "wc"`}, []string{"blackbox"}},
		{"crashtest", mine, []string{"crashtest"}, cli.ExitFailure, []string{"wc: crashtest needs --app (known: counter)"}, nil},
		{"replacing the ledger", []cli.Option{cli.WithApps(core.App{Name: "ledger", New: counterApp().New})}, []string{"--help"}, cli.ExitOK,
			[]string{"blackbox [command]"}, []string{"demo"}},
		{"built-in apps", nil, []string{"--help"}, cli.ExitOK, []string{"blackbox [command]", "  demo "}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			code := cli.New(append([]cli.Option{cli.WithStdout(&out), cli.WithStderr(&out)}, tc.opts...)...).Execute(t.Context(), tc.args)
			if code != tc.code {
				t.Errorf("exit %d, want %d:\n%s", code, tc.code, out.String())
			}
			for _, s := range tc.has {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output lacks %q:\n%s", s, out.String())
				}
			}
			for _, s := range tc.not {
				if strings.Contains(out.String(), s) {
					t.Errorf("output holds %q:\n%s", s, out.String())
				}
			}
		})
	}
}
