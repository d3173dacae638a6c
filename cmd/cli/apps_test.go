package cli_test

import (
	"slices"
	"testing"

	"github.com/blackbox-audit/blackbox/cmd/cli"
	"github.com/blackbox-audit/blackbox/core"
)

// TestWithoutBuiltinAppsWorksInAnyOrderOfTheOptions: WithoutBuiltinApps
// leaves the built-in apps out whether it comes before or after WithApps,
// and keeps every app WithApps registered.
func TestWithoutBuiltinAppsWorksInAnyOrderOfTheOptions(t *testing.T) {
	mine := cli.WithApps(map[string]cli.App{"mine": {New: func(cli.AppOptions) (core.Processor, error) { return nil, nil }}})
	other := cli.WithApps(map[string]cli.App{"other": {New: func(cli.AppOptions) (core.Processor, error) { return nil, nil }}})
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
