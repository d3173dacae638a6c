package cli_test

import (
	"context"
	"strings"
	"testing"
)

// TestEveryCommandLineCobraCannotParseIsAUsageError: an unknown command, an
// unknown flag, an unknown shorthand flag, a flag without its value and a
// flag with a bad value all exit 2 with the usage hint of the command
// they were given to, typed as usage errors, never recognised by the text
// of cobra's messages.
func TestEveryCommandLineCobraCannotParseIsAUsageError(t *testing.T) {
	tests := []struct {
		args []string
		want string // the error line
		hint string // the command named in the hint
	}{
		{[]string{"nosuch"}, `blackbox: unknown command "nosuch" for "blackbox"`, "blackbox"},
		{[]string{"golden", "nosuch"}, `blackbox: unknown command "nosuch" for "blackbox golden"`, "blackbox golden"},
		{[]string{"--bogus"}, "blackbox: unknown flag: --bogus", "blackbox"},
		{[]string{"verify", "-z", "x.csv"}, "blackbox: unknown shorthand flag: 'z' in -z", "blackbox verify"},
		{[]string{"demo", "--lines"}, "blackbox: flag needs an argument: --lines", "blackbox demo"},
		{[]string{"demo", "--lines", "many"}, `blackbox: invalid argument "many" for "--lines" flag`, "blackbox demo"},
		{[]string{"run", "--app", "ledger", "--input", "in.txt", "--store", "rec.csv", "--latch", "sometimes"},
			`blackbox: unknown --latch "sometimes" (want never-drop, every-loss or nothing)`, "blackbox run"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out := execute(t, context.Background(), tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2; output:\n%s", code, out)
			}
			if !strings.HasPrefix(out, tt.want) {
				t.Errorf("output %q, want it to begin with %q", out, tt.want)
			}
			if hint := "Run '" + tt.hint + " --help' for usage.\n"; !strings.HasSuffix(out, hint) {
				t.Errorf("output %q, want it to end with %q", out, hint)
			}
		})
	}
}
