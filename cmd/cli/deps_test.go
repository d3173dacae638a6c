package cli_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/blackbox-audit/blackbox/cmd/cli"
)

// TestAUserBinaryLinksNoFakeKafkaBrokerNorTortureHarness: a user's binary
// built with cli.New links what package cli imports; the fake Kafka broker
// (kfake, demo --kafka's cluster) and the torture harness are only
// cmd/blackbox's (internal/blackboxcli), so they are not among cli's
// dependencies. (They were, through cmd/cli/kafka.go and torture.go.)
func TestAUserBinaryLinksNoFakeKafkaBrokerNorTortureHarness(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	for _, pkg := range []string{".", "../blackbox"} {
		out, err := exec.Command(gobin, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		for _, forbidden := range []string{"github.com/twmb/franz-go/pkg/kfake", "github.com/blackbox-audit/blackbox/torture",
			"github.com/blackbox-audit/blackbox/internal/blackboxcli"} {
			got, want := slices.Contains(deps, forbidden), pkg == "../blackbox"
			if got != want {
				t.Errorf("go list -deps %s: has %s %v, want %v", pkg, forbidden, got, want)
			}
		}
	}
}

// TestDemoKafkaInAUserBinaryIsAUsageError: a binary built with cli.New
// alone has no in-process cluster for demo --kafka: it refuses the flag
// (exit 2, naming the option that gives one) instead of linking kfake.
func TestDemoKafkaInAUserBinaryIsAUsageError(t *testing.T) {
	var out bytes.Buffer
	code := cli.New(cli.WithStdout(&out), cli.WithStderr(&out)).Execute(t.Context(),
		[]string{"demo", "--kafka", "--dir", t.TempDir(), "--lines", "10"})
	if want := "blackbox: demo --kafka: this binary has no in-process Kafka cluster (cmd/blackbox has one: cli.WithKafkaDemo)\n"; code != cli.ExitFailure || !strings.HasPrefix(out.String(), want) {
		t.Errorf("exit %d:\n%s\nwant exit %d, starting %q", code, out.String(), cli.ExitFailure, want)
	}
}
