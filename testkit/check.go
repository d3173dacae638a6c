package testkit

import (
	"context"
	"strings"
	"testing"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/golden"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
)

// ReplaysIdentical replays rec with apps (each processor built with the
// options its recording holds) and fails the test, with the replay's
// report, unless it is identical, complete and lossless. It returns the
// report.
func ReplaysIdentical(t testing.TB, rec store.Reader, apps ...core.App) *replayer.Report {
	t.Helper()
	rep, err := replayer.Replay(context.Background(), rec, apps, replayer.Options{})
	if err != nil {
		t.Fatalf("testkit: replay: %v", err)
	}
	if !rep.Identical || !rep.Complete || !rep.Lossless {
		var b strings.Builder
		_ = rep.WriteText(&b)
		t.Fatalf("testkit: the replay is not identical, complete and lossless:\n%s", b.String())
	}
	return rep
}

// Golden checks the golden cases of dir (golden.Check): each case's
// recording replays identical with apps. With update (a test's -update
// flag) it first records every case again (golden.Update): review the
// change with git diff.
func Golden(t testing.TB, dir string, update bool, apps ...core.App) {
	t.Helper()
	if update {
		if err := golden.Update(dir, apps...); err != nil {
			t.Fatalf("testkit: golden update of %s: %v", dir, err)
		}
	}
	golden.Check(t, dir, apps...)
}
